"""HTTP listeners (``http: yes``): the connections they accept, served from
the router's own loop (``server``), who is asking (``auth``), the web console
and its JSON management endpoint (``console``), ``/metrics`` (``metrics``),
AMQP over WebSockets (``websockets``) and TLS for both (``tls_pipe``).

Owns HTTP; must not reach into the forwarding parts: management requests go
through the agent.
"""
