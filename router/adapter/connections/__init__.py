"""AMQP connections and their sockets: proton transports fed from and drained
to non-blocking sockets (``transports``, their records in ``state``),
listening (``listeners``) and connecting with back-off and failover
(``connectors``), peer groups found by multicast (``peergroup``), TLS and the
sslProfiles (``tls``, ``certificates``), a peer's OPEN (``opening``), the
protocol trace (``tracing``) and the settings built from the configuration
(``settings``).

Owns bytes and connections; must not look inside a message or decide where
one goes.
"""
