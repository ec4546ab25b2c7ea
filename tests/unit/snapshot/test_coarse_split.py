"""A split column with too few values for `chunk_size` (a composite key led by a region or a
tenant) gives one chunk per value however many rows it holds: the planner says so and what to
do; chunks of about `chunk_size` rows, or a little over, say nothing."""

from __future__ import annotations

from binlake.model.schema import Column, TableSchema
from binlake.snapshot.planner import coarse_split


def _table(key: tuple[str, ...]) -> TableSchema:
    columns = tuple(Column(name, "int", "int", False) for name in ("region", "id", "line"))
    return TableSchema("shop", "orders", columns, key, key[0])


def test_a_region_led_key_names_the_next_key_column_and_its_index() -> None:
    said = coarse_split(_table(("region", "id", "line")), 200_000, 4, 8096)
    assert said is not None
    assert "shop.orders: split by region" in said and "50,000 rows each (6.2×" in said
    assert "`snapshot.split_keys: {orders: id}`" in said and "index of its own" in said


def test_chunks_of_about_chunk_size_say_nothing() -> None:
    table = _table(("region", "id"))
    assert coarse_split(table, 200_000, 25, 8096) is None  # 8,000 rows a chunk
    assert coarse_split(table, 200_000, 13, 8096) is None  # 15,385: under twice the size
    assert coarse_split(table, 0, 1, 8096) is None


def test_a_single_column_key_asks_for_another_split_column() -> None:
    said = coarse_split(_table(("region",)), 1_000_000, 2, 1000)
    assert said is not None and "name a split column with more values" in said
