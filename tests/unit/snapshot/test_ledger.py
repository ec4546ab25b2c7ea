"""The ledger's rows read back as chunks: plan rows, with the newest mark of each applied."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from binlake.model.offsets import BinlogOffset
from binlake.snapshot.chunk_states import FINISHED, MARK, PENDING, current_chunks
from binlake.snapshot.chunks import encode_key

T0 = datetime(2026, 11, 28, tzinfo=UTC)


def _plan(table: str, chunk: int, start: int | None, end: int | None, **extra: Any) -> dict:
    row = {
        "table": table, "chunk_id": chunk, "split_column": "id", "start": encode_key(start),
        "end": encode_key(end), "status": PENDING, "lw_file": None, "lw_pos": None,
        "hw_file": None, "hw_pos": None, "rows": None, "updated_at": T0,
    }  # fmt: skip
    return {**row, **extra}


def _mark(table: str, chunk: int, hw_pos: int, rows: int, seconds: int) -> dict:
    return {
        "table": table, "chunk_id": chunk, "split_column": MARK, "start": None, "end": None,
        "status": FINISHED, "lw_file": "b.000001", "lw_pos": hw_pos - 10, "hw_file": "b.000001",
        "hw_pos": hw_pos, "rows": rows, "updated_at": T0 + timedelta(seconds=seconds),
    }  # fmt: skip


def test_a_plan_row_takes_its_newest_mark_and_keeps_its_range() -> None:
    rows = [
        _mark("db.t", 0, 900, 7, seconds=20),  # the second read of chunk 0 (a crash between)
        _plan("db.t", 1, 100, None),
        _plan("db.t", 0, None, 100),
        _mark("db.t", 0, 500, 5, seconds=10),  # the first read, written before it
        _mark("db.gone", 0, 50, 1, seconds=5),  # a forgotten table's mark: no chunk
    ]
    first, second = current_chunks(rows)
    assert (first.chunk_id, first.status, first.rows) == (0, FINISHED, 7)
    assert first.hw == BinlogOffset("b.000001", 900) and first.lw == BinlogOffset("b.000001", 890)
    assert (first.range.start, first.range.end, first.split_column) == (None, 100, "id")
    assert (second.chunk_id, second.finished, second.range.start) == (1, False, 100)
    assert current_chunks(reversed(rows)) == [first, second]


def test_a_plan_row_finished_in_place_reads_as_finished() -> None:
    """Ledgers written before marks: the MERGE set the plan row's own status and watermarks."""
    row = _plan("db.t", 0, None, None, status=FINISHED, hw_file="b.000002", hw_pos=4,
                lw_file="b.000002", lw_pos=4, rows=3)  # fmt: skip
    [chunk] = current_chunks([row])
    assert chunk.finished and chunk.hw == BinlogOffset("b.000002", 4) and chunk.rows == 3


def test_a_marks_gtid_position_travels_with_its_hw_and_older_marks_have_none() -> None:
    """Marks written before `hw_gtid` was recorded lack the column (the ledger gains it on its
    next append): their HW has no GTID position, so a failover cannot be checked against it."""
    rows = [
        _plan("db.t", 0, None, 100),
        _plan("db.t", 1, 100, None),
        {**_mark("db.t", 0, 500, 5, seconds=10), "hw_gtid": "0-1-42"},
        _mark("db.t", 1, 600, 5, seconds=10),  # no hw_gtid key at all
    ]
    first, second = current_chunks(rows)
    assert first.hw is not None and first.hw.gtid == "0-1-42"
    assert second.hw is not None and second.hw.gtid == ""
