"""router.core.tcpstream: connection ids and the read window of a carried stream."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from router.core.tcpstream import WINDOW_BYTES, ReadWindow, connection_id


def test_the_id_is_the_clients_address_then_the_site() -> None:
    assert connection_id("127.0.0.1:40123", None) == "127.0.0.1:40123"
    assert connection_id("127.0.0.1:40123", "") == "127.0.0.1:40123"
    assert connection_id("[::1]:5000", "east") == "[::1]:5000@east"


def test_reading_stops_at_the_window_and_resumes_on_a_report() -> None:
    window = ReadWindow()
    assert window.room == WINDOW_BYTES == 1_459_620
    window.took(WINDOW_BYTES - 10)
    assert window.room == 10 and not window.full
    window.took(10)
    assert window.full and window.room == 0
    assert window.reported(4096) is True, "the window opened"
    assert window.room == 4096 and not window.full
    assert window.reported(8192) is False, "it was not full"
    assert window.room == 8192


def test_an_older_report_or_one_beyond_what_was_read_moves_nothing_past_bounds() -> None:
    window = ReadWindow()
    window.took(100)
    window.reported(80)
    window.reported(40)  # crossed on the way: older
    assert window.written == 80
    window.reported(10_000)  # more than was ever sent
    assert window.written == 100 and window.room == WINDOW_BYTES


def test_a_settled_or_finished_delivery_lifts_the_window() -> None:
    window = ReadWindow()
    window.took(WINDOW_BYTES)
    assert window.full
    assert window.ended() is True, "held reading may go on"
    assert window.room is None and not window.full
    window.took(10 * WINDOW_BYTES)
    assert not window.full
    assert ReadWindow().ended() is False


@given(st.lists(st.one_of(st.tuples(st.just("took"), st.integers(0, 2 * WINDOW_BYTES)),
                          st.tuples(st.just("reported"), st.integers(0, 10 * WINDOW_BYTES)))))
def test_the_unreported_bytes_never_exceed_the_window_when_reads_respect_room(
        steps: list[tuple[str, int]]) -> None:
    window = ReadWindow()
    for kind, amount in steps:
        if kind == "took":
            room = window.room
            assert room is not None
            window.took(min(amount, room))
        else:
            window.reported(amount)
        assert 0 <= window.read - window.written <= WINDOW_BYTES
        assert window.written <= window.read
