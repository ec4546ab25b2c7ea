"""A 20,000-chunk ledger, the paths a stream runs at every start and at every change, without
Spark: the chunk a key falls in is found in a logarithmic number of key comparisons, the
high-watermark filter over that many chunks keeps exactly what no chunk holds, and a start
walks the ledger once, not once per table. Counted, never timed: a count holds on any machine."""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from binlake.model.offsets import BinlogOffset, ChangePosition
from binlake.model.schema import Column, TableSchema
from binlake.snapshot.chunk_states import FINISHED, MARK, ChunkState, by_table, current_chunks
from binlake.snapshot.chunks import ChunkRange, chunk_of, encode_key, plan_even
from binlake.snapshot.ledger import snapshot_rows
from binlake.snapshot.watermarks import TableWatermarks
from binlake.stream.task import chunk_marks

CHUNKS = 20_000
STEP = 100
#: Keys a binary search over CHUNKS ranges may order: the key, one bound per halving, and the
#: final membership test's key and two bounds (19 of 20,000; a linear scan orders thousands).
MOST_COMPARISONS = 1 + math.ceil(math.log2(CHUNKS)) + 3

RANGES = plan_even(0, CHUNKS * STEP - 1, STEP, 1.0)


def _hw(n: int) -> BinlogOffset:
    """The `n`th of many offsets, over files whose suffix widens (string order is wrong)."""
    return BinlogOffset(f"mysql-bin.{999_990 + n // 5_000:06d}", 4 + (n % 5_000) * 100)


