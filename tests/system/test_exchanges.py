"""Exchanges and bindings on real routers (docs/routing.md#exchanges): a
message sent to an exchange's address goes to the next hop of each binding
whose key its subject matches, once per next hop, else to the alternate;
the producer's unsettled delivery is accepted when a copy went anywhere and
released when none did; exchanges are made and deleted at run time, count
what they did, and are reached from other routers."""

from __future__ import annotations

from typing import Any

from proton import Delivery, Message, Timeout
from proton.reactor import AtMostOnce
from proton.utils import BlockingConnection, BlockingReceiver, BlockingSender

from tests.system.clients import connect, pump, send_async, wait_all, wait_settled
from tests.system.conftest import StartRouter
from tests.system.harness import router_conf
from tests.system.mgmt import Management
from tests.system.network import start_network

EXCHANGE = "router.config.exchange"
BINDING = "router.config.binding"


def exchange(name: str, address: str, **attributes: Any) -> str:
    lines = "".join(f"    {key}: {value}\n" for key, value in attributes.items())
    return f"exchange {{\n    name: {name}\n    address: {address}\n{lines}}}\n"


def binding(name: str, exchange_name: str, next_hop: str, key: str | None = None,
            **attributes: Any) -> str:
    lines = "".join(f"    {k}: {v}\n" for k, v in attributes.items())
    key_line = "" if key is None else f"    bindingKey: {key}\n"
    return (f"binding {{\n    name: {name}\n    exchangeName: {exchange_name}\n{key_line}"
            f"    nextHopAddress: {next_hop}\n{lines}}}\n")


def ready(conn: BlockingConnection, address: str, settled: bool = False) -> BlockingSender:
    """A sender to ``address`` once it has credit (pre-settled with ``settled``)."""
    sender = conn.create_sender(address, options=AtMostOnce() if settled else None)
    conn.wait(lambda: sender.link.credit > 0, timeout=10, msg=f"credit on {address}")
    return sender


def bodies(receiver: BlockingReceiver, seconds: float = 0.3) -> list[Any]:
    """The messages ``receiver`` gets until none comes for ``seconds``, those
    not pre-settled accepted."""
    got: list[Any] = []
    while True:
        try:
            message = receiver.receive(timeout=seconds)
        except Timeout:
            return got
        got.append(message.body)
        if receiver.fetcher.unsettled:
            receiver.accept()


