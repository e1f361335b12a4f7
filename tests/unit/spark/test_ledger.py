"""The streaming reader's ledger: batches, commits, the journal and duplicates."""

from __future__ import annotations

from pathlib import Path

from spark.ledger import Journal, Ledger, Log, Record


def rec(n: int, token: object | None = None, message_id: str | None = "auto") -> Record:
    return Record(data=f"m{n}".encode(), address="a", received_at_s=float(n),
                  message_id=f"id{n}" if message_id == "auto" else message_id,
                  token=token if token is not None else f"t{n}")


def feed(ledger: Ledger, *numbers: int) -> None:
    for n in numbers:
        assert ledger.received(rec(n)).accept == []


def test_batches_take_what_arrived_up_to_the_limit_and_commit_accepts_them() -> None:
    ledger = Ledger()
    assert ledger.plan(0, None) == (0, ledger.plan(0, None)[1])  # nothing yet: start again
    feed(ledger, 0, 1, 2, 3, 4)
    end, _ = ledger.plan(0, 3)
    assert end == 3
    assert ledger.plan(0, 3)[0] == 3, "asked again, the same batch"
    records, _ = ledger.records(0, 3)
    assert [r.data for r in records] == [b"m0", b"m1", b"m2"]
    assert ledger.held == 5
    assert ledger.commit(3).accept == ["t0", "t1", "t2"]
    assert ledger.held == 2
    assert ledger.plan(3, None)[0] == 5
    assert ledger.commit(3).accept == [], "a commit is applied once"


def test_stopping_releases_everything_not_accepted() -> None:
    ledger = Ledger()
    feed(ledger, 0, 1, 2)
    ledger.plan(0, 2)
    assert sorted(map(str, ledger.release_all().release)) == ["t0", "t1", "t2"]


def test_without_a_journal_a_lost_batch_replays_empty() -> None:
    """After a restart its messages come again from the router, as new ones."""
    ledger = Ledger()
    records, _ = ledger.records(10, 15)
    assert records == []


def test_a_journaled_batch_replays_the_same_rows_after_a_restart(tmp_path: Path) -> None:
    first = Ledger(Journal(tmp_path))
    feed(first, 0, 1, 2, 3)
    assert first.plan(0, 4)[0] == 4
    first.release_all()  # the process dies; the router takes the messages back

    second = Ledger(Journal(tmp_path))
    records, settle = second.records(0, 4)  # Spark runs the batch again
    assert [r.data for r in records] == [b"m0", b"m1", b"m2", b"m3"]
    assert settle.accept == []
    # the router delivers the released messages again: they are not emitted twice
    for n in range(4):
        assert second.received(rec(n, token=f"again{n}")).accept == []
    assert second.buffered == 0 and second.duplicates_dropped == 4
    assert second.commit(4).accept == ["again0", "again1", "again2", "again3"]
    assert names(tmp_path) == ["0-4.done"], "a committed batch leaves only its mark"
    # a copy arriving late is accepted at once
    assert second.received(rec(2, token="late")).accept == ["late"]
    # a new message with a new id is a new row
    feed(second, 9)
    assert second.plan(4, None)[0] == 5
    assert names(tmp_path) == ["0-4.done", "4-5.batch"]
    assert second.commit(5).accept == ["t9"]
    assert names(tmp_path) == ["4-5.done"], "a mark lasts until the next commit"


def names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_a_batch_committed_but_never_accepted_is_not_emitted_again(tmp_path: Path) -> None:
    """Spark committed the batch, then killed the reader before its accepts went out."""
    first = Ledger(Journal(tmp_path))
    feed(first, 0, 1, 2)
    assert first.plan(0, 2)[0] == 2
    assert first.commit(2).accept == ["t0", "t1"]  # ... and the process dies here
    second = Ledger(Journal(tmp_path))
    end, settle = second.plan(2, None)  # Spark starts after the committed batch
    assert (end, settle.accept) == (2, [])
    # the router delivers every unaccepted message again
    assert second.received(rec(0, token="r0")).accept == ["r0"]
    assert second.received(rec(1, token="r1")).accept == ["r1"]
    assert second.received(rec(2, token="r2")).accept == []
    assert second.buffered == 1 and second.duplicates_dropped == 2
    assert second.plan(2, None)[0] == 3
    assert [r.token for r in second.records(2, 3)[0]] == ["r2"]
    assert second.commit(3).accept == ["r2"]
    assert names(tmp_path) == ["2-3.done"]


def test_a_mark_written_before_its_batch_was_removed_wins(tmp_path: Path) -> None:
    """A crash between writing the mark and removing the batch file."""
    first = Ledger(Journal(tmp_path))
    feed(first, 0, 1)
    first.plan(0, None)
    Journal._dump(tmp_path / "0-2.done", ["id0", "id1"])
    second = Ledger(Journal(tmp_path))
    assert second.batches == {}
    assert second.received(rec(1, token="r1")).accept == ["r1"]


