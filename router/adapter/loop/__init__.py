"""The loop and its timers: one epoll and the descriptors registered with it
(``eventloop``), the running router and its graceful stop (``engine``), and
the once-a-second sweep of every connection's timers (``sweep``).

Owns waking up and calling the parts; must not know what a descriptor is or
what a part does with its tick.
"""
