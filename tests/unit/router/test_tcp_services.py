"""router.core.tcp: where each TCP connection goes, what is held, what is counted."""

from __future__ import annotations

from router.core.tcp import REFUSED_HOLDOFF_S, BridgeKind, TcpBridge, TcpServices


def _listener(address: str = "svc") -> TcpBridge:
    return TcpBridge(kind=BridgeKind.LISTENER, name=f"in-{address}", address=address,
                     host="127.0.0.1", port="0")


def _connector(name: str, address: str = "svc") -> TcpBridge:
    return TcpBridge(kind=BridgeKind.CONNECTOR, name=name, address=address,
                     host="127.0.0.1", port="1")


def _services(*connectors: TcpBridge) -> tuple[TcpServices, TcpBridge]:
    services = TcpServices()
    listener = _listener()
    services.add(listener)
    for connector in connectors:
        services.add(connector)
    return services, listener


def test_each_connection_goes_to_the_connector_with_the_fewest_open() -> None:
    a, b = _connector("a"), _connector("b")
    services, listener = _services(a, b)
    chosen = []
    for n in range(4):
        conn = services.accepted(listener, f"10.0.0.1:{n}", now=0.0)
        connector = services.route(conn, now=0.0)
        assert connector is not None
        services.connected(conn, "127.0.0.1:1")
        chosen.append(connector.name)
    assert sorted(chosen) == ["a", "a", "b", "b"]
    assert (a.open, b.open) == (2, 2)
    # One of a's ends: the next goes to a.
    first_a = next(c for c in services.connections.values() if c.connector is a)
    services.ended(first_a)
    conn = services.accepted(listener, "10.0.0.1:9", now=1.0)
    assert services.route(conn, now=1.0) is a
    assert (a.opened, a.closed, listener.opened, listener.closed) == (2, 1, 5, 1)


def test_equally_loaded_connectors_take_turns() -> None:
    a, b = _connector("a"), _connector("b")
    services, listener = _services(a, b)
    names = []
    for n in range(4):
        conn = services.accepted(listener, f"p:{n}", now=0.0)
        connector = services.route(conn, now=0.0)
        assert connector is not None
        names.append(connector.name)
        services.connected(conn, "s:1")
        services.ended(conn)
    assert names == ["a", "b", "a", "b"]
    assert (a.open, b.open) == (0, 0)


def test_a_refused_connector_is_passed_over_then_tried_again() -> None:
    a, b = _connector("a"), _connector("b")
    services, listener = _services(a, b)
    conn = services.accepted(listener, "p:1", now=0.0)
    assert services.route(conn, now=0.0) is a
    services.refused(conn, now=0.0)
    # The same connection goes on to b, never back to a.
    assert services.route(conn, now=0.0) is b
    services.connected(conn, "s:2")
    assert conn.connector is b and a.refused == 1 and a.open == 0
    # New connections avoid a while it is held off, even though it has fewer open.
    later = services.accepted(listener, "p:2", now=1.0)
    assert services.route(later, now=1.0) is b
    services.connected(later, "s:2")
    again = services.accepted(listener, "p:3", now=REFUSED_HOLDOFF_S + 0.1)
    assert services.route(again, now=REFUSED_HOLDOFF_S + 0.1) is a


def test_when_every_connector_refused_the_connection_is_not_held() -> None:
    a = _connector("a")
    services, listener = _services(a)
    conn = services.accepted(listener, "p:1", now=0.0)
    assert services.route(conn, now=0.0) is a
    services.refused(conn, now=0.0)
    assert services.route(conn, now=0.0) is None
    assert not services.held
    services.ended(conn)
    assert (listener.open, listener.closed, a.open, a.closed) == (0, 1, 0, 0)


def test_a_connection_is_held_until_its_address_has_a_connector() -> None:
    services, listener = _services(_connector("other", address="elsewhere"))
    first = services.accepted(listener, "p:1", now=0.0)
    second = services.accepted(listener, "p:2", now=0.0)
    assert services.route(first, now=0.0) is None
    assert services.route(second, now=0.0) is None
    assert list(services.held["svc"]) == [first, second]
    # A client that leaves while held is no longer held.
    services.ended(first)
    assert list(services.held["svc"]) == [second]
    released = services.add(_connector("late"))
    assert released == [second] and not services.held
    assert services.route(second, now=1.0) is not None


def test_a_connection_that_ends_while_connecting_frees_its_connector() -> None:
    a = _connector("a")
    services, listener = _services(a)
    conn = services.accepted(listener, "p:1", now=0.0)
    services.route(conn, now=0.0)
    assert a.open == 1
    services.ended(conn)
    services.ended(conn)  # once only
    assert (a.open, listener.open, listener.closed) == (0, 0, 1)


def test_bytes_are_counted_on_the_connection_and_both_bridges() -> None:
    a = _connector("a")
    services, listener = _services(a)
    conn = services.accepted(listener, "p:1", now=0.0)
    services.route(conn, now=0.0)
    services.connected(conn, "127.0.0.1:1")
    services.moved(conn, 100, 0, now=1.0)
    services.moved(conn, 20, 7, now=2.0)
    assert (conn.bytes_in, conn.bytes_out, conn.last_in, conn.last_out) == (120, 7, 2.0, 2.0)
    assert (listener.bytes_in, listener.bytes_out) == (120, 7)
    assert (a.bytes_in, a.bytes_out) == (120, 7)
    assert listener.identity == "tcpListener/in-svc" and a.identity == "tcpConnector/a"


def test_a_stream_from_another_router_counts_on_its_connector_alone() -> None:
    a = _connector("a")
    services, listener = _services(a)
    conn = services.streamed(a, "10.0.0.1:5000@site", now=0.0)
    assert (conn.listener, conn.address, conn.tried, a.open) == (None, "svc", [a], 1)
    services.connected(conn, "127.0.0.1:1")
    services.moved(conn, 5, 9, now=1.0)
    assert (a.bytes_in, a.bytes_out, listener.bytes_in) == (5, 9, 0)
    services.ended(conn)
    assert (a.open, a.closed, a.opened, listener.closed) == (0, 1, 1, 0)
    assert conn.id not in services.connections


def test_a_held_connection_sent_to_the_network_is_no_longer_held() -> None:
    services, listener = _services()
    conn = services.accepted(listener, "p:1", now=0.0)
    assert services.route(conn, now=0.0) is None
    services.unheld(conn)
    assert not services.held
    assert services.add(_connector("late")) == []
