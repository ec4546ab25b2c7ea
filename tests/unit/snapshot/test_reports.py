"""The ledger entries of a committed batch come from its task reports, exactly one per chunk."""

from __future__ import annotations

import pytest

from binlake.model.offsets import BinlogOffset
from binlake.model.schema import Column, TableSchema
from binlake.snapshot.chunks import ChunkRange
from binlake.snapshot.ledger import ChunkState, snapshot_rows
from binlake.snapshot.task import chunk_results

TABLE = TableSchema("db", "t", (Column("id", "int", "int(11)", False),), ("id",), "id")
BATCH = [ChunkState("db.t", i, "id", ChunkRange(i * 10, i * 10 + 10)) for i in (3, 4)]


def test_reports_become_ledger_results() -> None:
    reports = [
        (4, "b.000002", 10, "b.000002", 90, 7, "0-1-12"),
        (3, "b.000001", 5, "b.000002", 4, 0, ""),  # the HW's GTID position not known
    ]
    results = {r.chunk_id: r for r in chunk_results(TABLE, BATCH, reports)}
    assert results[3].lw == BinlogOffset("b.000001", 5)
    assert results[3].hw == BinlogOffset("b.000002", 4)
    assert (results[3].hw.gtid, results[4].hw.gtid) == ("", "0-1-12")
    assert (results[3].rows, results[4].rows) == (0, 7)  # an empty chunk still has its HW


@pytest.mark.parametrize(
    "reports",
    [
        [(3, "b.000001", 5, "b.000001", 9, 1, "")],  # a chunk without a report
        [(3, "b.000001", 5, "b.000001", 9, 1, "")] * 2 + [(4, "b.000001", 5, "b.000001", 9, 1, "")],
        [(3, "b.000001", 5, "b.000001", 9, 1, ""), (5, "b.000001", 5, "b.000001", 9, 1, "")],
    ],
)
def test_missing_duplicate_or_foreign_reports_are_refused(reports: list) -> None:
    with pytest.raises(RuntimeError, match="will be read again"):
        chunk_results(TABLE, BATCH, reports)


def test_snapshot_rows_counts_one_table_and_only_when_every_chunk_counted() -> None:
    def chunk(table: str, chunk_id: int, rows: int | None) -> ChunkState:
        return ChunkState(table, chunk_id, "id", ChunkRange.all(), "finished", rows=rows)

    chunks = [chunk("d.a", 0, 3), chunk("d.a", 1, 0), chunk("d.b", 0, 50)]
    assert snapshot_rows(chunks, "d.a") == 3
    assert snapshot_rows(chunks, "d.b") == 50
    assert snapshot_rows([*chunks, chunk("d.a", 2, None)], "d.a") is None
    assert snapshot_rows(chunks, "d.missing") is None
