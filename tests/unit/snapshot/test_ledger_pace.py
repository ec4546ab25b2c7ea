"""A snapshot's rate as `binlake status` reads it from the ledger's marks: the cases that break a
naive rate are the first batch's rows (read before the first mark the window sees), a single
mark, marks older than the window, and timestamps with and without a zone."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from binlake.snapshot.chunk_states import FINISHED, ChunkState
from binlake.snapshot.chunks import ChunkRange
from binlake.snapshot.ledger_pace import WINDOW, snapshot_pace

T0 = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


def _chunk(i: int, rows: int = 0, at: datetime | None = None) -> ChunkState:
    status = FINISHED if at is not None else "pending"
    return ChunkState("db.t", i, "id", ChunkRange(i, i + 1), status, rows=rows, marked_at=at)


def test_a_finished_snapshot_has_no_pace() -> None:
    assert snapshot_pace([_chunk(0, 10, T0), _chunk(1, 10, T0)], 100) is None
    assert snapshot_pace([], 100) is None


def test_nothing_marked_yet() -> None:
    pace = snapshot_pace([_chunk(0), _chunk(1)], 500)
    assert pace is not None
    assert (pace.rows_per_second, pace.last_mark, pace.cap) == (None, None, 500)


def test_one_mark_gives_no_rate() -> None:
    pace = snapshot_pace([_chunk(0, 1000, T0), _chunk(1)], 0)
    assert pace is not None and pace.rows_per_second is None and pace.last_mark == T0


def test_the_first_marks_rows_are_not_counted() -> None:
    """Batches of 6,000 rows marked a second apart read at 6,000 rows/s, not 12,000."""
    chunks = [_chunk(0, 6000, T0), _chunk(1, 6000, T0 + timedelta(seconds=1)), _chunk(2)]
    pace = snapshot_pace(chunks, 6000)
    assert pace is not None and pace.rows_per_second == pytest.approx(6000)


def test_chunks_of_one_mark_add_up() -> None:
    later = T0 + timedelta(seconds=10)
    chunks = [_chunk(0, 5, T0), _chunk(1, 300, later), _chunk(2, 700, later), _chunk(3)]
    pace = snapshot_pace(chunks, 0)
    assert pace is not None and pace.rows_per_second == pytest.approx(100)


def test_marks_older_than_the_window_are_left_out() -> None:
    """An hour-old batch does not stretch the span of today's rate."""
    last = T0 + WINDOW + timedelta(hours=1)
    chunks = [
        _chunk(0, 10**6, T0),
        _chunk(1, 100, last - timedelta(seconds=20)),
        _chunk(2, 400, last),
        _chunk(3),
    ]
    pace = snapshot_pace(chunks, 0)
    assert pace is not None and pace.rows_per_second == pytest.approx(20)
    assert pace.last_mark == last


def test_a_time_without_a_zone_is_utc() -> None:
    naive = T0.replace(tzinfo=None)
    chunks = [_chunk(0, 1, naive), _chunk(1, 50, T0 + timedelta(seconds=5)), _chunk(2)]
    pace = snapshot_pace(chunks, 0)
    assert pace is not None and pace.rows_per_second == pytest.approx(10)
    assert pace.last_mark == T0 + timedelta(seconds=5)