class _Counting:
    """A sort key that counts the keys it is asked to order."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, key: Any) -> Any:
        self.calls += 1
        return key.lower() if isinstance(key, str) else key


def test_the_plan_under_test_has_twenty_thousand_contiguous_chunks() -> None:
    assert len(RANGES) == CHUNKS
    assert RANGES[0].start is None and RANGES[-1].end is None
    assert all(a.end == b.start for a, b in itertools.pairwise(RANGES))


def test_a_key_is_placed_among_20000_chunks_in_a_logarithmic_number_of_comparisons() -> None:
    rng = random.Random(7)
    keys = [0, 1, STEP - 1, STEP, CHUNKS * STEP - 1, CHUNKS * STEP * 3, -5]
    keys += [rng.randrange(-STEP, CHUNKS * STEP + STEP) for _ in range(2_000)]
    for key in keys:
        order = _Counting()
        expected = min(max(key // STEP, 0), CHUNKS - 1)  # open below and above at the ends
        assert chunk_of(RANGES, key, order) == expected, key
        assert order.calls <= MOST_COMPARISONS, (key, order.calls)


def test_string_keys_are_placed_by_the_collations_order_not_pythons() -> None:
    """Case-insensitive bounds: `K00042x` sorts with `k00042…`, where Python's order would put
    every upper-case key before all the lower-case bounds."""
    bounds = [f"k{i:05d}" for i in range(1, CHUNKS)]
    ranges = [ChunkRange(a, b) for a, b in zip([None, *bounds], [*bounds, None], strict=True)]
    for i in (0, 1, 41, 9_999, CHUNKS - 2, CHUNKS - 1):
        order = _Counting()
        assert chunk_of(ranges, f"K{i:05d}X", order) == i
        assert order.calls <= MOST_COMPARISONS


def test_the_filter_over_20000_chunks_applies_exactly_what_no_chunk_holds() -> None:
    """Chunks finish out of key order (parallel readers): each chunk's HW is a random one of
    the offsets; a change is applied iff after its own chunk's HW, or after the largest."""
    rng = random.Random(11)
    hws = [_hw(rng.randrange(CHUNKS)) for _ in range(CHUNKS)]
    marks = TableWatermarks(tuple(RANGES), tuple(hws))
    largest = max(hws)
    for _ in range(5_000):
        key = rng.randrange(CHUNKS * STEP)
        own = hws[key // STEP]
        offset = rng.choice([own, _hw(rng.randrange(CHUNKS + 10)), largest])
        position = ChangePosition(offset, rng.randrange(3))
        expected = offset > own or offset > largest  # at a HW itself: the chunk holds it
        assert marks.should_apply(key, position) == expected, (key, offset, own)


def _finished_chunk(table: str, chunk_id: int, span: ChunkRange) -> ChunkState:
    return ChunkState(table, chunk_id, "id", span, FINISHED, _hw(0), _hw(chunk_id), rows=STEP)


class _Walks(list[ChunkState]):
    """A ledger's chunks that count the walks over them."""

    walks = 0

    def __iter__(self) -> Iterator[ChunkState]:
        self.walks += 1
        return super().__iter__()


def test_a_stream_start_walks_a_20000_chunk_ledger_once_however_many_tables() -> None:
    """200 tables of 100 chunks: the marks, the snapshot's rows and the finished check of a
    joining table group the ledger once (on an earlier commit: one walk per table, tables ×
    chunks comparisons at every start)."""
    tables = [
        TableSchema("db", f"t{n:03d}", (Column("id", "int", "int", False),), ("id",), "id")
        for n in range(200)
    ]
    per_table = plan_even(0, 100 * STEP - 1, STEP, 1.0)
    ledger = _Walks(
        _finished_chunk(t.qualified, i, span) for t in tables for i, span in enumerate(per_table)
    )
    assert len(ledger) == CHUNKS
    marks = chunk_marks(tables, ledger, dict.fromkeys(t.qualified for t in tables))
    assert ledger.walks == 1
    assert set(marks) == {t.qualified for t in tables}
    assert all(len(m.ranges) == 100 and m.max_hw == _hw(99) for m in marks.values())
    ledger.walks = 0
    assert snapshot_rows(ledger) == {t.qualified: 100 * STEP for t in tables}
    assert ledger.walks == 1
    assert [len(own) for own in by_table(ledger).values()] == [100] * 200


def test_the_ledger_rows_of_20000_chunks_read_back_with_their_newest_plan_and_mark() -> None:
    """Plan rows, one mark row each, and for the open-ended chunk a newer plan row (its read cut
    short) and a re-mark: every chunk comes back once, with its newest of each."""
    base = datetime(2026, 1, 1, tzinfo=UTC)

    def row(chunk_id: int, span: ChunkRange | None, second: int, **marked: Any) -> dict[str, Any]:
        plan = (
            {"split_column": MARK, "start": None, "end": None}
            if span is None
            else {
                "split_column": "id",
                "start": encode_key(span.start),
                "end": encode_key(span.end),
            }
        )
        return {
            "table": "db.t", "chunk_id": chunk_id, "updated_at": base.replace(second=second),
            "status": "pending", "lw_file": None, "lw_pos": None, "hw_file": None,
            "hw_pos": None, "hw_gtid": None, "rows": None,
            **plan,
            **marked,
        }  # fmt: skip

    def mark(chunk_id: int, second: int, rows: int) -> dict[str, Any]:
        hw = _hw(chunk_id)
        return row(chunk_id, None, second, status=FINISHED, lw_file=hw.file, lw_pos=4,
                   hw_file=hw.file, hw_pos=hw.pos, rows=rows)  # fmt: skip

    last = CHUNKS - 1
    rows = [row(i, span, 0) for i, span in enumerate(RANGES)]
    rows += [mark(i, 2, STEP) for i in range(CHUNKS)]
    rows += [row(last, ChunkRange(RANGES[last].start, 10**9), 1), mark(last, 3, 7)]
    random.Random(3).shuffle(rows)  # a Delta table's files come back in no particular order
    states = current_chunks(rows)
    assert [s.chunk_id for s in states] == list(range(CHUNKS))
    assert all(s.finished and s.hw == _hw(s.chunk_id) for s in states)
    assert states[last].range == ChunkRange(RANGES[last].start, 10**9)
    assert states[last].rows == 7
    assert sum(s.rows or 0 for s in states) == (CHUNKS - 1) * STEP + 7
