"""Message logging: a listener's messageLoggingComponents logs the messages
its connections receive and send, on module MESSAGE at trace
(docs/operations.md#message-logging)."""

from __future__ import annotations

from proton import Delivery, Message, symbol

from tests.system.clients import connect, wait_credit, wait_settled
from tests.system.conftest import StartRouter
from tests.system.harness import router_conf

LOGGED = """listener {
    host: 127.0.0.1
    port: 0
    messageLoggingComponents: all
}
listener {
    host: 127.0.0.1
    port: 0
    logMessage: subject,app-properties
}
listener {
    host: 127.0.0.1
    port: 0
}
log {
    module: MESSAGE
    enable: trace+
}
"""


def send_and_receive(url: str, address: str) -> None:
    conn = connect(url)
    receiver = conn.create_receiver(address, credit=5)
    sender = conn.create_sender(address)
    wait_credit(conn, sender, 250)
    msg = Message(body="hi", subject="greeting", properties={"n": 7, "k": symbol("v")})
    msg.id = "m-1"
    msg.address = address
    delivery = sender.link.send(msg)
    assert receiver.receive(timeout=10).body == "hi"
    receiver.accept()
    assert wait_settled(conn, delivery) == Delivery.ACCEPTED
    conn.close()


def test_each_listener_logs_the_fields_it_names_and_only_its_own_connections(
        start_router: StartRouter) -> None:
    hop = start_router(router_conf(LOGGED, listener=""), listeners=3)
    all_fields, some, none = (f"amqp://127.0.0.1:{port}" for port in hop.ports)
    send_and_receive(all_fields, "logged.all")
    hop.wait_log(r"MESSAGE \(trace\) \[C\d+\]: Sent Message\{message-id=\"m-1\", "
                 r"to=\"logged.all\", subject=\"greeting\", "
                 r"app-properties=\{\"n\"=7, \"k\"=:\"v\"\}\} on link '[^']+' \(logged.all -> \)")
    assert "Received Message{message-id=\"m-1\", to=\"logged.all\"" in hop.log_text()
    send_and_receive(some, "logged.some")
    hop.wait_log(r"Sent Message\{subject=\"greeting\", app-properties=\{\"n\"=7, \"k\"=:\"v\"\}\}"
                 r" on link '[^']+' \(logged.some -> \)")
    assert "Received Message{subject=\"greeting\", app-properties=" in hop.log_text()
    before = hop.log_text().count("MESSAGE (trace)")
    send_and_receive(none, "logged.none")
    send_and_receive(all_fields, "logged.after")  # logged: the one before was not
    hop.wait_log(r"Sent Message\{message-id=\"m-1\", to=\"logged.after\"")
    messages = [line for line in hop.log_text().splitlines() if "MESSAGE (trace)" in line]
    assert not [line for line in messages if "logged.none" in line]
    assert len(messages) == before + 2
