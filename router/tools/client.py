"""A blocking AMQP management client for Hop's command-line tools.

Owns one request/response exchange with a router's management agent over a
proton ``BlockingConnection``: the connection, a dynamic reply receiver, the
request message (AMQP management application properties ``operation``,
``type``, ``name``, ``identity``, ``entityType``...), waiting for the response
with the matching correlation id, and turning a non-2xx ``statusCode`` into a
:class:`StatusError`.  It knows nothing of tables, JSON or click; it must not
import ``router.adapter`` or ``router.cli``.
"""

from __future__ import annotations

import contextlib
import itertools
import re
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, Final

import attrs
from proton import Delivery, Message, ProtonException, Timeout, Url
from proton.utils import BlockingConnection, LinkDetached, SendException

__all__ = [
    "DEFAULT_TIMEOUT_S",
    "DEFAULT_URL",
    "MANAGEMENT_TYPE",
    "PREFIX",
    "ConnectionFailed",
    "ManagementClient",
    "Response",
    "StatusError",
    "ToolError",
    "management_address",
]

DEFAULT_URL: Final = "amqp://127.0.0.1:5672"
DEFAULT_TIMEOUT_S: Final = 5.0
# The same text as router.management.schema.PREFIX; importing that package
# would load the whole management agent (a third of a second) for a constant.
PREFIX: Final = "org.apache.qpid.dispatch."
MANAGEMENT_TYPE: Final = "org.amqp.management"
#: Rows asked for per QUERY request (qdrouterd's tools page by 500 too).
QUERY_PAGE: Final = 500

_CONDITION: Final = re.compile(r"Condition\('[^']*', '(.*)'\)")
_OUTCOMES: Final = {Delivery.RELEASED: "released", Delivery.REJECTED: "rejected",
                     Delivery.MODIFIED: "modified"}


class ToolError(Exception):
    """Base of the errors the tools report on one line and exit 1 for."""


class ConnectionFailed(ToolError):
    """The router could not be reached, or the connection broke or timed out."""


class StatusError(ToolError):
    """The agent answered with a status code outside 200-299."""

    def __init__(self, status: int, description: str) -> None:
        super().__init__(f"{status}: {description}")
        self.status = status
        self.description = description


@attrs.frozen(kw_only=True)
class Response:
    """A management response: ``statusCode``, ``statusDescription`` and the body."""

    status: int
    description: str
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def management_address(url: str, router: str | None = None,
                       edge: str | None = None) -> tuple[str, str]:
    """Split ``url`` into the URL to connect to and the management node address.

    ``host:port`` and ``host`` are accepted without a scheme (``amqp`` is
    assumed, as qdstat does).  A path in the URL names the management node
    itself; otherwise ``router`` selects ``_topo/0/ROUTER/$management``,
    ``edge`` an edge router's ``_edge/EDGE/$management``, and neither the
    local ``$management``.

    Raises:
        ConnectionFailed: ``url`` cannot be parsed.
    """
    try:
        parsed = Url(url)
        path = parsed.path
        # Without the path; the port as a number ("amqp://h:5672", not "amqp://h:amqp").
        connect = Url(scheme=parsed.scheme, username=parsed.username,
                      password=parsed.password, host=parsed.host, port=int(parsed.port))
    except (ProtonException, ValueError) as exc:
        raise ConnectionFailed(f"bad URL {url!r}: {exc}") from None
    if path:
        address = path
    elif edge:
        address = f"_edge/{edge}/$management"
    elif router:
        address = f"_topo/0/{router}/$management"
    else:
        address = "$management"
    return str(connect), address


