"""Embedded peer routers: a Hop router inside an application's process.

``peer("peer://GROUP/NAME?options")`` starts an interior router on a thread
of its own, joined to the peer group GROUP under the id NAME, with a
listener on 127.0.0.1 for the application's own clients::

    import router as hop
    from proton.utils import BlockingConnection

    with hop.peer("peer://orders/node1") as p:
        conn = BlockingConnection(p.url)
        ...

Applications in other processes, or on other hosts, that embed peers of the
same group find this one by its multicast beacons and form one network of
routers with it: they exchange messages with no router process of their
own.  Leaving the ``with`` block (or ``stop()``, or the interpreter exiting)
stops the router: unsettled deliveries get their outcome, connections close.

Options in the URL's query are the ``discovery`` section's attributes
(``address``, ``port``, ``interface``, ``ttl``, ``announceInterval``,
``expiry``, ``secret``, ``secretFile``), plus ``host`` (where both
listeners listen, default 127.0.0.1), ``clientPort`` and ``peerPort``
(default 0: a free port).  Owns the URL's meaning and the router's thread;
building the router is ``router.assembly``'s.
"""

from __future__ import annotations

import atexit
import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TypeVar
from urllib.parse import parse_qsl, urlsplit

import conf
from router.assembly import Assembled, assemble, random_token
from router.core import Role
from router.service import ServiceError

__all__ = ["Peer", "PeerError", "peer"]

log = logging.getLogger(__name__)

T = TypeVar("T")

#: URL options that set up the listeners rather than the ``discovery`` section.
_LISTENER_OPTIONS = ("host", "clientPort", "peerPort")
_DISCOVERY_OPTIONS = ("address", "port", "interface", "ttl", "announceInterval", "expiry",
                      "secret", "secretFile")


class PeerError(Exception):
    """The peer URL or its router is unusable (bad URL or option, a listener or
    the multicast socket that cannot be opened)."""


def peer_conf(url: str,
              sections: Iterable[tuple[str, Mapping[str, object]]] = ()) -> conf.RouterConf:
    """The configuration of the router ``url`` describes, with ``sections``
    (``(type, attributes)`` pairs, as in the JSON form) added.

    Raises:
        PeerError: not a ``peer://GROUP/NAME`` URL, an unknown option, a bad value.
    """
    parts = urlsplit(url)
    if parts.scheme != "peer" or not parts.netloc:
        raise PeerError(f"{url}: expected peer://GROUP/NAME[?options]")
    group = parts.netloc
    name = parts.path.strip("/") or f"Peer_{random_token()}"
    if "/" in name:
        raise PeerError(f"{url}: the router name {name!r} contains '/'")
    options = dict(parse_qsl(parts.query, keep_blank_values=True, strict_parsing=False))
    unknown = sorted(set(options) - set(_LISTENER_OPTIONS) - set(_DISCOVERY_OPTIONS))
    if unknown:
        known = ", ".join((*_LISTENER_OPTIONS, *_DISCOVERY_OPTIONS))
        raise PeerError(f"{url}: unknown option{'s' if len(unknown) > 1 else ''} "
                        f"{', '.join(unknown)} (known: {known})")
    host = options.get("host", "127.0.0.1")
    discovery: dict[str, object] = {"group": group, "listener": "peers"}
    discovery.update((k, v) for k, v in options.items() if k in _DISCOVERY_OPTIONS)
    layout: list[tuple[str, Mapping[str, object]]] = [
        ("router", {"mode": "interior", "id": name}),
        ("listener", {"name": "clients", "host": host, "port": options.get("clientPort", "0"),
                      "role": "normal", "saslMechanisms": "ANONYMOUS",
                      "authenticatePeer": False}),
        ("listener", {"name": "peers", "host": host, "port": options.get("peerPort", "0"),
                      "role": "inter-router", "saslMechanisms": "ANONYMOUS",
                      "authenticatePeer": False}),
        ("discovery", discovery),
        *sections,
    ]
    try:
        return conf.parse(json.dumps([[kind, dict(attrs)] for kind, attrs in layout]),
                          f"{url}.json")
    except conf.ConfError as error:
        problems = "; ".join(d.message for d in error.diagnostics)
        raise PeerError(f"{url}: {problems}") from None


