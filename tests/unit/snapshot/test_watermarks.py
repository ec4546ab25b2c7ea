"""The high-watermark filter: a change is applied iff it is strictly after max(HW) of its table,
or strictly after the HW of the chunk that holds its key."""

from __future__ import annotations

import pytest

from binlake.errors import SnapshotIncompleteError
from binlake.model.changes import Op, Row, RowChange, split_key_change
from binlake.model.offsets import BinlogOffset, ChangePosition
from binlake.model.schema import Column, TableSchema
from binlake.snapshot.chunk_states import FINISHED, PENDING, ChunkState
from binlake.snapshot.chunks import ChunkRange
from binlake.snapshot.watermarks import TableWatermarks, WatermarkFilter
from binlake.stream.task import chunk_marks

# Three chunks read in parallel finished out of binlog order; the files cross a rotation whose
# suffix widens (.999999 → .1000000), so string order would get max/min wrong.
HW_0 = BinlogOffset("mysql-bin.1000000", 500)  # chunk 0 finished last
HW_1 = BinlogOffset("mysql-bin.999999", 9_000)  # chunk 1 finished first
HW_2 = BinlogOffset("mysql-bin.1000000", 100)
RANGES = (ChunkRange(None, 100), ChunkRange(100, 200), ChunkRange(200, None))
ORDERS = TableWatermarks(RANGES, (HW_0, HW_1, HW_2))


def at(file: str, pos: int, row: int = 0) -> ChangePosition:
    return ChangePosition(BinlogOffset(file, pos), row)


def test_table_watermarks_max_and_min_follow_binlog_order() -> None:
    assert ORDERS.max_hw == HW_0
    assert ORDERS.min_hw == HW_1


def test_table_watermarks_need_one_hw_per_chunk() -> None:
    with pytest.raises(ValueError, match="exactly one high watermark"):
        TableWatermarks(RANGES, (HW_0, HW_1))


def test_table_watermarks_need_at_least_one_chunk() -> None:
    with pytest.raises(ValueError, match="exactly one high watermark"):
        TableWatermarks((), ())


def test_change_between_hws_applies_only_where_the_chunk_hw_is_behind() -> None:
    # .1000000:200 is after HW_1 and HW_2 but not after HW_0.
    position = at("mysql-bin.1000000", 200)
    assert not ORDERS.should_apply(5, position)  # chunk 0: HW_0 = .1000000:500
    assert ORDERS.should_apply(150, position)  # chunk 1: HW_1 = .999999:9000
    assert ORDERS.should_apply(250, position)  # chunk 2: HW_2 = .1000000:100


def test_change_before_every_hw_is_never_applied() -> None:
    position = at("mysql-bin.999999", 8_999)
    for key in (-1, 0, 99, 100, 199, 200, 10**9):
        assert not ORDERS.should_apply(key, position)


def test_change_exactly_at_a_chunk_hw_is_not_applied() -> None:
    # The chunk already holds everything up to and including its HW: "after" is strict.
    assert not ORDERS.should_apply(150, ChangePosition(HW_1, 0))
    assert not ORDERS.should_apply(150, ChangePosition(HW_1, 3))
    assert ORDERS.should_apply(150, at("mysql-bin.999999", 9_001))


def test_change_exactly_at_max_hw_is_not_applied() -> None:
    assert not ORDERS.should_apply(5, ChangePosition(HW_0, 0))
    assert ORDERS.should_apply(5, at("mysql-bin.1000000", 501))


def test_change_after_max_hw_is_applied_for_any_key() -> None:
    position = at("mysql-bin.1000000", 501)
    for key in (-(10**12), 0, 99, 100, 150, 199, 200, 10**12):
        assert ORDERS.should_apply(key, position)


def test_change_in_a_later_binlog_file_is_applied() -> None:
    assert ORDERS.should_apply(5, at("mysql-bin.1000001", 4))


def test_chunk_boundaries_pick_the_right_hw() -> None:
    position = at("mysql-bin.1000000", 200)
    assert not ORDERS.should_apply(99, position)  # last key of chunk 0
    assert ORDERS.should_apply(100, position)  # first key of chunk 1
    assert ORDERS.should_apply(199, position)  # last key of chunk 1
    assert ORDERS.should_apply(200, position)  # first key of chunk 2


