"""The web console and its JSON management endpoint on HTTP listeners
(docs/operations.md#the-web-console).

Owns the console's HTTP requests: the page (``/``, ``/console/``; its
files are the ``router/web`` folder packaged with the code), who is asking
(``router.adapter.http.auth``), whether policy lets that user change the
router, carrying out the management request the endpoint's path stands
for (``router.management.json_api``): with this router's agent, or by a
request routed through the network to another router's agent, whose
response comes back to an in-process consumer of this router's
``$console`` address.  It must not parse HTTP (``router.adapter.http.server``
does) nor know what a request means (the agent does).
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Sequence
from importlib import resources

import attrs

from router.adapter.admin.node import ManagementNode
from router.adapter.connections.settings import ListenerSettings
from router.adapter.http.auth import HttpAuth, basic_credentials, certificate_subject
from router.core import Effect, InLink
from router.core.policy import Policy
from router.management import Agent, Request, Response
from router.management.json_api import PREFIX, Answer, Call, answer, error, parse, to_json
from router.management.messages import encode_request
from router.management.workers import Plan, plan

__all__ = ["Console", "HttpCall", "Reply"]

log = logging.getLogger(__name__)

#: Sends the HTTP response: status, body, content type, extra headers.
Reply = Callable[[int, bytes, str, Sequence[tuple[str, str]]], None]

#: How long another router's agent has to answer.
REMOTE_TIMEOUT_S = 10.0
JSON = "application/json"
_PAGES = {"/": "index.html", "/console/": "index.html", "/console/index.html": "index.html",
          "/console/console.js": "console.js", "/console/console.css": "console.css"}
_TYPES = {"html": "text/html; charset=utf-8", "js": "text/javascript; charset=utf-8",
          "css": "text/css; charset=utf-8"}
_CHALLENGE = ("WWW-Authenticate", 'Basic realm="hop", charset="UTF-8"')


@attrs.frozen(kw_only=True)
class HttpCall:
    """One HTTP request for the console, as the HTTP server read it."""

    method: str
    target: str
    body: bytes
    authorization: bytes | None
    #: The client's IP address.
    host: str
    settings: ListenerSettings
    #: Its Content-Type, Origin and Host headers (None: absent).
    content_type: bytes | None = None
    origin: bytes | None = None
    host_header: bytes | None = None
    #: It came over TLS; the client certificate TLS checked (None: none).
    encrypted: bool = False
    certificate: dict[str, object] | None = None


def is_console_path(path: str, user_root: bool) -> bool:
    """Whether the console answers ``path`` (with a folder of the user's
    served too, ``/`` is the user's)."""
    if path.startswith(PREFIX) or path == PREFIX.rstrip("/"):
        return True
    return path in _PAGES and not (user_root and path == "/")


@attrs.define
class _Waiting:
    reply: Reply
    deadline: float
    router: str


class Console:
    """Serves the console and carries out its endpoint's requests.

    Args:
        agent: this router's agent.
        apply: carries out the effects of a request (as for AMQP requests).
        policy: who may change the router.
        node: the management node (None: management is off; only this
            router's agent is asked).
        router_id, edge_mode: this router (where remote answers come back).
        defer: runs a call at the loop's next wake-up.
        clock: monotonic seconds.
    """

    def __init__(self, *, agent: Agent, apply: Callable[[list[Effect]], None], policy: Policy,
                 node: ManagementNode | None, router_id: str, edge_mode: bool,
                 defer: Callable[[Callable[[], None]], None], clock: Callable[[], float],
                 auth: HttpAuth | None = None) -> None:
        self.agent = agent
        self.apply = apply
        self.policy = policy
        self.node = node
        self.router_id = router_id
        self.defer = defer
        self.clock = clock
        self.auth = auth if auth is not None else HttpAuth(clock=clock)
        self.waiting: dict[int, _Waiting] = {}
        self._ids = itertools.count(1)
        self._pages: dict[str, bytes] = {}
        self.reply_to = (f"amqp:/_edge/{router_id}/$console" if edge_mode
                         else f"amqp:/_topo/0/{router_id}/$console")
        self.sender: InLink | None = None
        if node is not None:
            self.sender = node.attach_answers("_local/$console", "$console", self._answered)

    # -- requests ---------------------------------------------------------------

    def serve(self, call: HttpCall, reply: Reply) -> None:
        """Answer ``call`` by ``reply``, now or when another router answers."""
        path = call.target.split("?", 1)[0]
        user = self._user(call)
        if isinstance(user, Answer):
            headers = [_CHALLENGE] if user.status == 401 else []
            reply(user.status, user.body, JSON, headers)
            return
        page = _PAGES.get(path)
        if page is not None:
            if call.method not in ("GET", "HEAD"):
                reply(405, b"method not allowed\n", "text/plain", ())
                return
            body = self._page(page)
            reply(200, body, _TYPES[page.rsplit(".", 1)[1]], [("Cache-Control", "no-cache")])
            return
        if path == PREFIX + "whoami":
            reply(200, to_json({"user": user, "write": self._may_write(call, user, None),
                                "router": self.router_id,
                                "authenticated": call.settings.authenticate_peer}), JSON, ())
            return
        parsed = parse(call.method, call.target, call.body)
        if isinstance(parsed, Answer):
            reply(parsed.status, parsed.body, JSON, ())
            return
        if parsed.write:
            forged = _forged(call)
            if forged is not None:
                reply(forged.status, forged.body, JSON, ())
                return
        if parsed.write and not self._may_write(call, user, parsed):
            why = ("management writes over HTTP need an authenticated user"
                   if user is None else f"policy does not let {user!r} {parsed.operation} "
                   f"{parsed.entity_type or 'this'}")
            denied = error(403, why)
            reply(denied.status, denied.body, JSON, ())
            return
        if parsed.router is None or parsed.router == self.router_id:
            if self.node is not None and self.node.workers is not None \
                    and plan(parsed.request.properties) is not Plan.ALONE:
                # About the whole router: the management node gathers the
                # rows of every worker, makes a change on each, finds the
                # worker that has a connection (docs/scaling.md#management).
                self._remote(attrs.evolve(parsed, router=self.router_id), reply)
                return
            done = self._local(parsed.request)
            reply(done.status, done.body, JSON, ())
        else:
            self._remote(parsed, reply)

    def _user(self, call: HttpCall) -> str | Answer | None:
        """The authenticated user (None: the listener does not authenticate),
        or the refusal to send."""
        settings = call.settings
        if not settings.authenticate_peer:
            return None
        subject = certificate_subject(call.certificate)
        if subject is not None:
            return subject
        if not HttpAuth.basic_allowed(settings, call.encrypted):
            return error(403, "this listener authenticates users with client certificates "
                              "(or PLAIN over TLS), and none was given")
        credentials = basic_credentials(call.authorization)
        if credentials is None or not self.auth.login(settings, credentials):
            return error(401, "log in with a user and password of this listener")
        return credentials.user

    def _may_write(self, call: HttpCall, user: str | None, parsed: Call | None) -> bool:
        if user is None:
            return False
        grant = self.policy.visitor(user=user, host=call.host,
                                    forced_vhost=call.settings.policy_vhost)
        if grant is None:
            return False
        operation = parsed.operation if parsed is not None else "CREATE"
        entity_type = parsed.entity_type if parsed is not None else ""
        return self.policy.may_manage(grant, operation, entity_type) is None

    def _local(self, request: Request) -> Answer:
        response = self.agent.handle(request)
        if response.effects:
            self.apply(list(response.effects))
        return answer(response)

    def _page(self, name: str) -> bytes:
        page = self._pages.get(name)
        if page is None:
            page = self._pages[name] = resources.files("router.web").joinpath(name).read_bytes()
        return page

    # -- other routers' agents -----------------------------------------------------

    def _remote(self, parsed: Call, reply: Reply) -> None:
        node, sender = self.node, self.sender
        if node is None or sender is None:
            reply(503, error(503, "this router serves no management").body, JSON, ())
            return
        if parsed.router is not None and not parsed.router.startswith("_edge/") \
                and not node.in_network(parsed.router):
            reply(404, error(404, f"no router {parsed.router!r} in the network").body, JSON, ())
            return
        correlation = next(self._ids)
        request = attrs.evolve(parsed.request, reply_to=self.reply_to,
                               correlation_id=correlation)
        target = f"amqp:/_topo/0/{parsed.router}/$management"
        if parsed.router is not None and parsed.router.startswith("_edge/"):
            target = f"amqp:/{parsed.router}/$management"
        elif parsed.router == self.router_id:
            target = "amqp:/_local/$management"
        self.waiting[correlation] = _Waiting(reply, self.clock() + REMOTE_TIMEOUT_S,
                                             parsed.router or "")
        node.send(sender, encode_request(request, to=target))

    def _answered(self, correlation: object, response: Response) -> None:
        """A remote agent's response reached ``$console`` (during routing:
        the HTTP reply waits for the loop's next wake-up)."""
        waiting = self.waiting.pop(correlation, None) if isinstance(correlation, int) else None
        if waiting is None:
            return  # timed out already
        done = answer(response)
        self.defer(lambda: waiting.reply(done.status, done.body, JSON, ()))

    def next_deadline(self) -> float | None:
        if not self.waiting:
            return None
        return min(w.deadline for w in self.waiting.values())

    def tick(self, now: float) -> None:
        for correlation, waiting in list(self.waiting.items()):
            if now >= waiting.deadline:
                del self.waiting[correlation]
                late = error(504, f"router {waiting.router!r} did not answer within "
                                  f"{REMOTE_TIMEOUT_S:g} s")
                waiting.reply(late.status, late.body, JSON, ())

    def close(self) -> None:
        self.waiting.clear()



def _forged(call: HttpCall) -> Answer | None:
    """A write another site's page may have made the browser send with the
    user's login (cross-site request forgery): one from another origin, or
    a body that is not declared JSON (only a JSON body makes a browser ask
    the router first, which it never allows across origins)."""
    if call.origin is not None and call.host_header is not None:
        origin_host = call.origin.split(b"://", 1)[-1].rstrip(b"/")
        if origin_host.lower() != call.host_header.lower():
            return error(403, "a change from a page of another origin is refused")
    if call.method in ("POST", "PATCH", "PUT"):
        kind = (call.content_type or b"").split(b";", 1)[0].strip().lower()
        if kind != b"application/json":
            return error(415, "a change is sent as application/json")
    return None
