"""Links: the table from a proton link to the core's link record (``table``),
a peer's attach and detach checked by policy and decided by the core
(``attaching``, termini in ``endpoints``), and the links the router attaches
itself: auto-links, the far end of a link-routed pair, an edge's uplink
(``ownlinks``).

Owns turning attach and detach frames into the core's inputs and its answers
into frames; must not route messages.
"""
