"""`commit_times`: each change stamped with its transaction's commit time, never earlier than
the transaction's before it in the binlog."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from binlake.model.offsets import BinlogOffset
from binlake.mysql import commit_times
from binlake.mysql.commit_times import CommitClock


def _stamped(clock: CommitClock, events: list[tuple[str, float | None]]) -> list[tuple[str, int]]:
    return [(kind, clock.observe(written)) for kind, written in events]


def test_a_lock_waiter_committed_after_the_holder_is_stamped_with_the_holder_commit() -> None:
    """The binlog as MariaDB 10.11 wrote it: the holder updated the row at 773 and committed at
    775 (its GTID and XID events carry the COMMIT's start); the autocommit UPDATE that waited
    for its lock started at 771 and carries 771 on every event, after the holder's."""
    binlog = [
        ("holder gtid", 775), ("holder table map", 773), ("holder rows", 773), ("holder xid", 775),
        ("waiter gtid", 771), ("waiter table map", 771), ("waiter rows", 771), ("waiter xid", 771),
    ]  # fmt: skip
    stamped = dict(_stamped(CommitClock(), binlog))
    assert stamped["holder rows"] == 775  # its COMMIT's time, not its UPDATE's
    assert stamped["waiter rows"] == 775  # committed after the holder: not before it
    times = [t for _, t in _stamped(CommitClock(), binlog)]
    assert times == sorted(times)


@pytest.mark.parametrize(
    ("since", "events", "expected"),
    [
        (0, [("gtid", 100), ("rows", 90), ("xid", 100)], [100, 100, 100]),
        # A read starting where an earlier commit time was reached stamps nothing earlier.
        (120, [("gtid", 100), ("rows", 100)], [120, 120]),
        # Made-up events (a rotation, a heartbeat) carry no time: they move nothing.
        (0, [("gtid", 100), ("rotate", 0), ("heartbeat", None), ("rows", 99)], [100] * 4),
        # A read opened inside a transaction (a resumed one) meets rows before any GTID event.
        (0, [("rows", 50), ("xid", 60), ("gtid", 70), ("rows", 65)], [50, 60, 70, 70]),
    ],
)
def test_the_clock_never_goes_back(
    since: int, events: list[tuple[str, float | None]], expected: list[int]
) -> None:
    assert [t for _, t in _stamped(CommitClock(since), events)] == expected


def _binlog(*starts: tuple[int, int]) -> list[tuple[BinlogOffset, float, int]]:
    """Transactions beginning at `pos` with a GTID event written at `written`."""
    return [(BinlogOffset("mysql-bin.000001", pos), float(written), 0) for pos, written in starts]


def _at(*positions: int) -> list[BinlogOffset]:
    return [BinlogOffset("mysql-bin.000001", pos) for pos in positions]


@pytest.mark.parametrize(
    ("since", "at", "expected"),
    [
        # At each boundary: the commit times of the transactions that began before it.
        (0, (200, 300, 400), [10, 30, 40]),
        # A boundary at the first transaction: nothing read yet, the start's commit time.
        (5, (100, 300), [5, 30]),
        (50, (200, 400), [50, 50]),
        (0, (300, 340), [30, 30]),  # the one at 300 wrote 20: the clock stays at 30
        # Boundaries past the binlog's end: every transaction read.
        (0, (350, 900), [40, 40]),
    ],
)
def test_commit_times_at_boundaries(
    monkeypatch: pytest.MonkeyPatch, since: int, at: tuple[int, ...], expected: list[int]
) -> None:
    binlog = _binlog((100, 10), (200, 30), (300, 20), (340, 40))
    monkeypatch.setattr(commit_times, "transactions", lambda *_: (t for t in binlog))
    start = BinlogOffset("mysql-bin.000001", 100)
    assert commit_times._commit_times_at(None, 1, start, since, _at(*at)) == expected  # type: ignore[arg-type]


def test_the_scan_stops_at_the_last_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[int] = []

    def transactions(*_: object) -> Iterator[tuple[BinlogOffset, float, int]]:
        for pos in range(100, 10_000, 100):
            read.append(pos)
            yield BinlogOffset("mysql-bin.000001", pos), float(pos), 0

    monkeypatch.setattr(commit_times, "transactions", transactions)
    start = BinlogOffset("mysql-bin.000001", 100)
    assert commit_times._commit_times_at(None, 1, start, 0, _at(500)) == [400]  # type: ignore[arg-type]
    assert max(read) == 500
