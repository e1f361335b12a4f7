"""The management client's addressing: URLs as qdstat accepts them, ``-r`` targets."""

from __future__ import annotations

import pytest

from router.tools.client import ConnectionFailed, management_address


@pytest.mark.parametrize(("url", "connect"), [
    ("127.0.0.1:5672", "amqp://127.0.0.1:5672"),
    ("localhost", "amqp://localhost:5672"),
    ("amqp://h", "amqp://h:5672"),
    ("amqps://h", "amqps://h:5671"),
    ("amqp://user:secret@h:20001", "amqp://user:secret@h:20001"),
])
def test_urls_get_a_scheme_and_a_numeric_port(url: str, connect: str) -> None:
    assert management_address(url) == (connect, "$management")


def test_router_selects_another_routers_management_node() -> None:
    assert management_address("h:1", "B") == ("amqp://h:1", "_topo/0/B/$management")


def test_a_path_in_the_url_names_the_management_node() -> None:
    assert management_address("amqp://h:1/_topo/0/C/$management", "B") == (
        "amqp://h:1", "_topo/0/C/$management")


def test_a_bad_port_is_reported_as_a_connection_failure() -> None:
    with pytest.raises(ConnectionFailed, match="bad URL"):
        management_address("h:notaport")


