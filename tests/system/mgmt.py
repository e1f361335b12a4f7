"""A management client for system tests: requests over a real AMQP connection."""

from __future__ import annotations

from typing import Any

from proton import Message
from proton.utils import BlockingConnection

from tests.system.clients import connect

PREFIX = "org.apache.qpid.dispatch."


class Management:
    """Sends management requests to ``address`` and waits for each response."""

    def __init__(self, url: str, address: str = "$management",
                 conn: BlockingConnection | None = None) -> None:
        self.conn = conn if conn is not None else connect(url)
        self.receiver = self.conn.create_receiver(None, dynamic=True)
        self.sender = self.conn.create_sender(address)
        self.reply_to = self.receiver.remote_source.address
        self.next_id = 0

    def request(self, body: Any = None, **properties: Any) -> tuple[int, str, Any]:
        self.next_id += 1
        self.sender.send(Message(body=body, properties=properties, reply_to=self.reply_to,
                                 correlation_id=self.next_id))
        response = self.receiver.receive(timeout=10)
        assert response.correlation_id == self.next_id
        props = response.properties
        return int(props["statusCode"]), str(props["statusDescription"]), response.body

    def query(self, entity_type: str, *names: str) -> list[dict[str, Any]]:
        status, description, body = self.request(
            {"attributeNames": list(names)}, operation="QUERY", type="org.amqp.management",
            name="self", entityType=PREFIX + entity_type)
        assert status == 200, description
        return [dict(zip(body["attributeNames"], row, strict=True)) for row in body["results"]]

    def close(self) -> None:
        self.conn.close()
