"""Delegated authentication: a listener's SASL relayed to an authentication
service (docs/security.md#delegated-authentication).

Owns, for each connection accepted by a listener with a ``saslPlugin``, the
SASL exchange proton's transport makes with the client, relayed to and from
a connection of the router's own to the plugin's service: the service's
mechanisms offered to the client (those the listener allows), the client's
``sasl-init`` and responses passed on, the service's challenges and outcome
passed back.  Once the service has authenticated the user, its OPEN says
who the user is (``authenticated-identity``) and what it may send to and
receive from (``address-authz``), and the router's connection to it is
closed; the client's connection then goes on with that user and those
permissions (``Conn.authz``, which policy applies, docs/security.md#policy).
A service that cannot be reached, fails its TLS, closes early or does not
answer within ``SERVICE_TIMEOUT_S`` fails the client's authentication with
a SASL outcome, logged; the listener serves every other client meanwhile.

Each relay is the context of both its transports' SASL through proton's
plug-in interface (``router.adapter.connections.saslplugin``).  The
exchange happens once per connection, never per message.
"""

from __future__ import annotations

import contextlib
import logging
import os
import select
import socket
from collections.abc import Callable, Set
from typing import Any, Final

from proton import SSL, Array, SSLException, Transport

from router.adapter.connections import saslplugin
from router.adapter.connections.dialing import dial, family_of, is_address, resolve
from router.adapter.connections.settings import AuthServiceSettings
from router.adapter.connections.state import Conn
from router.adapter.loop.eventloop import READ, WRITE, EventLoop
from router.adapter.pn import NULL, decoded, ffi, lib, pn_bytes, to_str
from router.core.policy import AddressAuthz

log = logging.getLogger(__name__)

#: How long an authentication service may take to authenticate a client.
SERVICE_TIMEOUT_S: Final = 15.0
#: Mechanisms that send the password as it is: offered to a client without
#: TLS only where the listener allows insecure mechanisms, as local ones are.
PLAINTEXT_MECHANISMS: Final = frozenset({"PLAIN", "LOGIN"})
#: The connection capability asking the service for the user's permissions.
ADDRESS_AUTHZ_CAPABILITY: Final = "ADDRESS-AUTHZ"
_CAPABILITY: Final = ADDRESS_AUTHZ_CAPABILITY.encode()
_IO_BUFFER: Final = 65536



def authz_of(properties: object) -> tuple[str | None, AddressAuthz | None]:
    """Who the user is and what it may use, from the properties of the
    service's OPEN: ``authenticated-identity`` (a map whose ``sub`` is the
    user, or the user itself) and ``address-authz`` (a map of addresses to
    ``send`` and ``recv`` permissions; absent: nothing is restricted)."""
    if not isinstance(properties, dict):
        return None, None
    user: str | None = None
    identity = properties.get("authenticated-identity")
    if isinstance(identity, dict):
        sub = identity.get("sub")
        user = str(sub) if sub is not None else None
    elif isinstance(identity, str):
        user = identity
    permissions = properties.get("address-authz")
    if not isinstance(permissions, dict):
        return user, None
    sources: list[str] = []
    targets: list[str] = []
    for address, allowed in permissions.items():
        if not isinstance(address, str):
            continue
        if isinstance(allowed, Array):
            allowed = allowed.elements
        granted = {str(p) for p in allowed} if isinstance(allowed, (list, tuple)) else set()
        if "send" in granted:
            targets.append(address)
        if "recv" in granted:
            sources.append(address)
    return user, AddressAuthz(sources=tuple(sources), targets=tuple(targets))


def offered(mechanisms: str, *, encrypted: bool, insecure_allowed: bool) -> str:
    """The service's mechanisms a client may be offered: without TLS, those
    that send the password as it is only where the listener allows them."""
    names = mechanisms.split()
    if not encrypted and not insecure_allowed:
        names = [n for n in names if n.upper() not in PLAINTEXT_MECHANISMS]
    return " ".join(names)


