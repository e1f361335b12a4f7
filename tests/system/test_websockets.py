"""AMQP over WebSockets on HTTP listeners (docs/operations.md#amqp-over-websockets):
the handshake, messages both ways with their outcomes, the protocol's
failure cases, and the router serving everyone else meanwhile."""

from __future__ import annotations

import socket
from collections.abc import Callable

import pytest
from proton import Delivery, Message
from wsproto import WSConnection
from wsproto.events import BytesMessage, TextMessage

from tests.system.clients import connect, pump, receive_all, wait_settled
from tests.system.harness import Hop, router_conf
from tests.system.mgmt import Management
from tests.system.wsclient import WsClient, round_trip
from tests.waiting import wait_for

StartRouter = Callable[..., Hop]

HTTP_LISTENER = """\
listener {
    host: 127.0.0.1
    port: 0
    http: yes
}
"""


def _start(start_router: StartRouter, listener: str = HTTP_LISTENER) -> tuple[Hop, int]:
    hop = start_router(router_conf(listener), listeners=2)
    return hop, hop.ports[1]


def _http_get(port: int, path: str) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def _still_serves(hop: Hop, port: int) -> None:
    """A fresh WebSocket client still gets a message through."""
    ws = WsClient(port)
    try:
        ws.open()
        round_trip(ws, hop.url, "ws.check", "still here")
    finally:
        ws.close()


def test_a_websocket_client_sends_and_receives_with_outcomes(
        start_router: StartRouter) -> None:
    hop, port = _start(start_router)
    ws = WsClient(port)
    assert ws.accepted is not None and ws.accepted.subprotocol == "amqp"
    ws.open()
    plain = connect(hop.url)
    try:
        # The WebSocket client as producer: the outcome is the consumer's.
        round_trip(ws, hop.url, "ws.in", "from the browser side")
        # ... and as consumer: the plain sender's message is accepted by it.
        ws.attach_receiver("ws.out")
        sender = plain.create_sender("ws.out")
        sent = sender.link.send(Message(body="to the browser side"))
        assert ws.receive_on(1, also=lambda: pump(plain, 0.01)) == ["to the browser side"]
        assert wait_settled(plain, sent) == Delivery.ACCEPTED
    finally:
        plain.close()
        ws.close()
    # The same port still answers plain HTTP.
    assert _http_get(port, "/healthz").startswith(b"HTTP/1.1 200")


def test_a_websocket_connection_is_a_connection_to_management(
        start_router: StartRouter) -> None:
    hop, port = _start(start_router)
    ws = WsClient(port)
    ws.open()
    management = Management(hop.url)
    try:
        rows = management.query("connection")
        containers = {row["container"] for row in rows}
        assert "ws-client" in containers
    finally:
        management.close()
        ws.close()


def test_amqp_frames_split_across_fragments_and_messages(start_router: StartRouter) -> None:
    hop, port = _start(start_router)
    # The protocol header, SASL and OPEN in fragments of 3 bytes of one
    # message each time, then messages split the same way.
    ws = WsClient(port)
    ws.open(split=3)
    conn = connect(hop.url)
    try:
        receiver = conn.create_receiver("ws.split")
        link = ws.session.sender("split")
        link.target.address = "ws.split"
        link.open()
        ws.pump_until(lambda: link.credit > 0, "credit", split=5)
        delivery = link.delivery(b"s")
        link.send(Message(body="x" * 3000).encode())
        link.advance()
        ws.flush(split=1000)
        assert [m.body for m in receive_all(receiver, 1)] == ["x" * 3000]
        assert ws.wait_outcome(delivery, also=lambda: pump(conn, 0.01)) == Delivery.ACCEPTED
    finally:
        conn.close()
        ws.close()


