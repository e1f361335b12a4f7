"""Balanced and closest forwarding choices (docs/routing.md#distributions)."""

from __future__ import annotations

import attrs

from addressing import choose_balanced, choose_closest


@attrs.define
class Link:
    name: str
    load: int = 0
    capacity: int = 10


@attrs.frozen
class Remote:
    """A remote router candidate: load = outstanding + cost."""

    router: str
    outstanding: int
    cost: int
    link_capacity: int = 10

    @property
    def load(self) -> int:
        return self.outstanding + self.cost

    @property
    def capacity(self) -> int:
        return self.link_capacity + self.cost


def names(links: list[Link]) -> list[str]:
    return [link.name for link in links]


def test_balanced_prefers_the_least_loaded() -> None:
    links = [Link("a", 3), Link("b", 1), Link("c", 2)]
    assert choose_balanced(links) is links[1]
    assert names(links) == ["a", "b", "c"]  # only an idle choice rotates


def test_balanced_ties_keep_the_earlier_consumer() -> None:
    links = [Link("a", 2), Link("b", 1), Link("c", 1)]
    chosen = choose_balanced(links)
    assert chosen is not None and chosen.name == "b"


def test_balanced_idle_choice_moves_to_the_end() -> None:
    links = [Link("a"), Link("b"), Link("c")]
    picks = []
    for _ in range(6):
        chosen = choose_balanced(links)
        assert chosen is not None
        picks.append(chosen.name)
    assert picks == ["a", "b", "c", "a", "b", "c"]


def test_balanced_stops_at_the_first_idle_consumer() -> None:
    links = [Link("a", 1), Link("b", 0), Link("c", 0)]
    chosen = choose_balanced(links)
    assert chosen is not None and chosen.name == "b"
    assert names(links) == ["a", "c", "b"]


def test_balanced_falls_back_to_the_least_loaded_ineligible() -> None:
    links = [Link("a", 12, 10), Link("b", 10, 10), Link("c", 11, 10)]
    chosen = choose_balanced(links)
    assert chosen is not None and chosen.name == "b"
    assert names(links) == ["a", "b", "c"]


def test_balanced_eligible_beats_a_less_loaded_ineligible() -> None:
    links = [Link("full", 1, 1), Link("busy", 5, 10)]
    chosen = choose_balanced(links)
    assert chosen is not None and chosen.name == "busy"


def test_balanced_with_nothing_returns_none() -> None:
    assert choose_balanced([]) is None
    empty: list[Link] = []
    assert choose_balanced(empty, [Remote("R", 0, 1, link_capacity=0)]) is not None


def test_balanced_skips_remotes_when_a_local_consumer_is_idle() -> None:
    links = [Link("a", 0)]
    remotes = [Remote("R", 0, 0)]
    assert choose_balanced(links, remotes) is links[0]


def test_balanced_compares_remote_load_plus_cost() -> None:
    links = [Link("a", 3)]
    cheap = Remote("R1", outstanding=1, cost=1)
    dear = Remote("R2", outstanding=0, cost=5)
    assert choose_balanced(links, [dear, cheap]) is cheap
    tied = [Link("a", 2)]
    assert choose_balanced(tied, [cheap]) is tied[0]  # a tie: the local consumer wins


def test_balanced_remote_eligibility_uses_outstanding_only() -> None:
    # outstanding 10 of link capacity 10: ineligible whatever the cost
    full = Remote("R1", outstanding=10, cost=1)
    links = [Link("a", 20, 10)]
    assert choose_balanced(links, [full]) is full
    spare = Remote("R2", outstanding=9, cost=50)
    assert choose_balanced(links, [full, spare]) is spare


def test_balanced_accepts_a_generator_of_remotes() -> None:
    remotes = [Remote("R1", 2, 1), Remote("R2", 0, 1)]
    chosen = choose_balanced([Link("a", 5)], (r for r in remotes if r.router != "R2"))
    assert chosen is remotes[0]


def test_closest_is_round_robin() -> None:
    links = [Link("a"), Link("b"), Link("c")]
    picks = [choose_closest(links) for _ in range(4)]
    assert [link.name for link in picks if link is not None] == ["a", "b", "c", "a"]
    assert names(links) == ["b", "c", "a"]


def test_closest_with_one_or_none() -> None:
    assert choose_closest([]) is None
    only = [Link("a")]
    assert choose_closest(only) is only[0]
    assert names(only) == ["a"]