class Relay:
    """One client's authentication, relayed (the context of both of its
    transports' SASL, ``saslplugin.SaslContext``): what each side is to post
    next.  ``to_service`` is ``"init"`` or ``"response"`` once the client
    has said it; ``to_client`` is ``"mechanisms"``, ``"challenge"`` or
    ``"outcome"`` once the service has.
    """

    def __init__(self, relays: AuthRelays, client: Conn, settings: AuthServiceSettings,
                 deadline: float) -> None:
        self.relays = relays
        self.client = client
        self.settings = settings
        self.deadline = deadline
        self.handle = saslplugin.new_handle(self)
        self.service: ServiceConnection | None = None
        # What proton reads while it posts a frame (kept until replaced).
        self.mechanisms: saslplugin.Chars | None = None
        self.mechanism = b""
        self.response: saslplugin.Chars | None = None
        self.response_size = 0
        self.challenge: saslplugin.Chars | None = None
        self.challenge_size = 0
        self.user: saslplugin.Chars | None = None  # proton keeps it as the client's user
        self.to_service: str | None = None
        self.to_client: str | None = None
        self.succeeded = False
        self.done = False
        self.client_freed = False
        self.service_freed = True  # until the service's transport exists

    # -- what proton tells (from inside a transport) -------------------------------------

    def sasl_server_started(self) -> None:
        """The client's transport begins SASL: reach the service."""
        if self.service is None:
            self.service = ServiceConnection(self)
            self.service_freed = False
            self.service.connect()

    def sasl_mechanisms(self) -> saslplugin.Chars | None:
        return self.mechanisms

    def sasl_init(self, mechanism: bytes, response: bytes) -> None:
        if self.done:
            # The service failed before it offered mechanisms: the client
            # chose among the listener's, and hears the failure now.
            self.to_client = "outcome"
            self._wake_client()
            return
        self.mechanism = mechanism
        self.response = saslplugin.chars(response) if response else None
        self.response_size = len(response)
        self.to_service = "init"
        self._wake_service()

    def sasl_response(self, response: bytes) -> None:
        self.response = saslplugin.chars(response) if response else None
        self.response_size = len(response)
        self.to_service = "response"
        self._wake_service()

    def sasl_offered(self, mechanisms: str) -> bool:
        client = self.client.tptr
        names = offered(mechanisms, encrypted=saslplugin.encrypted(client),
                        insecure_allowed=saslplugin.insecure_allowed(client))
        if not names:
            self.fail(f"it offers no mechanism this listener may offer a client like this one "
                      f"({mechanisms!r})")
            return False
        self.mechanisms = saslplugin.chars(names.encode())
        self.to_client = "mechanisms"
        self._wake_client()
        return True

    def sasl_challenge(self, challenge: bytes) -> None:
        self.challenge = saslplugin.chars(challenge) if challenge else None
        self.challenge_size = len(challenge)
        self.to_client = "challenge"
        self._wake_client()

    def sasl_outcome(self, ok: bool) -> None:
        """The service's outcome; a success is passed on once its OPEN says
        who the user is (``service_opened``)."""
        if not ok:
            log.info("[C%d] authentication refused by the authentication service %s:%d",
                     self.client.core.conn_id, self.settings.host, self.settings.port)
            self._finish(False)

    def sasl_prepare(self, transport: Any, server: bool) -> None:
        if server:
            what, self.to_client = self.to_client, None
            if what == "mechanisms":
                saslplugin.post_mechanisms(transport)
            elif what == "challenge":
                saslplugin.post_challenge(transport, self.challenge, self.challenge_size)
            elif what == "outcome":
                saslplugin.post_outcome(transport, self.user if self.succeeded else None)
            return
        what, self.to_service = self.to_service, None
        if what == "init":
            saslplugin.post_init(transport, self.mechanism, self.settings.realm, self.response,
                                 self.response_size)
        elif what == "response":
            saslplugin.post_response(transport, self.response, self.response_size)

    def sasl_freed(self, server: bool) -> None:
        """A transport of the relay is being freed: once both are, it is forgotten."""
        if server:
            self.client_freed = True
            self.done = True
            self._close_service()
        else:
            self.service_freed = True
        if self.client_freed and self.service_freed:
            self.relays.live.discard(self)

    # -- the service's answer ------------------------------------------------------------

    def service_opened(self, properties: object) -> None:
        """The service opened its connection: the user is authenticated, as
        its properties say."""
        user, authz = authz_of(properties)
        self.client.authz = authz
        self.user = saslplugin.chars((user or "").encode())
        log.info("[C%d] authenticated as %s by the authentication service %s:%d",
                 self.client.core.conn_id, user or "(no identity given)", self.settings.host,
                 self.settings.port)
        self._finish(True)

    def fail(self, why: str) -> None:
        """The service cannot authenticate the client: its authentication fails."""
        if self.done:
            return
        log.warning("[C%d] delegated authentication (authServicePlugin %s, %s:%d) failed: %s",
                    self.client.core.conn_id, self.settings.name, self.settings.host,
                    self.settings.port, why)
        self._finish(False)

    def _finish(self, ok: bool) -> None:
        if self.done:
            return
        self.done = True
        self.succeeded = ok
        if self.mechanisms is None and not self.client_freed:
            # The client has been offered nothing yet: an outcome now would
            # come before the mechanisms it waits for.  It is offered the
            # listener's and told when it chooses (``sasl_init``).
            self.mechanisms = saslplugin.chars(self._listener_mechanisms().encode())
            self.to_client = "mechanisms"
        else:
            self.to_client = "outcome"
        self._wake_client()
        self._close_service()

    def _listener_mechanisms(self) -> str:
        client = self.client.tptr
        names = self.client.settings.sasl_mechanisms or "ANONYMOUS"
        return offered(names, encrypted=saslplugin.encrypted(client),
                       insecure_allowed=saslplugin.insecure_allowed(client)) or names

    def _close_service(self) -> None:
        """Close the connection to the service once proton is out of its
        transport (this may be called from inside one of its callbacks)."""
        service = self.service
        if service is not None and not service.closed:
            self.relays.loop.defer(service.close)

    def _wake_client(self) -> None:
        if not self.client.closed:
            self.relays.output.add(self.client)

    def _wake_service(self) -> None:
        service = self.service
        if service is not None:
            self.relays.loop.defer(service.flush)