class Peer:
    """An embedded router: ``start()`` it (or use it as a context manager),
    connect the application's clients to ``url``, ``stop()`` it.

    Args:
        url: ``peer://GROUP/NAME?options`` (see the module's documentation).
        sections: further configuration, as ``(type, attributes)`` pairs of
            the JSON form, e.g. ``[("address", {"prefix": "jobs",
            "distribution": "balanced"})]``.
        shutdown_grace_s: how long ``stop()`` lets in-flight deliveries settle.
    """

    def __init__(self, url: str, *,
                 sections: Iterable[tuple[str, Mapping[str, object]]] = (),
                 shutdown_grace_s: float = 2.0) -> None:
        self.peer_url = url
        self.conf = peer_conf(url, sections)
        self.shutdown_grace_s = shutdown_grace_s
        self._assembled: Assembled | None = None
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None

    # -- life ------------------------------------------------------------------

    def start(self) -> Peer:
        """Open the listeners, join the group and run the router on its own
        thread; returns once clients can connect.

        Raises:
            PeerError: a listener or the group's socket cannot be opened.
        """
        if self._assembled is not None:
            raise PeerError(f"{self.peer_url}: already started")
        try:
            assembled = assemble(self.conf, self.peer_url,
                                 shutdown_grace_s=self.shutdown_grace_s)
        except ServiceError as exc:
            raise PeerError(f"{self.peer_url}: {exc}") from None
        self._assembled = assembled
        assembled.engine.start_connectors()
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"hop-peer-{assembled.router_id}")
        self._thread.start()
        atexit.register(self.stop)
        log.info("Embedded router %s joined peer group %s; clients connect to %s",
                 assembled.router_id, self.group, self.url)
        return self

    def _run(self) -> None:
        assert self._assembled is not None
        engine = self._assembled.engine
        try:
            engine.run()
        except BaseException as exc:  # reported by stop(); the thread must not die silently
            self._failure = exc
            log.exception("Embedded router %s stopped on an error", self.router_id)
        finally:
            engine.close()

    def stop(self, timeout: float | None = None) -> None:
        """Stop the router: in-flight deliveries may settle for the grace
        period, the rest are released, every connection is closed.  Waits up
        to ``timeout`` s (default: the grace period and 5 s more).

        Raises:
            PeerError: the router's thread did not end in time, or ended on an error.
        """
        thread, assembled = self._thread, self._assembled
        if thread is None or assembled is None:
            return
        atexit.unregister(self.stop)
        if thread.is_alive():
            assembled.engine.stop()
            thread.join(self.shutdown_grace_s + 5.0 if timeout is None else timeout)
            if thread.is_alive():
                assembled.engine.stop()  # a second request ends the grace period
                thread.join(5.0)
                if thread.is_alive():
                    raise PeerError(f"{self.peer_url}: the router did not stop")
        self._thread = None
        if self._failure is not None:
            raise PeerError(f"{self.peer_url}: the router failed: {self._failure!r}")

    def __enter__(self) -> Peer:
        return self if self._assembled is not None else self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- what the application sees ---------------------------------------------

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    @property
    def router_id(self) -> str:
        return self._started().router_id

    @property
    def group(self) -> str:
        assert self.conf.discovery is not None
        return self.conf.discovery.group

    @property
    def url(self) -> str:
        """Where the application's clients connect: ``amqp://HOST:PORT``."""
        clients = [li for li in self._started().bound if li.settings.role is Role.NORMAL]
        host = clients[0].host
        return f"amqp://{'[' + host + ']' if ':' in host else host}:{clients[0].port}"

    def peers(self, timeout: float = 5.0) -> set[str]:
        """The ids of the other routers this one has a route to."""
        def reachable() -> set[str]:
            network = self._started().engine.router.network
            if network is None:
                return set()
            return {node.id for node in network.protocol.node_table()
                    if not node.is_self and node.cost is not None}
        return self.call(reachable, timeout)

    def call(self, function: Callable[[], T], timeout: float = 5.0) -> T:
        """Run ``function`` on the router's thread (where its state may be read)
        and return its result.

        Raises:
            PeerError: the router is not running or did not answer in ``timeout`` s.
        """
        assembled = self._started()
        if not self.running:
            raise PeerError(f"{self.peer_url}: the router is not running")
        done = threading.Event()
        box: list[T] = []
        failure: list[BaseException] = []

        def run() -> None:
            try:
                box.append(function())
            except BaseException as exc:
                failure.append(exc)
            finally:
                done.set()

        assembled.engine.defer(run)
        if not done.wait(timeout):
            raise PeerError(f"{self.peer_url}: the router did not answer in {timeout:g} s")
        if failure:
            raise failure[0]
        return box[0]

    def _started(self) -> Assembled:
        if self._assembled is None:
            raise PeerError(f"{self.peer_url}: not started")
        return self._assembled

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<Peer {self.peer_url} {state}>"


def peer(url: str, *, sections: Iterable[tuple[str, Mapping[str, object]]] = (),
         shutdown_grace_s: float = 2.0) -> Peer:
    """An embedded router for ``peer://GROUP/NAME?options``; use it as a
    context manager (which starts it) or call ``start()``."""
    return Peer(url, sections=sections, shutdown_grace_s=shutdown_grace_s)
