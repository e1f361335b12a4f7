"""Management requests and responses as AMQP messages
(docs/operations.md#requests-and-responses).

Owns decoding a request message into a ``Request`` and encoding a
``Response`` as the message qdrouterd sends: header ``durable=false``,
properties ``to`` and ``correlation-id``, application properties
``statusCode`` and ``statusDescription``, an amqp-value body.  Must not
carry out requests (``router.management.agent`` does).
"""

from __future__ import annotations

from router.core.amqp import (
    APPLICATION_PROPERTIES,
    COMPACT,
    HEADER,
    PROPERTIES,
    VALUE,
    Int,
    PeerProtocolError,
    encode_section,
    split_sections,
    type_name,
)
from router.management.agent import Request, Response

__all__ = ["decode_request", "decode_response", "encode_request", "encode_response"]

_WHAT = "management request"


def decode_request(data: bytes, origin: object = None) -> Request:
    """The request an encoded message carries.

    A message without application properties decodes to a request with no
    operation (the agent answers 400); one without ``reply-to`` decodes
    with ``reply_to`` None (the router drops it, as qdrouterd does).

    Raises:
        PeerProtocolError: the bytes are not a well-formed AMQP message, or
            its properties or application properties have the wrong shape.
    """
    sections = split_sections(data, _WHAT)
    properties = sections.get(PROPERTIES)
    reply_to: str | None = None
    correlation_id: object = None
    if properties is not None:
        if not isinstance(properties, list):
            raise PeerProtocolError(f"{_WHAT}: properties must be a list")
        if len(properties) > 4:
            value = properties[4]
            if value is not None and not isinstance(value, str):
                raise PeerProtocolError(
                    f"{_WHAT}: reply-to must be an address, got {type_name(value)}")
            reply_to = value
        if len(properties) > 5:
            correlation_id = properties[5]
    app = sections.get(APPLICATION_PROPERTIES)
    if app is None:
        app = {}
    if not isinstance(app, dict):
        raise PeerProtocolError(f"{_WHAT}: application-properties must be a map")
    props = {str(k): v for k, v in app.items() if isinstance(k, str)}
    return Request(properties=props, body=sections.get(VALUE), reply_to=reply_to,
                   correlation_id=correlation_id, origin=origin)


def encode_response(response: Response, *, to: str, correlation_id: object) -> bytes:
    """The response message to send to ``to`` (the request's reply-to)."""
    return b"".join((
        encode_section(HEADER, [False], COMPACT),
        encode_section(PROPERTIES, [None, None, to, None, None, correlation_id], COMPACT),
        encode_section(APPLICATION_PROPERTIES,
                       {"statusCode": Int(response.status),
                        "statusDescription": response.description}, COMPACT),
        encode_section(VALUE, response.body, COMPACT),
    ))


def encode_request(request: Request, *, to: str) -> bytes:
    """A request message to the management node at ``to``, the way
    qdmanage sends one: application properties (text values), reply-to and
    correlation-id, an amqp-value body.  Its response decodes with
    ``decode_request`` (statusCode and statusDescription among the
    properties)."""
    return b"".join((
        encode_section(PROPERTIES, [None, None, to, None, request.reply_to,
                                    request.correlation_id], COMPACT),
        encode_section(APPLICATION_PROPERTIES, dict(request.properties), COMPACT),
        encode_section(VALUE, request.body, COMPACT),
    ))


def decode_response(data: bytes) -> tuple[object, Response]:
    """The correlation-id and the response an encoded response message
    carries (as ``encode_response`` makes it; a status that is not an
    integer reads as 500).

    Raises:
        PeerProtocolError: as for ``decode_request``.
    """
    message = decode_request(data)
    props = message.properties
    status = props.get("statusCode")
    return message.correlation_id, Response(
        status=status if isinstance(status, int) else 500,
        description=str(props.get("statusDescription", "")), body=message.body)
