"""The open-ended last chunk read about `chunk_size` keys at a time while the table grows past
its planned maximum: where each read ends, the plan rows those reads add to the ledger, and the
ledger read back with them. Every key stays in exactly one chunk."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from binlake.model.offsets import BinlogOffset
from binlake.snapshot.chunk_states import PENDING, current_chunks
from binlake.snapshot.chunks import ChunkRange, Key, chunk_end, encode_key
from binlake.snapshot.ledger import ChunkResult, ChunkState, replanned

from .test_chunks import KeyList, assert_partition

AT = BinlogOffset("b.000001", 4)


def _end(table: KeyList, start: Key) -> Key:
    """Where a read cuts the open-ended chunk from `start`: `KeySteps.key_after_chunk` (the key
    after the first `chunk_size` from `start`) answered from the in-memory table."""

    def key_after_chunk(start: Key) -> Key:
        keys = [k for k in table.keys if start is None or table.order(k) >= table.order(start)]
        return keys[table.chunk_size] if len(keys) > table.chunk_size else None

    return chunk_end(start, key_after_chunk, table.next_key_above, table.order)


def test_a_chunk_ends_at_the_key_after_its_first_chunk_size() -> None:
    table = KeyList([1, 2, 3, 5, 8, 13], 3)
    assert _end(table, 2) == 8  # [2, 8): 2, 3 and 5
    assert _end(table, 5) is None  # 5, 8, 13: no more than a chunk, so it stays open
    assert _end(table, 14) is None  # nothing from there at all


def test_from_no_start_the_chunk_is_open_below() -> None:
    """An empty table's one chunk, `(-inf, +inf)`, once rows arrive: no start to compare."""
    assert _end(KeyList([7, 3, 9, 1], 2), None) == 7


def test_a_key_repeated_past_a_chunk_is_one_chunk_never_an_empty_range() -> None:
    """The split column need not be unique (the first column of a composite key)."""
    table = KeyList([5] * 30 + [6, 7], 10)
    assert _end(table, 5) == 6
    assert _end(KeyList([5] * 30, 10), 5) is None


def test_keys_equal_in_the_collation_are_one_key() -> None:
    table = KeyList(["a", "B", "b", "c", "D"], 2, str.casefold)
    assert _end(table, "a") == "b"  # [a, b): a (B is b, which begins the next chunk)
    assert _end(table, "b") == "c"  # [b, c): B and b


def _read_tail(table: KeyList, start: Key) -> tuple[ChunkRange, list[Any]]:
    """One read of the open-ended chunk from `start`, as `chunk_reader.TailCut` makes it."""
    chunk = ChunkRange(start, _end(table, start))
    return chunk, [k for k in table.keys if chunk.contains(k, table.order)]


@pytest.mark.parametrize("seed", range(5))
def test_a_table_appended_to_between_reads_is_read_in_chunks_of_at_most_chunk_size(
    seed: int,
) -> None:
    """The appender adds keys past the maximum (and a few inside the plan) between any two
    reads, then stops: each read holds at most `chunk_size` keys, the reads end, and the plan
    with the ranges read partitions every key the table ends with."""
    rng = random.Random(seed)
    chunk_size, appends = 10, 12
    table = KeyList(list(range(0, 200, 2)), chunk_size)
    plan = table.plan()
    ranges, read = plan[:-1], plan[-1]
    while True:
        if appends:
            appends -= 1
            top = table.keys[-1]
            added = [top + rng.randint(1, 3) * i for i in range(1, rng.randint(1, 40))]
            table = KeyList([*table.keys, *added, rng.randrange(1, 200, 2)], chunk_size)
        chunk, rows = _read_tail(table, read.start)
        assert len(rows) <= chunk_size, chunk
        ranges.append(chunk)
        if chunk.end is None:
            break
        read = ChunkRange(chunk.end, None)
    assert_partition(ranges, table.keys)


def _result(chunk_id: int, start: Key, end: Key) -> ChunkResult:
    return ChunkResult("db.t", chunk_id, AT, AT, 1, ChunkRange(start, end))


def test_reads_cut_short_add_their_ranges_and_the_rest_as_the_open_ended_chunk() -> None:
    results = [
        ChunkResult("db.t", 3, AT, AT, 1),  # read as planned: no plan row
        _result(5, 55, 70),
        _result(4, 40, 55),
    ]
    assert replanned("id", results) == [
        ChunkState("db.t", 4, "id", ChunkRange(40, 55)),
        ChunkState("db.t", 5, "id", ChunkRange(55, 70)),
        ChunkState("db.t", 6, "id", ChunkRange(70, None), PENDING),
    ]


def test_reads_that_reached_the_end_leave_no_rest() -> None:
    results = [_result(4, 40, 55), _result(5, 55, None)]
    assert [s.range for s in replanned("id", results)] == [ChunkRange(40, 55), ChunkRange(55, None)]
    assert replanned("id", [ChunkResult("db.t", 4, AT, AT, 1)]) == []


T0 = datetime(2026, 12, 6, tzinfo=UTC)


def _plan_row(chunk_id: int, start: Key, end: Key, seconds: int) -> dict[str, object]:
    return {
        "table": "db.t", "chunk_id": chunk_id, "split_column": "id", "start": encode_key(start),
        "end": encode_key(end), "status": PENDING, "lw_file": None, "lw_pos": None,
        "hw_file": None, "hw_pos": None, "rows": None,
        "updated_at": T0 + timedelta(seconds=seconds),
    }  # fmt: skip


def test_a_chunks_newest_plan_row_is_its_range() -> None:
    """A resumed snapshot reads on from the last recorded cut, whatever order rows come in."""
    rows = [
        _plan_row(0, None, 40, seconds=0),
        _plan_row(1, 40, None, seconds=0),  # planned open-ended
        _plan_row(1, 40, 55, seconds=9),  # cut short by its read
        _plan_row(2, 55, None, seconds=9),  # the rest
    ]
    for order in (rows, rows[::-1]):
        assert [c.range for c in current_chunks(order)] == [
            ChunkRange(None, 40), ChunkRange(40, 55), ChunkRange(55, None)
        ]  # fmt: skip
