"""What the fuzzers feed hostile bytes to, and what each may answer them
with (docs/architecture.md#fuzzing).

Each target is one of the router's decoders of input from outside,
followed as far as the router goes with what it decoded: an AMQP message
as the forwarder scans and annotates it, AMQP values and message sections,
a routing-protocol control message, a management request and the agent's
answer to it, a configuration file, a request to the console's JSON
endpoint. A target returns normally or raises one of its ``allowed``
errors (the refusal the router turns into a rejection, a closed link or a
diagnostic); anything else is a crash. The agent answering 500 counts as a
crash too: it is the agent's own "I did not expect this".
"""

from __future__ import annotations

from collections.abc import Callable

import attrs

__all__ = ["TARGETS", "Target"]


@attrs.frozen
class Target:
    name: str
    #: Modules whose code coverage guides the fuzzer.
    modules: tuple[str, ...]
    #: Runs one input; made on first use (imports happen under coverage).
    make: Callable[[], Callable[[bytes], None]]
    #: The errors that are refusals, not crashes.
    allowed: Callable[[], tuple[type[BaseException], ...]]
    max_len: int = 4096


def _message() -> Callable[[bytes], None]:
    from router.core.message import (
        decode_annotations,
        scan,
        strip_router_annotations,
        user_id_of,
    )

    def run(data: bytes) -> None:
        info = scan(data)
        user_id_of(data, info)
        if info.router_keys:
            decode_annotations(data, info)
            stripped = strip_router_annotations(data, info)
            again = scan(stripped)
            assert not again.router_keys, "stripping left router keys behind"

    return run


def _message_errors() -> tuple[type[BaseException], ...]:
    from router.core.amqp.wire import MessageFormatError
    return (MessageFormatError,)


def _values() -> Callable[[bytes], None]:
    from router.core.amqp import PeerProtocolError, split_sections
    from router.core.amqp.values import decode_one, encode

    def run(data: bytes) -> None:
        try:
            value = decode_one(data)
        except PeerProtocolError:
            pass
        else:
            # What decodes encodes again (the agent sends correlation-ids
            # back as they came), and that encoding is stable.
            encoded = encode(value)
            assert encode(decode_one(encoded)) == encoded, "encoding is not stable"
        split_sections(data, "fuzzed message")

    return run


def _amqp_errors() -> tuple[type[BaseException], ...]:
    from router.core.amqp import PeerProtocolError
    return (PeerProtocolError,)


def _routing() -> Callable[[bytes], None]:
    from router.core.routing.codec import decode_control, decode_envelope

    def run(data: bytes) -> None:
        decode_envelope(data)
        decode_control(data)

    return run


def _management() -> Callable[[bytes], None]:
    from addressing import AddressTable
    from router.core import Router
    from router.management import (
        Agent,
        ConfigAddresses,
        ConfigAutoLinks,
        ConfigLinkRoutes,
        RouterAddresses,
        decode_request,
    )

    core = Router(router_id="F", addresses=AddressTable(), token=lambda: "t")
    agent = Agent({"router.config.address": ConfigAddresses(core),
                   "router.config.linkRoute": ConfigLinkRoutes(core, lambda: 0.0),
                   "router.config.autoLink": ConfigAutoLinks(core),
                   "router.address": RouterAddresses(core)})

    def run(data: bytes) -> None:
        request = decode_request(data)
        response = agent.handle(request)
        assert response.status != 500, f"the agent failed: {response.description}"

    return run


def _conf() -> Callable[[bytes], None]:
    import conf

    def run(data: bytes) -> None:
        text = data.decode("utf-8", "replace")
        name = "fuzz.json" if text.lstrip().startswith("[") else "fuzz.conf"
        try:
            conf.parse(text, name)
        except conf.ConfError as error:
            assert error.diagnostics, "a refusal that says nothing"
            assert all(d.filename == name for d in error.diagnostics)
            raise

    return run


def _conf_errors() -> tuple[type[BaseException], ...]:
    import conf
    return (conf.ConfError,)


def _http_api() -> Callable[[bytes], None]:
    from router.management.json_api import Answer, Call, parse

    methods = ("GET", "POST", "PATCH", "PUT", "DELETE", "HEAD", "OPTIONS")

    def run(data: bytes) -> None:
        method = methods[data[0] % len(methods)] if data else "GET"
        target, _, body = data[1:].partition(b"\n")
        parsed = parse(method, "/api/v1/" + target.decode("latin-1"), body)
        assert isinstance(parsed, Call | Answer)

    return run


def _nothing() -> tuple[type[BaseException], ...]:
    return ()


TARGETS = {t.name: t for t in (
    Target("message", ("router.core.message", "router.core.amqp.wire"), _message,
           _message_errors),
    Target("values", ("router.core.amqp",), _values, _amqp_errors),
    Target("routing", ("router.core.routing", "router.core.amqp"), _routing, _amqp_errors),
    Target("management", ("router.management", "router.core.amqp"), _management,
           _amqp_errors),
    Target("conf", ("conf",), _conf, _conf_errors, max_len=2048),
    Target("http_api", ("router.management.json_api",), _http_api, _nothing, max_len=512),
)}