def test_a_batch_without_ids_leaves_no_mark(tmp_path: Path) -> None:
    ledger = Ledger(Journal(tmp_path))
    ledger.received(rec(0, message_id=None))
    ledger.plan(0, None)
    assert ledger.commit(1).accept == ["t0"]
    assert names(tmp_path) == []


def test_a_batch_processed_before_the_crash_is_not_emitted_again(tmp_path: Path) -> None:
    """Spark wrote its commit log, but the messages were not accepted yet."""
    first = Ledger(Journal(tmp_path))
    feed(first, 0, 1)
    first.plan(0, None)
    second = Ledger(Journal(tmp_path))
    end, settle = second.plan(2, None)  # Spark starts after the batch
    assert (end, settle.accept) == (2, [])
    assert second.received(rec(0, token="r0")).accept == ["r0"]
    assert second.received(rec(1, token="r1")).accept == ["r1"]
    assert second.buffered == 0


def test_a_batch_spark_never_logged_is_offered_again_as_it_was(tmp_path: Path) -> None:
    """The journal was written but Spark died before logging the offsets."""
    first = Ledger(Journal(tmp_path))
    feed(first, 0, 1)
    first.plan(0, None)
    second = Ledger(Journal(tmp_path))
    assert second.received(rec(0, token="r0")).accept == []  # held: a second copy
    assert second.plan(0, None)[0] == 2
    assert [r.data for r in second.records(0, 2)[0]] == [b"m0", b"m1"]
    assert second.commit(2).accept == ["r0"]


def test_journaled_batches_out_of_line_with_spark_are_dropped(tmp_path: Path) -> None:
    """Their messages were never processed: their second copies are new messages."""
    first = Ledger(Journal(tmp_path))
    feed(first, 0, 1, 2)
    first.plan(3, None)  # a batch [3, 6) that Spark never saw
    second = Ledger(Journal(tmp_path))
    second.received(rec(1, token="r1"))
    assert second.buffered == 0
    end, _ = second.plan(2, None)
    assert end == 3, "the held copy is a new message now"
    assert [r.token for r in second.records(2, 3)[0]] == ["r1"]
    assert [p.name for p in tmp_path.iterdir()] == ["2-3.batch"]


def test_messages_without_an_id_are_never_taken_for_duplicates(tmp_path: Path) -> None:
    first = Ledger(Journal(tmp_path))
    first.received(rec(0, message_id=None))
    first.plan(0, None)
    second = Ledger(Journal(tmp_path))
    second.records(0, 1)
    second.received(rec(0, token="again", message_id=None))
    assert second.buffered == 1


def test_ids_of_committed_batches_are_forgotten() -> None:
    """The memory of ids stays bounded by what is in flight."""
    ledger = Ledger(None)
    feed(ledger, 0, 1)
    ledger.plan(0, None)
    ledger.commit(2)
    assert ledger.received(rec(0, token="resent")).accept == []
    assert ledger.buffered == 1


# -- accept=journal: the log ----------------------------------------------------


def test_the_log_accepts_what_it_wrote_and_batches_are_ranges_of_it(tmp_path: Path) -> None:
    log = Log(tmp_path)
    log.resolve(0)
    assert log.append([rec(0), rec(1), rec(2)]) == ["t0", "t1", "t2"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0-3.log"]
    assert log.append([rec(3), rec(4)]) == ["t3", "t4"]
    assert log.plan(0, 4) == 4
    assert [r.data for r in log.records(0, 4)] == [b"m0", b"m1", b"m2", b"m3"]
    log.commit(4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["3-5.log"], \
        "a file goes once every message in it is committed"
    assert log.held == 1
    assert log.plan(4, None) == 5


def test_after_a_restart_the_log_replays_what_spark_did_not_commit(tmp_path: Path) -> None:
    log = Log(tmp_path)
    log.resolve(0)
    log.append([rec(0), rec(1)])
    log.append([rec(2), rec(3)])
    assert log.plan(0, 3) == 3
    log.commit(1)
    # The process dies: Spark committed offset 1 and had planned [1, 3).
    again = Log(tmp_path)
    assert not again.resolved
    assert [r.data for r in again.records(1, 3)] == [b"m1", b"m2"]
    assert again.plan(3, None) == 4
    assert again.records(3, 4)[0].token is None, "read back from disk"
    # A second copy of a message in the journal (its acceptance was lost) is
    # accepted and not written again; a new one is.
    assert again.append([rec(2, token="t2b"), rec(9)]) == ["t2b", "t9"]
    assert again.end == 5 and again.duplicates_dropped == 1


def test_a_log_whose_files_were_all_committed_numbers_on_from_spark(tmp_path: Path) -> None:
    log = Log(tmp_path)
    log.resolve(0)
    log.append([rec(0), rec(1)])
    log.commit(2)
    assert list(tmp_path.iterdir()) == []
    again = Log(tmp_path)
    assert again.plan(2, None) == 2
    again.append([rec(5)])
    assert [r.data for r in again.records(2, 3)] == [b"m5"]
