"""The options of the ``amqp`` data source, checked once on the driver.

Spark hands options over as strings in a case-insensitive map; they are read
here into typed settings, and every mistake is an :class:`AmqpOptionError`
that names the option, what it expected and what it got.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import urlsplit

import attrs

from spark.errors import AmqpOptionError

DEFAULT_URL = "amqp://127.0.0.1:5672"
_SCHEMES = ("amqp", "amqps")
_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


@attrs.frozen(kw_only=True)
class Endpoint:
    """Where the router is and which address to use."""

    url: str
    address: str | None
    connect_timeout_s: float
    user: str | None = None
    password: str | None = None


@attrs.frozen(kw_only=True)
class ReadSettings:
    endpoint: Endpoint
    credit: int
    max_messages_per_trigger: int | None
    min_messages_per_trigger: int | None
    max_trigger_delay_s: float
    max_messages: int | None
    partitions: int
    idle_timeout_s: float
    durable: bool
    subscription: str | None
    checkpoint_location: str | None
    deduplicate: bool
    accept_on_journal: bool = False


@attrs.frozen(kw_only=True)
class WriteSettings:
    endpoint: Endpoint
    credit: int
    send_timeout_s: float
    write_id: str | None


KNOWN = {
    "url", "address", "credit", "connecttimeout", "user", "password",
    "maxmessagespertrigger", "minmessagespertrigger", "maxtriggerdelay", "maxmessages",
    "partitions", "idletimeout", "durable", "subscription",
    "checkpointlocation", "deduplicate", "accept", "sendtimeout", "writeid", "path",
}


def _lower(options: Mapping[str, str]) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in options.items()}


def check_url(url: str) -> str:
    """The URL unchanged when it names an AMQP router, else an error saying what is wrong."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise AmqpOptionError(f"option 'url': {url!r} is not a valid URL ({exc})") from None
    if parts.scheme not in _SCHEMES:
        raise AmqpOptionError(
            f"option 'url': {url!r} must start with amqp:// or amqps://")
    if not parts.hostname:
        raise AmqpOptionError(f"option 'url': {url!r} names no host")
    if port is None and not re.fullmatch(r"[^:]+", parts.netloc.rsplit("@", 1)[-1]):
        raise AmqpOptionError(f"option 'url': {url!r} has a bad port")
    if parts.path not in ("", "/"):
        raise AmqpOptionError(
            f"option 'url': {url!r} has a path; give the address with option 'address'")
    return url


def _int(options: dict[str, str], key: str, name: str, default: int | None,
         minimum: int = 1) -> int | None:
    raw = options.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise AmqpOptionError(f"option '{name}': expected an integer, got {raw!r}") from None
    if value < minimum:
        raise AmqpOptionError(f"option '{name}': must be at least {minimum}, got {value}")
    return value


def _seconds(options: dict[str, str], key: str, name: str, default: float) -> float:
    raw = options.get(key)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise AmqpOptionError(f"option '{name}': expected seconds, got {raw!r}") from None
    if value <= 0:
        raise AmqpOptionError(f"option '{name}': must be more than 0 seconds, got {raw}")
    return value


def _bool(options: dict[str, str], key: str, name: str, default: bool) -> bool:
    raw = options.get(key)
    if raw is None or raw == "":
        return default
    if raw.lower() in _TRUE:
        return True
    if raw.lower() in _FALSE:
        return False
    raise AmqpOptionError(f"option '{name}': expected true or false, got {raw!r}")


def _check_unknown(options: dict[str, str]) -> None:
    unknown = sorted(set(options) - KNOWN)
    if unknown:
        raise AmqpOptionError(
            f"unknown option(s) {', '.join(map(repr, unknown))}; the amqp data source "
            "takes url, address, credit, connectTimeout, user, password, "
            "maxMessagesPerTrigger, minMessagesPerTrigger, maxTriggerDelay, maxMessages, "
            "partitions, idleTimeout, durable, subscription, checkpointLocation, "
            "deduplicate, accept, sendTimeout and writeId")


def endpoint(options: Mapping[str, str], *, need_address: bool) -> Endpoint:
    opts = _lower(options)
    _check_unknown(opts)
    address = opts.get("address") or opts.get("path") or None
    if need_address and not address:
        raise AmqpOptionError(
            "option 'address' is required: the router address to read from or write to, "
            "e.g. .option(\"address\", \"events\")")
    return Endpoint(url=check_url(opts.get("url") or DEFAULT_URL), address=address,
                    connect_timeout_s=_seconds(opts, "connecttimeout", "connectTimeout", 10.0),
                    user=opts.get("user") or None, password=opts.get("password") or None)


def read_settings(options: Mapping[str, str]) -> ReadSettings:
    opts = _lower(options)
    ep = endpoint(options, need_address=True)
    credit = _int(opts, "credit", "credit", 1000)
    assert credit is not None
    return ReadSettings(
        endpoint=ep, credit=credit,
        max_messages_per_trigger=_int(opts, "maxmessagespertrigger", "maxMessagesPerTrigger",
                                      None),
        min_messages_per_trigger=_int(opts, "minmessagespertrigger", "minMessagesPerTrigger",
                                      None),
        max_trigger_delay_s=_seconds(opts, "maxtriggerdelay", "maxTriggerDelay", 900.0),
        max_messages=_int(opts, "maxmessages", "maxMessages", None),
        partitions=_int(opts, "partitions", "partitions", 1) or 1,
        idle_timeout_s=_seconds(opts, "idletimeout", "idleTimeout", 5.0),
        durable=_bool(opts, "durable", "durable", False),
        subscription=opts.get("subscription") or None,
        checkpoint_location=opts.get("checkpointlocation") or None,
        deduplicate=_bool(opts, "deduplicate", "deduplicate", True),
        accept_on_journal=_accept(opts),
    )


def _accept(opts: dict[str, str]) -> bool:
    """``accept``: ``commit`` (when Spark has committed the batch) or ``journal``
    (once written under the checkpoint location; docs/spark.md#accepted-when-journaled)."""
    raw = (opts.get("accept") or "commit").lower()
    if raw not in ("commit", "journal"):
        raise AmqpOptionError(f"option 'accept': expected commit or journal, got {raw!r}")
    if raw == "journal" and not opts.get("checkpointlocation"):
        raise AmqpOptionError("option 'accept': journal needs option 'checkpointLocation' "
                              "(the query's own), where messages are written before they "
                              "are accepted")
    return raw == "journal"


def write_settings(options: Mapping[str, str], *, has_to_column: bool) -> WriteSettings:
    opts = _lower(options)
    ep = endpoint(options, need_address=not has_to_column)
    credit = _int(opts, "credit", "credit", 1000)
    assert credit is not None
    return WriteSettings(endpoint=ep, credit=credit,
                         send_timeout_s=_seconds(opts, "sendtimeout", "sendTimeout", 60.0),
                         write_id=opts.get("writeid") or None)
