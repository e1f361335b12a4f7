"""Client-side discovery: the routers of a peer group, for a proton client.

``discover("discovery://(multicast://GROUP)?options")`` listens to the
group's beacons and returns the client listeners (role ``normal``) of the
routers announcing themselves, with the reconnect options mapped onto
proton's ``Backoff``, ready for a reconnecting ``Container.connect``::

    import router as hop

    found = hop.discover("discovery://(multicast://orders?interface=127.0.0.1)"
                         "?initialReconnectDelay=100&maxReconnectDelay=5000")
    container.connect(urls=found.urls, reconnect=found.reconnect, handler=...)
    # or simply: found.connect(container, handler=...)

The inner URL names the group: ``multicast://GROUP[:PORT]`` uses the
default multicast address (239.255.2.3, port 6155), ``multicast://ADDRESS:PORT
?group=GROUP`` another one.  Its options are ``group``, ``interface``
(IPv4 address of the interface to listen on; default: the kernel's choice),
``secret`` and ``secretFile`` (the group's HMAC secret).  The outer options
are ActiveMQ's: ``initialReconnectDelay`` (ms, 10), ``maxReconnectDelay``
(ms, 30000), ``useExponentialBackOff`` (true), ``backOffMultiplier`` (2),
``maxReconnectAttempts`` (0 = unlimited; one attempt is one pass over the
list), ``randomize`` (true: the list is shuffled); and
``discoveryTimeout`` (ms, 10000: how long to wait for a first router) and
``discoveryWindow`` (ms, 1500: how long to keep listening after it, so
that every router announcing at the default interval is heard).

The list is resolved once, when ``discover`` is called; proton then fails
over along it.  Call ``discover`` again for a fresh list.
"""

from __future__ import annotations

import contextlib
import ipaddress
import random
import socket
import time
from typing import Any, Literal
from urllib.parse import parse_qsl, urlsplit

import attrs
from proton import Connection
from proton.reactor import Backoff, Container

from conf import DiscoverySection, parse_boolean
from router.core.beacons import MAX_BEACON, BeaconError, PeerTable

__all__ = ["Discovered", "DiscoveryError", "DiscoveryUrl", "discover", "parse_discovery_url"]

# The multicast address and port of a group the URL names by name only: the
# discovery section's defaults, so that clients and routers meet (the group is
# mandatory in the section; any name will do to read the defaults).
_SECTION_DEFAULTS = DiscoverySection(group="")
DEFAULT_ADDRESS = _SECTION_DEFAULTS.address
DEFAULT_PORT = _SECTION_DEFAULTS.port

_OUTER = ("initialReconnectDelay", "maxReconnectDelay", "useExponentialBackOff",
          "backOffMultiplier", "maxReconnectAttempts", "randomize", "discoveryTimeout",
          "discoveryWindow")
_INNER = ("group", "interface", "secret", "secretFile")


class DiscoveryError(Exception):
    """A bad discovery URL, or no router of the group was heard in time."""


@attrs.frozen(kw_only=True)
class DiscoveryUrl:
    """What a ``discovery://`` URL says."""

    group: str
    address: str = DEFAULT_ADDRESS
    port: int = DEFAULT_PORT
    interface: str = "0.0.0.0"
    secret: bytes | None = None
    initial_s: float = 0.01
    max_s: float = 30.0
    exponential: bool = True
    multiplier: float = 2.0
    max_attempts: int = 0
    randomize: bool = True
    timeout_s: float = 10.0
    window_s: float = 1.5

    def backoff(self) -> Backoff:
        """The reconnect options as proton's backoff: delays between passes
        over the URL list, the first pass at once."""
        return Backoff(initial=self.initial_s, factor=self.multiplier if self.exponential else 1.0,
                       max_delay=self.max_s,
                       max_tries=self.max_attempts if self.max_attempts > 0 else None)


def _split(url: str) -> tuple[str, str]:
    """``discovery://(INNER)?OUTER`` (or ActiveMQ's ``discovery:(INNER)?OUTER``)."""
    for prefix in ("discovery://(", "discovery:("):
        if url.startswith(prefix):
            rest = url[len(prefix):]
            inner, close, outer = rest.partition(")")
            if not close or (outer and not outer.startswith("?")):
                break
            return inner, outer[1:]
    raise DiscoveryError(f"{url}: expected discovery://(multicast://GROUP)[?options]")


def _number(url: str, name: str, value: str, *, minimum: float = 0) -> float:
    try:
        number = float(value)
    except ValueError:
        raise DiscoveryError(f"{url}: {name} must be a number, got {value!r}") from None
    if number < minimum or number != number:
        raise DiscoveryError(f"{url}: {name} must be at least {minimum:g}, got {value!r}")
    return number


def _flag(url: str, name: str, value: str) -> bool:
    try:
        return parse_boolean(value, digits=True)
    except ValueError:
        raise DiscoveryError(f"{url}: {name} must be true or false, got {value!r}") from None