def by_name(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {row["name"]: row for row in rows}


TOPICS = (exchange("Exchange1", "Address1", matchMethod="amqp")
          + binding("binding1", "Exchange1", "nextHop1", "a.*")
          + binding("binding2", "Exchange1", "nextHop1", "a.b")
          + binding("binding3", "Exchange1", "nextHop1", "a.c.#")
          + binding("binding4", "Exchange1", "nextHop2", "a.c.#")
          + binding("binding5", "Exchange1", "nextHop2", "a.b.c"))


def test_a_message_goes_once_to_each_next_hop_its_subject_matches(
        start_router: StartRouter) -> None:
    hop = start_router(router_conf(TOPICS))
    conn = connect(hop.url)
    mgmt = Management(hop.url)
    try:
        nhop1 = conn.create_receiver("nextHop1", credit=100)
        nhop2 = conn.create_receiver("nextHop2", credit=100)
        sender = ready(conn, "Address1", settled=True)
        for subject, body in (("a.b", "A"), ("a.c", "B"), ("a.c.d", "C"), ("x.y.z", "nobody"),
                              ("a.b.c", "D")):
            sender.send(Message(subject=subject, body=body))
        assert bodies(nhop1, 0.5) == ["A", "B", "C"]
        assert bodies(nhop2) == ["B", "C", "D"]
        matched = {name: row["matchedCount"]
                   for name, row in by_name(mgmt.query(BINDING)).items()}
        assert matched == {"binding1": 2, "binding2": 1, "binding3": 2, "binding4": 2,
                           "binding5": 1}
        row = by_name(mgmt.query(EXCHANGE))["Exchange1"]
        assert (row["bindingCount"], row["receivedCount"], row["forwardedCount"],
                row["divertedCount"], row["droppedCount"]) == (5, 5, 4, 0, 1)
    finally:
        mgmt.close()
        conn.close()


def test_mqtt_keys_and_the_alternate_for_subjects_nothing_matches(
        start_router: StartRouter) -> None:
    hop = start_router(router_conf(
        exchange("Exchange1", "Address2", matchMethod="mqtt", alternateAddress="altNextHop")
        + binding("binding1", "Exchange1", "nextHop1", "a/b")
        + binding("binding2", "Exchange1", "nextHop2", "a/+")
        + binding("binding3", "Exchange1", "nextHop1", "c/#")
        + binding("binding4", "Exchange1", "nextHop2", "c/b")))
    conn = connect(hop.url)
    mgmt = Management(hop.url)
    try:
        nhop1 = conn.create_receiver("nextHop1", credit=100)
        nhop2 = conn.create_receiver("nextHop2", credit=100)
        alt = conn.create_receiver("altNextHop", credit=100)
        sender = ready(conn, "Address2", settled=True)
        for subject, body in (("a/b", "A"), ("a/c", "B"), ("c/b", "C"), ("c/b/dee/eee", "D"),
                              ("x.y.z", "?"), (None, "no subject")):
            sender.send(Message(subject=subject, body=body))
        assert bodies(nhop1, 0.5) == ["A", "C", "D"]
        assert bodies(nhop2) == ["A", "B", "C"]
        assert bodies(alt) == ["?", "no subject"]
        row = by_name(mgmt.query(EXCHANGE))["Exchange1"]
        assert (row["receivedCount"], row["forwardedCount"], row["divertedCount"],
                row["droppedCount"]) == (6, 6, 2, 0)
    finally:
        mgmt.close()
        conn.close()


def test_an_unsettled_message_is_accepted_once_forwarded_and_released_when_not(
        start_router: StartRouter) -> None:
    """Copies are pre-settled, so the router settles the producer's delivery
    itself: accepted when a copy went to a next hop (a multicast one gives a
    copy to each of its consumers), released when no binding's next hop nor
    an alternate had a destination."""
    hop = start_router(router_conf(
        "address {\n    pattern: nextHop2/#\n    distribution: multicast\n}\n"
        + exchange("Exchange1", "Address3")
        + binding("binding1", "Exchange1", "nextHop1", "a.b")
        + binding("binding2", "Exchange1", "nextHop2", "*.b")
        + binding("binding3", "Exchange1", "nobodyHere", "q")))
    conn = connect(hop.url)
    try:
        nhop1 = conn.create_receiver("nextHop1", credit=10)
        nhop2a = conn.create_receiver("nextHop2", credit=10, name="nextHop2-a")
        nhop2b = conn.create_receiver("nextHop2", credit=10, name="nextHop2-b")
        sender = ready(conn, "Address3")
        forwarded = send_async(sender, "A", subject="a.b")
        unbound = send_async(sender, "B", subject="x.y")
        nowhere = send_async(sender, "C", subject="q")
        assert wait_settled(conn, forwarded) == Delivery.ACCEPTED
        assert wait_settled(conn, unbound) == Delivery.RELEASED
        assert wait_settled(conn, nowhere) == Delivery.RELEASED
        assert [bodies(r) for r in (nhop1, nhop2a, nhop2b)] == [["A"], ["A"], ["A"]]
    finally:
        conn.close()


def test_bindings_without_a_key_take_every_subject(start_router: StartRouter) -> None:
    for method in ("amqp", "mqtt"):
        hop = start_router(router_conf(
            exchange("ExchangeF", "AddressF", matchMethod=method)
            + binding("binding1", "ExchangeF", "nextHop1", "pattern")
            + binding("binding2", "ExchangeF", "nextHop2")
            + binding("binding3", "ExchangeF", "nextHop3")), name=f"hop-{method}")
        conn = connect(hop.url)
        try:
            receivers = [conn.create_receiver(f"nextHop{n}", credit=10) for n in (1, 2, 3)]
            sender = ready(conn, "AddressF", settled=True)
            sender.send(Message(subject="nope", body="A"))
            sender.send(Message(subject="pattern", body="B"))
            assert [bodies(r) for r in receivers] == [["B"], ["A", "B"], ["A", "B"]]
        finally:
            conn.close()


def test_an_exchange_takes_a_message_of_many_frames(start_router: StartRouter) -> None:
    hop = start_router(router_conf(
        "address {\n    pattern: nextHop1/#\n    distribution: multicast\n}\n"
        + exchange("ExchangeA", "AddressA")
        + binding("bindingA1", "ExchangeA", "nextHop1", "a/b"),
        listener="listener {\n    host: 127.0.0.1\n    port: 0\n    maxFrameSize: 1024\n"
                 "    saslMechanisms: ANONYMOUS\n}\n"))
    conn = BlockingConnection(hop.url, timeout=10, max_frame_size=1024)
    try:
        first = conn.create_receiver("nextHop1", credit=5, name="first")
        second = conn.create_receiver("nextHop1", credit=5, name="second")
        sender = ready(conn, "AddressA")
        jumbo = "X" * 10240
        sender.send(Message(subject="a/b", body=jumbo))
        assert [bodies(r) for r in (first, second)] == [[jumbo], [jumbo]]
    finally:
        conn.close()


def test_a_large_message_streams_through_an_exchange(start_router: StartRouter) -> None:
    """A message large enough to be forwarded while it arrives (docs/routing.md#large-messages)
    goes through the exchange the same way: every copy whole, the producer's
    delivery accepted."""
    hop = start_router(router_conf(
        "address {\n    pattern: many/#\n    distribution: multicast\n}\n"
        + exchange("Big", "big") + binding("to-many", "Big", "many", "x")
        + binding("to-one", "Big", "one", "x")))
    conn = connect(hop.url)
    try:
        receivers = [conn.create_receiver("many", credit=2, name="many-a"),
                     conn.create_receiver("many", credit=2, name="many-b"),
                     conn.create_receiver("one", credit=2, name="one")]
        sender = ready(conn, "big")
        payload = bytes(range(256)) * 4096  # 1 MiB, many frames
        delivery = send_async(sender, payload, subject="x")
        # Pre-settled copies; proton's binary body is a view of the message's buffer.
        messages = [r.receive(timeout=20) for r in receivers]
        got = [bytes(m.body) for m in messages]
        assert [len(body) for body in got] == [len(payload)] * 3
        assert all(body == payload for body in got)
        assert wait_settled(conn, delivery) == Delivery.ACCEPTED
        mgmt = Management(hop.url)
        try:
            streamed = mgmt.query("router", "deliveriesStreamed")[0]["deliveriesStreamed"]
        finally:
            mgmt.close()
        assert streamed == 1, "the message was forwarded while it arrived"
    finally:
        conn.close()


def test_an_exchange_without_bindings_gives_its_senders_no_credit(
        start_router: StartRouter) -> None:
    """Its address has a destination only once it can forward: a binding
    made at run time gives the waiting sender credit, deleting the exchange
    takes it away again."""
    hop = start_router()
    mgmt = Management(hop.url)
    conn = connect(hop.url)
    try:
        status, _, _ = mgmt.request({"address": "late"}, operation="CREATE",
                                    type="org.apache.qpid.dispatch." + EXCHANGE, name="late")
        assert status == 201
        sender = conn.create_sender("late")
        pump(conn, 0.3)
        assert sender.link.credit == 0
        receiver = conn.create_receiver("there", credit=5)
        status, _, _ = mgmt.request(
            {"exchangeName": "late", "nextHopAddress": "there"}, operation="CREATE",
            type="org.apache.qpid.dispatch." + BINDING, name="b")
        assert status == 201
        conn.wait(lambda: sender.link.credit > 0, timeout=10, msg="credit once bound")
        sender.send(Message(subject="anything", body="hello"))
        assert bodies(receiver) == ["hello"]
        status, _, _ = mgmt.request(operation="DELETE",
                                    type="org.apache.qpid.dispatch." + EXCHANGE, name="late")
        assert status == 204
        assert mgmt.query(BINDING) == [], "the exchange's bindings went with it"
        conn.wait(lambda: sender.link.drain_mode, timeout=10, msg="drain requested")
        sender.link.drained()
        conn.wait(lambda: sender.link.credit == 0, timeout=10, msg="credit drained")
    finally:
        conn.close()
        mgmt.close()


def test_management_refuses_what_qdrouterd_refuses(start_router: StartRouter) -> None:
    hop = start_router(router_conf(
        exchange("Exchange2", "Address2", matchMethod="mqtt")
        + binding("b22", "Exchange2", "nextHop4", "a")))
    mgmt = Management(hop.url)
    ex, bd = "org.apache.qpid.dispatch." + EXCHANGE, "org.apache.qpid.dispatch." + BINDING
    try:
        refused = [
            ({"address": "Nope"}, ex, None),
            ({}, ex, "Nope"),
            ({"address": "foo"}, ex, "Exchange2"),
            ({"address": "foo", "matchMethod": "blinky"}, ex, "Exchange3"),
            ({"address": "Address2"}, ex, "Nope"),
            ({}, bd, "Nope"),
            ({"exchangeName": "Nope", "nextHopAddress": "x"}, bd, None),
            ({"exchangeName": "Exchange2", "bindingKey": "a", "nextHopAddress": "nextHop4"},
             bd, "Nuhuh"),
            ({"exchangeName": "Exchange2", "bindingKey": "x/y/z"}, bd, "Nuhuh"),
            ({"exchangeName": "Exchange2", "bindingKey": "x/#/z", "nextHopAddress": "Nope"},
             bd, None),
            ({"exchangeName": "Exchange2", "nextHopAddress": "Address2"}, bd, "loop"),
        ]
        for body, entity_type, name in refused:
            props: dict[str, Any] = {"operation": "CREATE", "type": entity_type}
            if name is not None:
                props["name"] = name
            status, description, _ = mgmt.request(body, **props)
            assert status == 400, (body, name, status, description)
        assert [row["name"] for row in mgmt.query(EXCHANGE)] == ["Exchange2"]
        assert [row["name"] for row in mgmt.query(BINDING)] == ["b22"]
        status, description, _ = mgmt.request(
            {"address": "Address2", "phase": 1}, operation="CREATE", type=ex, name="phase1")
        assert (status, description) == (
            400, "duplicate exchange address 'Address2': exchange 'Exchange2' has it (at "
                 "phase 0)"), "one exchange an address, whatever its phase"
    finally:
        mgmt.close()


def test_an_exchange_is_reached_from_another_router(start_router: StartRouter) -> None:
    """The exchange's address is advertised like a consumer's: a producer on
    B reaches the exchange on A, and the copies come back to B's consumers
    (multicast to both, balanced and closest to one), each copy addressed to
    its next hop anew."""
    patterns = ("address {\n    pattern: nextHop1/#\n    distribution: multicast\n}\n"
                "address {\n    pattern: nextHop2/#\n    distribution: balanced\n}\n"
                "address {\n    pattern: nextHop3/#\n    distribution: closest\n}\n")
    network = start_network(start_router, {"A": [], "B": ["A"]}, extra=patterns, extras={
        "A": exchange("ExchangeA", "AddressA", matchMethod="mqtt")
        + binding("bindingA1", "ExchangeA", "nextHop1", "a/b")
        + binding("bindingA2", "ExchangeA", "nextHop2", "a/+")
        + binding("bindingA3", "ExchangeA", "nextHop3", "+/b")
        + binding("bindingA4", "ExchangeA", "NotSubscribed", "a/#")})
    conn = connect(network.routers["B"].url)
    try:
        receivers = [conn.create_receiver(address, credit=5, name=f"r{n}") for n, address
                     in enumerate(("nextHop1", "nextHop1", "nextHop2", "nextHop3"))]
        mgmt_a = Management(network.routers["A"].url)
        try:
            wait_all([conn], lambda: all(
                row["remoteCount"] >= 1 for row in mgmt_a.query("router.address", "name",
                                                               "remoteCount")
                if row["name"] in ("M0nextHop1", "M0nextHop2", "M0nextHop3"))
                and len([row for row in mgmt_a.query("router.address", "name")
                         if row["name"] in ("M0nextHop1", "M0nextHop2", "M0nextHop3")]) == 3,
                what="A knows B's consumers")
        finally:
            mgmt_a.close()
        sender = ready(conn, "AddressA")
        delivery = send_async(sender, "Hi!", subject="a/b")
        assert wait_settled(conn, delivery) == Delivery.ACCEPTED
        assert [bodies(r) for r in receivers] == [["Hi!"]] * 4
    finally:
        conn.close()


def test_an_exchange_on_an_edge_router_forwards_up_its_uplink_and_is_reached_from_it(
        start_router: StartRouter) -> None:
    """On an edge router an exchange's copies for consumers beyond the edge go
    up the uplink, and its address, advertised to the interior, takes a
    producer's messages from there."""
    network = start_network(start_router, {"A": []}, edges={"E": ["A"]}, extras={
        "E": exchange("Edgy", "edgy") + binding("up", "Edgy", "far", "x")
        + binding("here", "Edgy", "near", "y")})
    interior = connect(network.routers["A"].url)
    edge = connect(network.routers["E"].url)
    try:
        far = interior.create_receiver("far", credit=5)
        near = edge.create_receiver("near", credit=5)
        sender = interior.create_sender("edgy")
        wait_all([interior, edge], lambda: sender.link.credit > 0,
                 what="credit for the edge's exchange on the interior")
        first = send_async(sender, "to the interior", subject="x")
        second = send_async(sender, "back to the edge", subject="y")
        wait_all([interior, edge], lambda: first.settled and second.settled,
                 what="both settled")
        assert (first.remote_state, second.remote_state) == (Delivery.ACCEPTED,
                                                             Delivery.ACCEPTED)
        assert bodies(far) == ["to the interior"]
        assert bodies(near) == ["back to the edge"]
    finally:
        interior.close()
        edge.close()


def test_an_exchange_may_forward_to_another_exchange(start_router: StartRouter) -> None:
    """A next hop that is another exchange's address: the copy goes through
    that exchange too, in the same wake-up; a binding back to the first is
    refused (it would forward for ever)."""
    hop = start_router(router_conf(
        exchange("first", "orders", matchMethod="mqtt") + exchange("second", "eu")
        + binding("to-second", "first", "eu", "eu/#") + binding("to-desk", "second", "desk")))
    conn = connect(hop.url)
    mgmt = Management(hop.url)
    try:
        desk = conn.create_receiver("desk", credit=5)
        sender = ready(conn, "orders")
        delivery = send_async(sender, "order 1", subject="eu/fr")
        assert wait_settled(conn, delivery) == Delivery.ACCEPTED
        assert bodies(desk) == ["order 1"]
        counts = {row["name"]: (row["receivedCount"], row["forwardedCount"])
                  for row in mgmt.query(EXCHANGE)}
        assert counts == {"first": (1, 1), "second": (1, 1)}
        status, description, _ = mgmt.request(
            {"exchangeName": "second", "nextHopAddress": "orders"}, operation="CREATE",
            type="org.apache.qpid.dispatch." + BINDING, name="back")
        assert (status, description) == (
            400, "the binding of exchange 'second' would send its messages back to 'eu' "
                 "(phase 0) for ever")
    finally:
        mgmt.close()
        conn.close()
