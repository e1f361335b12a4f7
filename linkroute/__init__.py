"""Link routes: specs now; matching attaches and pairing proxied links later.

Must not import proton, lark or the router.
"""

from linkroute.spec import LinkRouteError, LinkRouteSpec

__all__ = ["LinkRouteError", "LinkRouteSpec"]
