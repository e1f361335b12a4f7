"""The per-message path: receiving a delivery and choosing its destinations
(``forwarder``, and ``network`` where other routers are involved), sending
copies (``sending``) and large messages frame by frame (``streaming``, on
links of their own between routers: ``trunks``), outcomes and settlement
(``outcomes``), re-forwarding what a consumer gives back (``redelivery``),
relaying link-routed pairs (``relay``), message logging (``message_log``),
and the C accelerator of proton calls (``accel``).

Owns what happens per message; must not allocate effects per message or make
routing decisions the core's records do not already hold.
"""