class ServiceConnection:
    """The router's connection to the authentication service for one relay:
    a socket and a proton client transport of its own (not a router
    connection: it carries no links and nothing routes over it)."""

    def __init__(self, relay: Relay) -> None:
        self.relay = relay
        self.loop = relay.relays.loop
        self.sock: socket.socket | None = None
        self.tptr: Any = None
        self.cptr: Any = None
        self.collector: Any = None
        self.closed = False
        self.connected = False
        self._rbuf = bytearray(_IO_BUFFER)
        self._wbuf = bytearray(_IO_BUFFER)
        self._rcbuf = ffi.from_buffer(self._rbuf)
        self._wcbuf = ffi.from_buffer(self._wbuf)
        self._wview = memoryview(self._wbuf)

    @property
    def where(self) -> str:
        s = self.relay.settings
        return f"{s.host}:{s.port}"

    def connect(self) -> None:
        s = self.relay.settings
        family = family_of(s.host)
        if is_address(s.host):
            self._open(family, (s.host, s.port))
            return
        resolve(self.loop, s.host, s.port, family,
                lambda address, why: self._resolved(family, address, why))

    def _resolved(self, family: int, address: tuple[str, int] | None, why: str) -> None:
        if self.closed:
            return
        if address is None:
            self.relay.fail(f"cannot resolve {self.relay.settings.host}: {why}")
            return
        self._open(family, address)

    def _open(self, family: int, address: tuple[str, int]) -> None:
        sock = dial(family, address)
        if isinstance(sock, str):
            self.relay.fail(f"cannot connect to {self.where}: {sock}")
            return
        self.sock = sock
        self.loop.add(sock.fileno(), WRITE, self._ready)

    def _start_transport(self) -> None:
        """The socket connected: a client transport with the relay as its SASL."""
        relay = self.relay
        s = relay.settings
        tptr = lib.pn_transport()
        sasl = lib.pn_sasl(tptr)
        del sasl
        saslplugin.install(tptr, relay.handle)
        if s.tls is not None:
            ssl = SSL(Transport.wrap(tptr), s.tls)
            ssl.peer_hostname = s.host
        cptr = lib.pn_connection()
        lib.pn_connection_set_container(cptr, relay.relays.container_id.encode())
        lib.pn_connection_set_hostname(cptr, s.host.encode())
        capabilities = lib.pn_connection_desired_capabilities(cptr)
        lib.pn_data_put_array(capabilities, False, lib.PN_SYMBOL)
        lib.pn_data_enter(capabilities)
        lib.pn_data_put_symbol(capabilities, pn_bytes(_CAPABILITY))
        lib.pn_data_exit(capabilities)
        self.collector = lib.pn_collector()
        lib.pn_connection_collect(cptr, self.collector)
        lib.pn_transport_bind(tptr, cptr)
        lib.pn_connection_open(cptr)
        self.tptr, self.cptr = tptr, cptr

    def _ready(self, fd: int, mask: int) -> None:
        if self.closed or self.sock is None:
            return
        if not self.connected:
            error = self.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if error:
                self.relay.fail(f"cannot connect to {self.where}: {os.strerror(error)}")
                self.close()
                return
            self.connected = True
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            try:
                self._start_transport()
            except SSLException as exc:
                self.relay.fail(f"TLS to {self.where}: {exc}")
                self.close()
                return
            self.loop.modify(fd, READ)
            self.flush()
            return
        if mask & (READ | select.EPOLLHUP | select.EPOLLERR):
            self._read()
        self.flush()

    def _read(self) -> None:
        assert self.sock is not None
        tptr = self.tptr
        while True:
            capacity = lib.pn_transport_capacity(tptr)
            if capacity <= 0:
                return
            try:
                n = self.sock.recv_into(self._rbuf, min(capacity, _IO_BUFFER))
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self._lost(f"{self.where}: {exc.strerror or exc}")
                return
            if n == 0:
                lib.pn_transport_close_tail(tptr)
                return
            lib.pn_transport_push(tptr, self._rcbuf, n)

    def flush(self) -> None:
        """Write what the transport has, then handle its events."""
        if self.closed or self.tptr is None or self.sock is None:
            return
        tptr = self.tptr
        waiting = False
        while True:
            n = lib.pn_transport_peek(tptr, self._wcbuf, _IO_BUFFER)
            if n <= 0:
                break
            try:
                sent = self.sock.send(self._wview[:n])
            except (BlockingIOError, InterruptedError):
                sent = 0
            except OSError as exc:
                self._lost(f"{self.where}: {exc.strerror or exc}")
                return
            if sent > 0:
                lib.pn_transport_pop(tptr, sent)
            if sent < n:
                waiting = True
                break
        if not self.closed:
            self.loop.modify(self.sock.fileno(), READ | (WRITE if waiting else 0))
        self._events()

    def _events(self) -> None:
        collector = self.collector
        while not self.closed:
            event = lib.pn_collector_peek(collector)
            if event == NULL:
                return
            kind = lib.pn_event_type(event)
            lib.pn_collector_pop(collector)
            if kind == lib.PN_CONNECTION_REMOTE_OPEN:
                if not self.relay.done:
                    self.relay.service_opened(
                        decoded(lib.pn_connection_remote_properties(self.cptr)))
            elif kind in (lib.PN_TRANSPORT_ERROR, lib.PN_TRANSPORT_CLOSED,
                          lib.PN_CONNECTION_REMOTE_CLOSE):
                condition = lib.pn_transport_condition(self.tptr)
                if kind == lib.PN_CONNECTION_REMOTE_CLOSE:
                    condition = lib.pn_connection_remote_condition(self.cptr)
                name = to_str(lib.pn_condition_get_name(condition))
                description = to_str(lib.pn_condition_get_description(condition))
                why = ": ".join(p for p in (name, description) if p) or "the connection closed"
                self._lost(f"{self.where}: {why}")

    def _lost(self, why: str) -> None:
        if not self.relay.done:
            self.relay.fail(why)
        self.close()

    def close(self) -> None:
        """Close the connection to the service (the relay has its answer)."""
        if self.closed:
            return
        self.closed = True
        if self.sock is not None:
            fd = self.sock.fileno()
            if self.tptr is not None:
                lib.pn_connection_close(self.cptr)
                # Send the CLOSE if it goes at once; the service needs no more.
                n = lib.pn_transport_peek(self.tptr, self._wcbuf, _IO_BUFFER)
                if n > 0:
                    with contextlib.suppress(OSError):
                        self.sock.send(self._wview[:n])
            self.loop.remove(fd)
            self.sock.close()
            self.sock = None
        if self.tptr is not None:
            lib.pn_transport_unbind(self.tptr)
            lib.pn_decref(self.tptr)
            lib.pn_decref(self.cptr)
            lib.pn_collector_free(self.collector)
            self.tptr = self.cptr = self.collector = None
        else:
            self.relay.sasl_freed(server=False)