def test_no_amqp_subprotocol_gets_400_and_the_router_serves_on(
        start_router: StartRouter) -> None:
    hop, port = _start(start_router)
    ws = WsClient(port, subprotocols=())
    assert ws.status == 400
    ws.close()
    ws = WsClient(port, subprotocols=("mqtt",))
    assert ws.status == 400
    ws.close()
    assert "subprotocol 'amqp' required" in hop.log_text()
    _still_serves(hop, port)


def test_the_older_binary_subprotocol_is_taken_as_amqp(start_router: StartRouter) -> None:
    """rhea-based clients (qdrouterd's own console) ask for ``binary``, which
    qdrouterd takes as ``amqp``; asked for both, the router answers ``amqp``."""
    hop, port = _start(start_router)
    ws = WsClient(port, subprotocols=("binary",))
    assert ws.accepted is not None and ws.accepted.subprotocol == "binary"
    ws.close()
    ws = WsClient(port, subprotocols=("binary", "amqp"))
    assert ws.accepted is not None and ws.accepted.subprotocol == "amqp"
    ws.close()
    _still_serves(hop, port)


def test_websockets_no_leaves_the_listener_plain_http(start_router: StartRouter) -> None:
    _, port = _start(start_router, HTTP_LISTENER.replace("http: yes",
                                                         "http: yes\n    websockets: no"))
    ws = WsClient(port)
    # Answered as a plain GET of "/": the console's page, no upgrade.
    assert ws.accepted is None and ws.status == 200


@pytest.mark.parametrize(("frames", "code"), [
    # AMQP is carried in binary messages: a text message is unsupported data.
    (lambda ws: ws.send(TextMessage(data="not AMQP")), 1003),
    # A client's frames must be masked (RFC 6455 section 5.1): this one is not.
    (lambda ws: b"\x82\x03abc", 1002),
], ids=["text-message", "unmasked-frame"])
def test_what_breaks_the_protocol_closes_only_that_connection(
        start_router: StartRouter, frames: Callable[[WSConnection], bytes], code: int) -> None:
    hop, port = _start(start_router)
    ws = WsClient(port)
    ws.open()
    ws.send_frames(frames(ws.ws))
    ws.wait_closed()
    assert ws.closed is not None and ws.closed[0] == code
    ws.close()
    _still_serves(hop, port)


def test_the_close_handshake_ends_the_amqp_connection(start_router: StartRouter) -> None:
    hop, port = _start(start_router)
    ws = WsClient(port)
    ws.open()
    ws.attach_receiver("ws.leaving")
    management = Management(hop.url)
    try:
        def ws_connections() -> int:
            rows = management.query("connection")
            return sum(1 for row in rows if row["container"] == "ws-client")

        assert ws_connections() == 1
        ws.close_websocket(1000)
        ws.wait_closed()
        assert ws.closed is not None and ws.closed[0] == 1000
        wait_for(lambda: ws_connections() == 0, what="the connection to go")
    finally:
        management.close()
        ws.close()
    _still_serves(hop, port)


def test_garbage_after_the_upgrade_ends_only_that_connection(
        start_router: StartRouter) -> None:
    hop, port = _start(start_router)
    ws = WsClient(port)
    # Not an AMQP header inside a well-formed binary message.
    ws.send_frames(ws.ws.send(BytesMessage(data=b"GET / HTTP/1.1\r\n\r\n")))
    ws.wait_closed()
    ws.close()
    _still_serves(hop, port)


def test_websocket_connections_count_against_the_policy_cap(start_router: StartRouter) -> None:
    hop = start_router(router_conf(HTTP_LISTENER + "policy {\n    maxConnections: 1\n}\n"),
                       listeners=2)
    port = hop.ports[1]
    first = WsClient(port)
    first.open()
    # The second upgrade is refused, with the reason.
    second = WsClient(port)
    assert second.accepted is None and second.status == 503
    hop.wait_log(r"POLICY \(info\) DENY Connection '127\.0\.0\.1' based on global connection "
                 r"count\. nConnections= 1")
    second.close()
    first.close()
