"""The ledger entries of a committed batch come from its task reports, exactly one per chunk."""

from __future__ import annotations

import pytest

from binlake.model.offsets import BinlogOffset
from binlake.model.schema import Column, TableSchema
from binlake.snapshot.batch_reads import chunk_results
from binlake.snapshot.chunks import ChunkRange, encode_key
from binlake.snapshot.ledger import ChunkState, snapshot_rows

TABLE = TableSchema("db", "t", (Column("id", "int", "int(11)", False),), ("id",), "id")
BATCH = [ChunkState("db.t", i, "id", ChunkRange(i * 10, i * 10 + 10)) for i in (3, 4)]
#: The batch of a table's open-ended chunk, 4 (the table's largest id).
TAIL_BATCH = [BATCH[0], ChunkState("db.t", 4, "id", ChunkRange(40, None))]


def _report(chunk_id: int, start: int | None = None, end: int | None = None) -> tuple:
    return (chunk_id, "b.000001", 5, "b.000001", 9, 1, "", encode_key(start), encode_key(end))


def test_reports_become_ledger_results() -> None:
    reports = [
        (4, "b.000002", 10, "b.000002", 90, 7, "0-1-12", "40", "50"),
        (3, "b.000001", 5, "b.000002", 4, 0, "", "30", "40"),  # the HW's GTID position not known
    ]
    results = {r.chunk_id: r for r in chunk_results(TABLE, BATCH, reports)}
    assert results[3].lw == BinlogOffset("b.000001", 5)
    assert results[3].hw == BinlogOffset("b.000002", 4)
    assert (results[3].hw.gtid, results[4].hw.gtid) == ("", "0-1-12")
    assert (results[3].rows, results[4].rows) == (0, 7)  # an empty chunk still has its HW
    assert results[3].range is None and results[4].range is None  # read as planned


@pytest.mark.parametrize(
    "reports",
    [
        [_report(3)],  # a chunk without a report
        [_report(3)] * 2 + [_report(4)],
        [_report(3), _report(5)],
        [_report(3), _report(4), _report(5)],  # read on past a chunk that is not open-ended
    ],
)
def test_missing_duplicate_or_foreign_reports_are_refused(reports: list) -> None:
    with pytest.raises(RuntimeError, match="will be read again"):
        chunk_results(TABLE, BATCH, reports)


def test_the_open_ended_chunk_cut_short_and_the_chunks_read_on_to_carry_their_ranges() -> None:
    reports = [_report(3, 30, 40), _report(6, 70, 90), _report(4, 40, 55), _report(5, 55, 70)]
    results = {r.chunk_id: r for r in chunk_results(TABLE, TAIL_BATCH, reports)}
    assert results[3].range is None
    assert [results[i].range for i in (4, 5, 6)] == [
        ChunkRange(40, 55), ChunkRange(55, 70), ChunkRange(70, 90)
    ]  # fmt: skip


def test_the_open_ended_chunk_read_whole_keeps_its_plan() -> None:
    [result] = chunk_results(TABLE, TAIL_BATCH[1:], [_report(4, 40, None)])
    assert result.range is None


@pytest.mark.parametrize("ids", [[3, 4, 6], [3, 4, 5, 5], [3, 5]])
def test_reads_on_from_the_open_ended_chunk_must_take_the_ids_after_it(ids: list[int]) -> None:
    with pytest.raises(RuntimeError, match="will be read again"):
        chunk_results(TABLE, TAIL_BATCH, [_report(i, i * 10, i * 10 + 10) for i in ids])


def test_snapshot_rows_counts_each_table_and_only_when_every_chunk_counted() -> None:
    def chunk(table: str, chunk_id: int, rows: int | None) -> ChunkState:
        return ChunkState(table, chunk_id, "id", ChunkRange.all(), "finished", rows=rows)

    chunks = [chunk("d.a", 0, 3), chunk("d.b", 0, 50), chunk("d.a", 1, 0)]
    assert snapshot_rows(chunks) == {"d.a": 3, "d.b": 50}
    assert snapshot_rows([*chunks, chunk("d.a", 2, None)]) == {"d.a": None, "d.b": 50}
    assert snapshot_rows([]).get("d.missing") is None