class AuthRelays:
    """The relays of one router's listeners with a ``saslPlugin``: a part of
    the loop (it is due when the earliest relay times out).

    Args:
        loop: where the services' sockets are watched.
        output: the connections to write (``Pending.output``): a client's
            transport posts what the relay has for it when written.
        container_id: the container id the router gives the services.
    """

    def __init__(self, loop: EventLoop, output: Set[Conn], container_id: str,
                 clock: Callable[[], float]) -> None:
        self.loop = loop
        self.output: Any = output
        self.container_id = container_id
        self.clock = clock
        #: Relays whose transports proton still holds (their handles must live).
        self.live: set[Relay] = set()

    def relay(self, conn: Conn, settings: AuthServiceSettings) -> None:
        """Relay the SASL of ``conn`` (a listener's, just started) to ``settings``'s service."""
        relay = Relay(self, conn, settings, self.clock() + SERVICE_TIMEOUT_S)
        self.live.add(relay)
        saslplugin.install(conn.tptr, relay.handle)

    def next_deadline(self) -> float | None:
        pending = [r.deadline for r in self.live if not r.done]
        return min(pending) if pending else None

    def tick(self, now: float) -> None:
        for relay in list(self.live):
            if not relay.done and relay.deadline <= now:
                relay.fail(f"no answer within {SERVICE_TIMEOUT_S:g} s")

    def close(self) -> None:
        for relay in list(self.live):
            if relay.service is not None:
                relay.service.close()


__all__ = ["SERVICE_TIMEOUT_S", "AuthRelays", "authz_of", "offered"]
