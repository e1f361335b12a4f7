"""Which connection serves which auto-link, and when links are attached again."""

from __future__ import annotations

import attrs
import pytest

from addressing import Direction
from autolink import AutoLinkEntity, AutoLinkError, AutoLinkSpec, AutoLinkState, AutoLinkTable

S = AutoLinkState


@attrs.frozen
class Peer:
    container_id: str
    name: str | None = None


def shown(entity: AutoLinkEntity[Peer]) -> AutoLinkState:
    """The state management shows (read afresh: it follows the links)."""
    return entity.state


def spec(address: str = "q", **kw: object) -> AutoLinkSpec:
    return AutoLinkSpec(address=address, direction=Direction.OUT, **kw)  # type: ignore[arg-type]


def test_a_serving_connection_attaches_the_inactive_autolinks_it_serves() -> None:
    table: AutoLinkTable[Peer] = AutoLinkTable([
        spec("a", container_id="broker1"),
        spec("b", connection="to-broker"),
        spec("c", container_id="broker2"),
    ])
    broker = Peer("broker1", name="to-broker")
    attached = table.connection_opened(broker)
    assert [al.spec.address for al in attached] == ["a", "b"]
    assert all(al.state is S.ATTACHING and al.peer is broker for al in attached)
    assert [al.state for al in table] == [S.ATTACHING, S.ATTACHING, S.INACTIVE]


def test_neither_container_id_nor_connection_is_never_served() -> None:
    table: AutoLinkTable[Peer] = AutoLinkTable([spec()])
    assert table.connection_opened(Peer("anything", name="anything")) == []


def test_every_serving_connection_gets_a_link_of_its_own() -> None:
    table: AutoLinkTable[Peer] = AutoLinkTable([spec(container_id="b")])
    first, second = Peer("b", "x"), Peer("b", "y")
    (one,) = table.connection_opened(first)
    (two,) = table.connection_opened(second)
    assert one is not two and (one.peer, two.peer) == (first, second)
    [entity] = table
    assert entity.links == [one, two] and shown(entity) is S.ATTACHING
    two.replied(True, link_id=7)
    assert shown(entity) is S.ACTIVE and entity.link_id == 7


def test_losing_a_connection_loses_only_the_link_on_it() -> None:
    table: AutoLinkTable[Peer] = AutoLinkTable([spec(container_id="b")])
    first, second = Peer("b", "x"), Peer("b", "y")
    (one,) = table.connection_opened(first)
    one.replied(True, link_id=1)
    (two,) = table.connection_opened(second)
    table.connection_closed(first)
    [entity] = table
    assert one.state is S.INACTIVE and entity.links == [two]
    assert shown(entity) is S.ATTACHING and entity.link_id is None
    table.connection_closed(second)
    assert entity.links == [] and shown(entity) is S.INACTIVE


def test_broker_coming_back_reattaches() -> None:
    table: AutoLinkTable[Peer] = AutoLinkTable([spec(connection="broker")])
    (al,) = table.connection_opened(Peer("rabbit", "broker"))
    al.replied(True, link_id=1)
    table.connection_closed(Peer("rabbit", "broker"))
    assert al.link_id == 1, "an equal but different connection is not the one the link is on"
    table.connection_closed(al.peer)  # type: ignore[arg-type]
    assert al.state is S.INACTIVE
    back = Peer("rabbit", "broker")
    (again,) = table.connection_opened(back)
    assert again.peer is back and again.state is S.ATTACHING


def test_failed_links_are_attached_again_when_their_retry_is_due() -> None:
    table: AutoLinkTable[Peer] = AutoLinkTable([spec(container_id="b"),
                                                spec("r", container_id="b")])
    peer = Peer("b")
    first, second = table.connection_opened(peer)
    second.replied(True, link_id=2)
    assert table.next_deadline() is None
    table.detached(first, "amqp:not-found", now=10.0)
    assert table.next_deadline() == 12.0
    assert table.tick(11.9) == []
    assert table.tick(12.0) == [first]
    assert (first.state, first.peer) == (S.ATTACHING, peer)
    assert table.next_deadline() is None
    assert second.state is S.ACTIVE


def test_closing_the_connection_of_a_failed_link_cancels_its_retry() -> None:
    table: AutoLinkTable[Peer] = AutoLinkTable([spec(container_id="b")])
    peer = Peer("b")
    (al,) = table.connection_opened(peer)
    table.detached(al, "x", now=0.0)
    table.connection_closed(peer)
    assert al.state is S.INACTIVE
    assert table.next_deadline() is None
    assert table.tick(100.0) == []


def test_names_are_unique_and_identities_are_assigned_in_order() -> None:
    table: AutoLinkTable[Peer] = AutoLinkTable([spec(name="one"), spec()])
    assert [al.identity for al in table] == ["1", "2"]
    assert len(table) == 2
    with pytest.raises(AutoLinkError, match="name conflicts"):
        table.add(spec(name="one"))


def test_an_autolink_added_at_run_time_attaches_on_every_open_serving_connection() -> None:
    table: AutoLinkTable[Peer] = AutoLinkTable()
    brokers = [Peer("broker", "x"), Peer("broker", "y"), Peer("other")]
    for peer in brokers:
        table.connection_opened(peer)
    late = table.add(spec("late", container_id="broker"))
    links = table.activate(late)
    assert [al.peer for al in links] == brokers[:2] and late.state is S.ATTACHING
    elsewhere = table.add(spec("other", container_id="nobody"))
    assert table.activate(elsewhere) == [] and elsewhere.state is S.INACTIVE


def test_a_removed_autolink_is_never_retried() -> None:
    table: AutoLinkTable[Peer] = AutoLinkTable([spec("a", container_id="broker")])
    [autolink] = table.connection_opened(Peer("broker"))
    table.detached(autolink, "refused", now=0.0)
    [entity] = table
    assert entity.state is S.FAILED and entity.last_error == "refused"
    assert table.remove(entity) == [autolink], "its links, for the caller to detach"
    assert len(table) == 0
    assert table.next_deadline() is None and table.tick(100.0) == []
