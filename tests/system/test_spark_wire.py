"""The Spark data source's AMQP clients (``spark.client`` over
``spark.wire``) against a real hopd, without Spark: every message sent is
accepted and every one received is settled; each failure is named."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from proton.utils import BlockingConnection

from spark.client import Inbox, Outbox
from spark.codec import encoded_of
from spark.errors import AmqpConnectError, AmqpDeliveryError
from spark.options import Endpoint
from tests.system.conftest import StartRouter
from tests.system.harness import Hop
from tests.system.sasl_users import PASSWORD, make_users
from tests.waiting import free_port, wait_for


def _where(hop: Hop, address: str, **kwargs: Any) -> Endpoint:
    return Endpoint(url=f"amqp://127.0.0.1:{hop.ports[0]}", address=address,
                    connect_timeout_s=10, **kwargs)


def _messages(count: int, address: str) -> list[Any]:
    return [encoded_of({"body": f"m{i}"}, f"w:0:{i}", address, False) for i in range(count)]


def test_every_message_sent_is_accepted_and_every_one_received_is_settled(hop: Hop) -> None:
    count = 3000
    inbox = Inbox(_where(hop, "wire.q"), credit=500).start()
    got: list[bytes] = []
    try:
        sent: dict[str, int] = {}
        outbox = Outbox(_where(hop, "wire.q"), iter(_messages(count, "wire.q")),
                        target="wire.q", window=400, send_timeout_s=20)
        sender = threading.Thread(target=lambda: sent.setdefault("accepted", outbox.run()))
        sender.start()
        while len(got) < count:
            records = inbox.take()
            if not records:
                assert inbox.wait(10), f"received {len(got)} of {count}"
                continue
            got.extend(r.data for r in records)
            inbox.settle([r.token for r in records])
        sender.join(20)
        assert sent == {"accepted": count}
    finally:
        inbox.close()
    assert len(got) == count


def test_a_rejected_message_is_named_and_fails_the_send(hop: Hop) -> None:
    consumer = BlockingConnection(hop.url)
    try:
        receiver = consumer.create_receiver("wire.r", credit=10)
        failure: dict[str, Exception] = {}

        def send() -> None:
            try:
                Outbox(_where(hop, "wire.r"), iter(_messages(3, "wire.r")), target="wire.r",
                       window=10, send_timeout_s=20).run()
            except AmqpDeliveryError as exc:
                failure["error"] = exc
        sender = threading.Thread(target=send)
        sender.start()
        receiver.receive(10)
        receiver.reject()
        for _ in range(2):
            receiver.receive(10)
            receiver.accept()
        consumer.wait(lambda: not sender.is_alive(), timeout=20)
        sender.join(5)
    finally:
        consumer.close()
    assert "message w:0:0 was rejected" in str(failure.get("error")), failure


def test_an_unreachable_router_and_a_failed_login_are_named(start_router: StartRouter,
                                                            tmp_path: Path) -> None:
    port = free_port()
    closed = Endpoint(url=f"amqp://127.0.0.1:{port}", address="x", connect_timeout_s=5)
    with pytest.raises(AmqpConnectError, match="cannot reach the router"):
        Outbox(closed, iter(_messages(1, "x")), target="x", window=1, send_timeout_s=5).run()
    with pytest.raises(AmqpConnectError, match="cannot reach the router"):
        Inbox(closed, credit=1).start()
    (tmp_path / "sasl").mkdir()
    users = make_users(tmp_path / "sasl", ("alice",))
    hop = start_router(
        f"router {{\n    mode: standalone\n    id: P\n    saslConfigDir: {users.config_dir}\n"
        f"    saslConfigName: {users.config_name}\n}}\n"
        "listener {\n    host: 127.0.0.1\n    port: 0\n    authenticatePeer: yes\n"
        "    saslMechanisms: PLAIN\n    allowInsecureMechanisms: yes\n}\n")
    wrong = _where(hop, "x", user="alice@hop", password="not it")
    with pytest.raises(AmqpConnectError, match="unauthorized-access"):
        Outbox(wrong, iter(_messages(1, "x")), target="x", window=1, send_timeout_s=5).run()
    with pytest.raises(AmqpConnectError, match="unauthorized-access"):
        Inbox(wrong, credit=1).start()
    # The right password: logged in, the link attached; in the URL too.
    Inbox(_where(hop, "x", user="alice@hop", password=PASSWORD), credit=1).start().close()
    in_url = Endpoint(url=f"amqp://alice%40hop:{PASSWORD}@127.0.0.1:{hop.ports[0]}",
                      address="x", connect_timeout_s=10)
    Inbox(in_url, credit=1).start().close()


def test_a_router_that_dies_under_the_receiver_is_named(killable: StartRouter) -> None:
    hop = killable()
    inbox = Inbox(_where(hop, "wire.k"), credit=10).start()
    try:
        hop.kill()
        wait_for(lambda: inbox.failure is not None, 10, "the receiver to see the loss")
        with pytest.raises(AmqpDeliveryError, match="lost the connection to the router"):
            inbox.check()
    finally:
        inbox.close()