def test_key_changing_update_across_chunks_is_judged_per_side() -> None:
    # id 150 (chunk 1, HW .999999:9000) becomes id 5 (chunk 0, HW .1000000:500) at .1000000:200:
    # chunk 1 read the old row before the update → its delete must be applied; chunk 0 read
    # the new row after the update → its insert must not be applied again.
    def key_of(row: Row) -> tuple[int]:
        return (row[0],)

    change = RowChange("shop.orders", Op.UPDATE, at("mysql-bin.1000000", 200), (150, "x"), (5, "x"))
    parts = split_key_change(change, key_of)
    verdicts = {
        part.op: ORDERS.should_apply(key_of(part.image)[0], part.position) for part in parts
    }
    assert verdicts == {Op.DELETE: True, Op.INSERT: False}


def test_collated_keys_are_placed_by_the_collation() -> None:
    ranges = (ChunkRange(None, "m"), ChunkRange("m", None))
    early = BinlogOffset("mysql-bin.000001", 100)
    late = BinlogOffset("mysql-bin.000001", 900)
    marks = TableWatermarks(ranges, (early, late), sort_key=str.casefold)
    position = at("mysql-bin.000001", 500)
    assert marks.should_apply("Apple", position)  # 'apple' < 'm': chunk 0, HW 100
    assert not marks.should_apply("Zed", position)  # chunk 1, HW 900
    # In code-point order 'Zed' < 'm' would put it in chunk 0 and apply it twice.


def test_filter_applies_every_change_of_a_table_without_snapshot() -> None:
    marks = WatermarkFilter({"shop.orders": ORDERS})
    assert marks.should_apply("shop.audit", 5, at("mysql-bin.000001", 4))
    assert marks.should_apply("shop.audit", None, at("mysql-bin.000001", 4))


def test_filter_routes_each_table_to_its_own_watermarks() -> None:
    other = TableWatermarks((ChunkRange.all(),), (BinlogOffset("mysql-bin.000001", 50),))
    marks = WatermarkFilter({"shop.orders": ORDERS, "shop.items": other})
    position = at("mysql-bin.000001", 60)
    assert marks.should_apply("shop.items", 5, position)
    assert not marks.should_apply("shop.orders", 5, position)


def test_stream_starts_at_the_smallest_hw_of_all_tables() -> None:
    other = TableWatermarks(
        (ChunkRange(None, 10), ChunkRange(10, None)),
        (BinlogOffset("mysql-bin.1000000", 50), BinlogOffset("mysql-bin.1000000", 700)),
    )
    marks = WatermarkFilter({"shop.orders": ORDERS, "shop.items": other})
    # As strings "mysql-bin.1000000:50" would sort first; in the binlog .999999:9000 does.
    assert marks.start_offset() == HW_1


def test_start_offset_of_one_table_is_its_min_hw() -> None:
    assert WatermarkFilter({"shop.orders": ORDERS}).start_offset() == HW_1


def test_start_offset_without_snapshot_tables_is_none() -> None:
    assert WatermarkFilter({}).start_offset() is None


def _chunks(table: str, *hws: BinlogOffset | None) -> list[ChunkState]:
    return [
        ChunkState(
            table, i, "id", RANGES[i], FINISHED if hw else PENDING, hw, hw, 1 if hw else None
        )
        for i, hw in enumerate(hws)
    ]


def test_the_stream_filters_by_the_chunks_silver_was_built_from() -> None:
    """From the stream's start (None) or joined after its chunks: silver holds their rows.
    Joined at its CREATE, before a later snapshot read it (or while one reads it): silver holds
    every row from the binlog, so those chunks filter nothing and need not be finished."""
    table = TableSchema("db", "t", (Column("id", "int", "int", False),), ("id",), "id")
    chunks = _chunks("db.t", HW_0, HW_1, HW_2)
    assert chunk_marks([table], chunks, {"db.t": None})["db.t"].max_hw == HW_0
    assert chunk_marks([table], chunks, {"db.t": HW_0})["db.t"].max_hw == HW_0
    assert chunk_marks([table], chunks, {"db.t": BinlogOffset("mysql-bin.999999", 4)}) == {}
    assert chunk_marks([table], _chunks("db.t", HW_1, None), {"db.t": HW_1}) == {}
    assert chunk_marks([table], [], {"db.t": HW_1}) == {}
    with pytest.raises(SnapshotIncompleteError, match="1/2 chunks"):
        chunk_marks([table], _chunks("db.t", HW_1, None), {"db.t": None})
