"""bench.wire's packet model, without devices: what each direction of the
link does to the packets that arrive (docs/reliability.md#lossy-and-slow-links)."""

from __future__ import annotations

import random

from bench.wire import Direction, Shaping


def _direction(**shaping: float) -> Direction:
    return Direction(Shaping(**shaping), random.Random(7))  # type: ignore[arg-type]


def test_a_clean_link_passes_each_packet_at_once_and_in_order() -> None:
    link = _direction()
    for n in range(5):
        link.arrive(bytes([n]), 1.0)
    assert link.due(1.0) == [bytes([n]) for n in range(5)]
    assert link.counts() == {"carried": 5, "lost": 0, "overflowed": 0, "reordered": 0,
                             "held": 0}


def test_a_delay_holds_each_packet_for_it() -> None:
    link = _direction(delay_s=0.1)
    link.arrive(b"a", 1.0)
    assert link.due(1.09) == []
    assert link.next_due() == 1.1
    assert link.due(1.1) == [b"a"]


def test_loss_drops_about_its_share() -> None:
    link = _direction(loss=0.2, limit=10_000)
    for _ in range(10_000):
        link.arrive(b"x", 0.0)
    assert 1_800 < link.lost < 2_200
    assert len(link.due(0.0)) == 10_000 - link.lost


def test_jitter_lets_packets_overtake_and_keeps_each_within_its_bounds() -> None:
    link = _direction(delay_s=0.05, jitter_s=0.02)
    for n in range(200):
        link.arrive(n.to_bytes(2, "big"), n * 0.001)
    out: list[int] = []
    t = 0.0
    while len(out) < 200:
        t += 0.0005
        for packet in link.due(t):
            n = int.from_bytes(packet, "big")
            assert 0.03 - 1e-9 <= t - n * 0.001 <= 0.07 + 0.0005
            out.append(n)
    assert sorted(out) == list(range(200)), "each packet once"
    assert out != list(range(200)) and link.reordered > 0


def test_reorder_sends_its_share_at_once_ahead_of_those_held() -> None:
    link = _direction(delay_s=0.1, reorder=0.25)
    for n in range(1_000):
        link.arrive(n.to_bytes(2, "big"), 0.0)
    at_once = link.due(0.0)
    assert 200 < len(at_once) < 300
    rest = link.due(0.1)
    assert len(at_once) + len(rest) == 1_000
    number = [int.from_bytes(p, "big") for p in rest]
    assert number == sorted(number), "those held leave in their order"
    overtaken = sum(1 for n in number if n < max(int.from_bytes(p, "big") for p in at_once))
    assert link.reordered == overtaken > 0


def test_the_rate_serialises_packets_on_the_line() -> None:
    link = _direction(rate_bps=8_000.0)  # 1,000 bytes a second
    for _ in range(3):
        link.arrive(b"x" * 100, 0.0)
    assert link.due(0.099) == []
    assert len(link.due(0.1)) == 1
    assert len(link.due(0.2)) == 1
    last = link.next_due()
    assert last is not None and abs(last - 0.3) < 1e-9


def test_a_full_queue_drops_what_arrives() -> None:
    link = _direction(delay_s=1.0, limit=3)
    for _ in range(5):
        link.arrive(b"x", 0.0)
    assert link.overflowed == 2
    assert len(link.due(1.0)) == 3