def parse_discovery_url(url: str) -> DiscoveryUrl:
    """Parse a ``discovery://`` URL.

    Raises:
        DiscoveryError: the URL's form, an unknown option or a bad value.
    """
    inner_text, outer_text = _split(url)
    inner = urlsplit(inner_text)
    if inner.scheme != "multicast" or not inner.hostname:
        raise DiscoveryError(f"{url}: the group must be given as multicast://GROUP")
    inner_options = dict(parse_qsl(inner.query, keep_blank_values=True))
    outer_options = dict(parse_qsl(outer_text, keep_blank_values=True))
    for options, known in ((inner_options, _INNER), (outer_options, _OUTER)):
        unknown = sorted(set(options) - set(known))
        if unknown:
            raise DiscoveryError(f"{url}: unknown option {', '.join(unknown)} "
                                 f"(known here: {', '.join(known)})")
    try:
        port = inner.port or DEFAULT_PORT
    except ValueError:
        raise DiscoveryError(f"{url}: bad port in {inner_text!r}") from None
    host = inner.hostname
    try:
        address = ipaddress.IPv4Address(host)
    except ValueError:
        address = None
    if address is not None:
        if not address.is_multicast:
            raise DiscoveryError(f"{url}: {host} is not an IPv4 multicast address")
        group = inner_options.get("group")
        if not group:
            raise DiscoveryError(f"{url}: multicast://{host}:{port} needs ?group=NAME")
        multicast = host
    else:
        group = inner_options.get("group") or host
        multicast = DEFAULT_ADDRESS
    interface = inner_options.get("interface", "0.0.0.0")
    try:
        ipaddress.IPv4Address(interface)
    except ValueError:
        raise DiscoveryError(f"{url}: interface must be an IPv4 address, "
                             f"got {interface!r}") from None
    secret: str | None = inner_options.get("secret")
    if secret is None and "secretFile" in inner_options:
        try:
            with open(inner_options["secretFile"], encoding="utf-8") as file:
                secret = file.readline().rstrip("\n")
        except OSError as exc:
            raise DiscoveryError(f"{url}: cannot read secretFile "
                                 f"{inner_options['secretFile']}: {exc.strerror}") from None
    o = outer_options
    fields: dict[str, Any] = {"group": group, "address": multicast, "port": port,
                              "interface": interface,
                              "secret": secret.encode() if secret else None}
    for name, key, scale in (("initialReconnectDelay", "initial_s", 1000.0),
                             ("maxReconnectDelay", "max_s", 1000.0),
                             ("discoveryTimeout", "timeout_s", 1000.0),
                             ("discoveryWindow", "window_s", 1000.0)):
        if name in o:
            fields[key] = _number(url, name, o[name]) / scale
    if "backOffMultiplier" in o:
        fields["multiplier"] = _number(url, "backOffMultiplier", o["backOffMultiplier"],
                                       minimum=1)
    if "maxReconnectAttempts" in o:
        attempts = _number(url, "maxReconnectAttempts", o["maxReconnectAttempts"])
        if attempts != int(attempts):
            raise DiscoveryError(f"{url}: maxReconnectAttempts must be a whole number")
        fields["max_attempts"] = int(attempts)
    if "useExponentialBackOff" in o:
        fields["exponential"] = _flag(url, "useExponentialBackOff", o["useExponentialBackOff"])
    if "randomize" in o:
        fields["randomize"] = _flag(url, "randomize", o["randomize"])
    parsed = DiscoveryUrl(**fields)
    if parsed.max_s < parsed.initial_s:
        raise DiscoveryError(f"{url}: maxReconnectDelay is below initialReconnectDelay")
    return parsed


@attrs.frozen
class Discovered:
    """The routers heard, as client URLs, and how to reconnect along them."""

    #: ``amqp://HOST:PORT`` of every client listener heard (shuffled with ``randomize``).
    urls: list[str]
    #: Router id -> its client URLs.
    routers: dict[str, list[str]]
    #: proton's backoff for ``Container.connect(reconnect=...)``.
    reconnect: Backoff | Literal[False]

    def connect(self, container: Container, **kwargs: Any) -> Connection:
        """``container.connect`` to the first router of the list, failing over
        along the rest with the URL's reconnect options."""
        return container.connect(urls=self.urls, reconnect=self.reconnect, **kwargs)


def _listen(spec: DiscoveryUrl) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind(("", spec.port))
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP,
                        socket.inet_aton(spec.address) + socket.inet_aton(spec.interface))
    except OSError:
        sock.close()
        raise
    return sock


def _client_url(host: str, port: int) -> str:
    return f"amqp://{'[' + host + ']' if ':' in host else host}:{port}"


def discover(url: str, *, clock: Any = time.monotonic) -> Discovered:
    """Listen to the group's beacons and return its routers' client URLs.

    Waits up to ``discoveryTimeout`` for a first router announcing a client
    listener, then ``discoveryWindow`` more for the others.

    Raises:
        DiscoveryError: a bad URL, the group cannot be listened to, or no
            router announced a client listener in time.
    """
    spec = parse_discovery_url(url)
    table = PeerTable(group=spec.group, router_id="", secret=spec.secret, expiry_s=1e9)
    try:
        sock = _listen(spec)
    except OSError as exc:
        raise DiscoveryError(f"{url}: cannot listen to {spec.address}:{spec.port} "
                             f"on {spec.interface}: {exc}") from None
    with sock:
        end = clock() + spec.timeout_s
        heard_first = False
        while (left := end - clock()) > 0:
            sock.settimeout(left)
            try:
                data = sock.recv(MAX_BEACON + 1)
            except TimeoutError:
                break
            with contextlib.suppress(BeaconError):
                beacon = table.heard(data, clock())
                if beacon is not None and beacon.clients and not heard_first:
                    heard_first = True
                    end = min(end, clock() + spec.window_s)
    routers = {router_id: [_client_url(h, p) for h, p in peer.beacon.clients]
               for router_id, peer in sorted(table.peers.items()) if peer.beacon.clients}
    if not routers:
        raise DiscoveryError(f"{url}: no router of group {spec.group!r} announced a client "
                             f"listener within {spec.timeout_s:g} s")
    urls = [u for router_urls in routers.values() for u in router_urls]
    if spec.randomize:
        random.shuffle(urls)
    return Discovered(urls=urls, routers=routers, reconnect=spec.backoff())
