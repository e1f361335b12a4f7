"""When and where a connector tries next: back-off and failover.

Owns the reconnect schedule of one connector (ActiveMQ's options:
``initialReconnectDelay``, ``maxReconnectDelay``, ``useExponentialBackOff``,
``backOffMultiplier``, ``maxReconnectAttempts``, plus jitter so that many
routers do not retry in step) and its failover list (the configured
address, then ``failoverUrls`` in order, wrapping round).  A connector with
no policy keeps qdrouterd's fixed delays.  Pure: the caller gives the time
and the random numbers.
"""

from __future__ import annotations

import attrs

__all__ = ["AcceptBackoff", "Endpoint", "Failover", "ReconnectPolicy", "parse_failover_urls"]

#: qdrouterd's delays: after an attempt that never opened, and after a drop.
QDROUTERD_FAILED_S = 5.0
QDROUTERD_DROPPED_S = 2.0


@attrs.frozen
class Endpoint:
    """One place a connector can connect to."""

    host: str
    port: int
    #: As written; None where the entry gave none (``amqp`` is meant).
    scheme: str | None = None

    def __str__(self) -> str:
        return f"{self.scheme or 'amqp'}://{self.host}:{self.port}"


def parse_failover_urls(text: str) -> list[Endpoint]:
    """``[scheme://]host[:port]`` entries, comma separated (port 5672 by default).

    Raises:
        ValueError: an entry has no host or a bad port.
    """
    endpoints = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry:
            continue
        scheme = None
        if "://" in entry:
            scheme, entry = entry.split("://", 1)
        host, port = entry, "5672"
        if entry.startswith("["):  # an IPv6 literal: [::1]:5672
            close = entry.find("]")
            if close < 0:
                raise ValueError(f"bad failover URL {raw.strip()!r}: unclosed '['")
            host, rest = entry[1:close], entry[close + 1:]
            if rest.startswith(":"):
                port = rest[1:]
        elif ":" in entry:
            host, port = entry.rsplit(":", 1)
        if not host:
            raise ValueError(f"bad failover URL {raw.strip()!r}: no host")
        if not (port.isascii() and port.isdigit()) or not 0 < int(port) < 65536:
            raise ValueError(f"bad failover URL {raw.strip()!r}: bad port {port!r}")
        endpoints.append(Endpoint(host, int(port), scheme))
    return endpoints


@attrs.frozen(kw_only=True)
class ReconnectPolicy:
    """Exponential back-off with jitter; ``max_attempts`` 0 retries forever.

    Delays are in seconds.  ``jitter`` spreads each delay uniformly over
    ``delay * (1 - jitter) .. delay * (1 + jitter)``, never above ``max_s``.
    """

    initial_s: float = 0.010
    max_s: float = 30.0
    exponential: bool = True
    multiplier: float = 2.0
    max_attempts: int = 0
    jitter: float = 0.2

    def delay(self, failures: int, random: float) -> float | None:
        """The wait before the next attempt after ``failures`` failed attempts in a
        row (1 for the first), ``random`` uniform in [0, 1); None: give up."""
        if self.max_attempts and failures >= self.max_attempts:
            return None
        base = self.initial_s
        if self.exponential:
            try:
                base = self.initial_s * self.multiplier ** max(0, failures - 1)
            except OverflowError:
                base = self.max_s
        base = min(base, self.max_s)
        spread = base * self.jitter * (2.0 * random - 1.0)
        return max(0.0, min(self.max_s, base + spread))


@attrs.define
class Failover:
    """The places a connector tries, in order, and which one is next."""

    configured: list[Endpoint]
    learnt: list[Endpoint] = attrs.field(factory=list)
    index: int = 0

    @property
    def entries(self) -> list[Endpoint]:
        return self.configured + [e for e in self.learnt if e not in self.configured]

    @property
    def current(self) -> Endpoint:
        entries = self.entries
        return entries[self.index % len(entries)]

    def advance(self) -> Endpoint:
        """The current place failed or was lost: move on to the next one."""
        self.index = (self.index + 1) % len(self.entries)
        return self.current

    def learn(self, announced: list[Endpoint]) -> None:
        """A peer announced its failover list: it replaces the learnt entries
        (an empty list forgets them) but the one in use, which stays until it
        fails, as qdrouterd keeps it; that one stays current."""
        current = self.current
        learnt = [e for e in announced if e not in self.configured]
        if current not in self.configured and current not in learnt:
            learnt.insert(0, current)
        self.learnt = learnt
        entries = self.entries
        self.index = entries.index(current) if current in entries else 0

    def listing(self) -> str:
        """``scheme://host:port, ...`` from the entry tried next (management)."""
        entries = self.entries
        start = self.index % len(entries)
        return ", ".join(str(e) for e in entries[start:] + entries[:start])


class AcceptBackoff:
    """A listener whose ``accept`` fails for want of resources (out of file
    descriptors, ENFILE, ENOMEM): it stops accepting for a while, twice as
    long after each failure in a row up to ``max_s``, and says so at most
    once every ``report_every_s`` with the number of failures since.

    A pending connection stays in the kernel's backlog while accepting is
    paused; nothing spins and the connections the router has keep being
    served.  Pure: the caller passes the time.
    """

    def __init__(self, initial_s: float = 0.05, max_s: float = 2.0,
                 report_every_s: float = 10.0) -> None:
        self.initial_s = initial_s
        self.max_s = max_s
        self.report_every_s = report_every_s
        self.delay_s = initial_s
        #: When accepting resumes; None while accepting.
        self.resume_at: float | None = None
        #: Failures since the listener opened (management), and since the last report.
        self.failures = 0
        self._unreported = 0
        self._next_report = float("-inf")
        self._since_success = 0
        self._next_recovery = float("-inf")

    def failed(self, now: float) -> int | None:
        """An accept failed: pause.  Returns the failures to report now (the
        first one, then at most one report per interval), else None."""
        self.failures += 1
        self._unreported += 1
        self._since_success += 1
        self.resume_at = now + self.delay_s
        self.delay_s = min(self.delay_s * 2, self.max_s)
        if now < self._next_report:
            return None
        self._next_report = now + self.report_every_s
        count, self._unreported = self._unreported, 0
        return count

    def resume(self) -> None:
        """The pause is over: accept again (the next failure pauses longer)."""
        self.resume_at = None

    def succeeded(self, now: float) -> int:
        """A connection was accepted: the back-off starts over.  Returns the
        failures to report as recovered from (at most one report per
        interval, however often accepting fails and recovers), else 0."""
        self.delay_s = self.initial_s
        if not self._since_success or now < self._next_recovery:
            return 0
        self._next_recovery = now + self.report_every_s
        recovered, self._since_success = self._since_success, 0
        return recovered