class ManagementClient:
    """Sends management requests to one management node and waits for each response.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, url: str = DEFAULT_URL, *, router: str | None = None,
                 edge: str | None = None, timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        """Connect and attach the request sender and the dynamic reply receiver.

        Raises:
            ConnectionFailed: the router is unreachable, refuses the
                connection or does not answer within ``timeout_s``.
        """
        self.url, self.address = management_address(url, router, edge)
        shown = Url(self.url)
        shown.password = None  # never echo a password in a message
        self.shown_url = str(shown)
        self.timeout_s = timeout_s
        self._ids = itertools.count(1)
        self._conn: Any = None
        try:
            username = Url(self.url).username
            # qdstat negotiates SASL only when credentials are given.
            self._conn = BlockingConnection(self.url, timeout=timeout_s,
                                            sasl_enabled=bool(username))
            self._receiver: Any = self._conn.create_receiver(None, dynamic=True)
            self._reply_to: str = self._receiver.remote_source.address
            self._sender = self._conn.create_sender(self.address)
        except LinkDetached as exc:
            self.close()
            raise ConnectionFailed(f"{self.shown_url} has no route to {self.address}: "
                                   f"{exc.condition or exc}") from None
        except (ProtonException, OSError) as exc:
            self.close()
            raise ConnectionFailed(self._describe(exc)) from None

    def __enter__(self) -> ManagementClient:
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.close()

    def retarget(self, address: str) -> None:
        """Send the next requests to the management node at ``address`` (another
        router's, reached through the one connected to).

        Raises:
            ConnectionFailed: the connection is closed, or the router refuses
                the sending link.
        """
        if self._conn is None:
            raise ConnectionFailed(f"connection to {self.shown_url} is closed")
        try:
            sender = self._conn.create_sender(address, name=f"{address}#{next(self._ids)}")
        except LinkDetached as exc:
            raise ConnectionFailed(f"{self.shown_url} has no route to {address}: "
                                   f"{exc.condition or exc}") from None
        except (ProtonException, OSError) as exc:
            raise ConnectionFailed(self._describe(exc)) from None
        old, self._sender, self.address = self._sender, sender, address
        with contextlib.suppress(ProtonException, OSError):
            old.close()

    def close(self) -> None:
        """Close the connection; errors on a connection already broken are ignored."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(ProtonException, OSError):
                conn.close()

    def _describe(self, exc: BaseException) -> str:
        if isinstance(exc, Timeout):
            return f"timed out after {self.timeout_s:g} s talking to {self.shown_url}"
        text = str(exc) or type(exc).__name__
        # proton says "Connection URL disconnected: Condition('name', 'description')".
        condition = _CONDITION.search(text)
        if condition:
            text = condition.group(1)
        return f"cannot reach {self.shown_url}: {text}"

    # -- requests ----------------------------------------------------------------

    def request(self, operation: str, body: object = None,
                **properties: object) -> Response:
        """Send one request; properties whose value is None are left out.

        Raises:
            ConnectionFailed: the connection broke or no response came in time.
        """
        if self._conn is None:
            raise ConnectionFailed(f"connection to {self.shown_url} is closed")
        correlation_id = next(self._ids)
        props = {k: v for k, v in properties.items() if v is not None}
        props["operation"] = operation
        message = Message(body=body, properties=props,
                          reply_to=self._reply_to, correlation_id=correlation_id)
        try:
            self._sender.send(message, timeout=self.timeout_s)
            while True:
                reply = self._receiver.receive(timeout=self.timeout_s)
                if self._receiver.fetcher.unsettled:  # responses usually come pre-settled
                    self._receiver.accept()
                if reply.correlation_id == correlation_id:
                    break
        except SendException as exc:
            outcome = _OUTCOMES.get(exc.state, f"settled with state {exc.state}")
            raise ConnectionFailed(f"the request to {self.address} was {outcome} "
                                   "(is there such a router?)") from None
        except (ProtonException, OSError) as exc:
            raise ConnectionFailed(self._describe(exc)) from None
        reply_props: dict[str, Any] = reply.properties or {}
        status = reply_props.get("statusCode")
        if not isinstance(status, int):
            raise ToolError(f"malformed response: no integer statusCode in {reply_props!r}")
        return Response(status=int(status),  # not proton's int32, whose str is "int32(200)"
                        description=str(reply_props.get("statusDescription", "")),
                        body=reply.body)

    def call(self, operation: str, body: object = None, **properties: object) -> Any:
        """Send one request and return the response body.

        Raises:
            StatusError: the status code is not 2xx.
            ConnectionFailed: as :meth:`request`.
        """
        response = self.request(operation, body, **properties)
        if not response.ok:
            raise StatusError(response.status, response.description)
        return response.body

    def node_call(self, operation: str, body: object = None, **properties: object) -> Any:
        """An operation of the management node itself (``name`` "self")."""
        return self.call(operation, body, type=MANAGEMENT_TYPE, name="self", **properties)

    def query(self, entity_type: str | None, attribute_names: Iterable[str] = (),
              limit: int | None = None) -> list[dict[str, Any]]:
        """QUERY every entity of ``entity_type``, paging through the results.

        Args:
            entity_type: the fully qualified type; None: every type.
            attribute_names: the attributes wanted; none means all of them.
            limit: at most this many rows (None or 0: all).

        Returns:
            One map per entity, attribute name to value, in the agent's order.
        """
        names = list(attribute_names)
        rows: list[dict[str, Any]] = []
        while True:
            wanted = QUERY_PAGE if not limit else min(QUERY_PAGE, limit - len(rows))
            body = self.node_call("QUERY", {"attributeNames": names}, entityType=entity_type,
                                  offset=len(rows), count=wanted)
            columns, results = _query_body(body)
            rows.extend(dict(zip(columns, row, strict=False)) for row in results)
            if len(results) < wanted or (limit and len(rows) >= limit):
                return rows


def _query_body(body: object) -> tuple[list[str], list[list[Any]]]:
    """The ``attributeNames`` and ``results`` of a QUERY response body."""
    if not isinstance(body, Mapping):
        raise ToolError(f"malformed response: QUERY body is not a map: {body!r}")
    columns = [str(name) for name in body.get("attributeNames") or []]
    results = [list(row) for row in body.get("results") or []]
    return columns, results
