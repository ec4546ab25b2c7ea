"""Which of a chunk's selected rows keep their values after its binlog window (`untouched_rows`):
exactly those whose normalised key the window did not touch, whatever the key's type and arity
(the integration tests replay real windows; these pick the keys that could fool the Arrow
pre-filter)."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

from binlake.model.schema import Column, TableSchema
from binlake.model.typemap import map_table
from binlake.snapshot.chunk_reader import _columns, untouched_rows


def _kept(table: TableSchema, raw: list[tuple[Any, ...]], touched: set[tuple[Any, ...]]) -> list:
    mappings = map_table(table)
    selected = _columns(mappings, raw)
    kept = untouched_rows(mappings, table, raw, selected, dict.fromkeys(touched)).to_pylist()
    # The oracle: the comparison the reader made row by row, in Python, before the pre-filter.
    normalizers = [(i, mappings[i].normalize) for i in table.key_indexes]
    expected = [tuple(n(r[i]) for i, n in normalizers) not in touched for r in raw]
    assert kept == expected
    return kept


def _table(*columns: Column, key: tuple[str, ...]) -> TableSchema:
    return TableSchema("db", "t", columns, key, key[0])


def test_an_integer_key_drops_the_touched_rows_in_place() -> None:
    table = _table(
        Column("id", "bigint", "bigint(20)", False), Column("v", "varchar", "varchar(9)", True),
        key=("id",),
    )  # fmt: skip
    raw = [(k, f"v{k}") for k in range(10)]
    # 42 is outside the chunk (the window touched another chunk's row): nothing to drop for it.
    assert _kept(table, raw, {(3,), (7,), (42,)}) == [k not in (3, 7) for k in range(10)]


def test_a_composite_key_keeps_rows_that_share_only_its_first_column() -> None:
    table = _table(
        Column("order_id", "int", "int(11)", False),
        Column("line", "int", "int(11)", False),
        key=("order_id", "line"),
    )
    raw = [(o, n) for o in (1, 2) for n in (1, 2, 3)]
    assert _kept(table, raw, {(1, 2), (2, 9)}) == [True, False, True, True, True, True]


def test_keys_whose_driver_values_are_not_their_normalised_values() -> None:
    """A TIME key lands as text, an unsigned BIGINT as a decimal: the driver's timedelta and int
    are compared as what they normalise to, the window's keys are normalised already."""
    time_key = _table(Column("at", "time", "time", False), key=("at",))
    raw = [(timedelta(hours=h, minutes=30),) for h in range(5)]
    touched = {(time_key_text,) for time_key_text in ("02:30:00", "04:30:00")}
    assert _kept(time_key, raw, touched) == [True, True, False, True, False]

    unsigned = _table(Column("id", "bigint", "bigint(20) unsigned", False), key=("id",))
    raw = [(2**64 - 1,), (5,)]
    assert _kept(unsigned, raw, {(Decimal(2**64 - 1),)}) == [False, True]


def test_a_floating_point_key_compares_negative_zero_as_python_does() -> None:
    table = _table(Column("x", "double", "double", False), key=("x",))
    raw = [(-0.0,), (1.5,), (2.5,)]
    assert _kept(table, raw, {(0.0,), (2.5,)}) == [False, True, False]


def test_nothing_touched_and_nothing_selected() -> None:
    table = _table(Column("id", "int", "int(11)", False), key=("id",))
    assert _kept(table, [(1,), (2,)], set()) == [True, True]
    assert _kept(table, [], {(1,)}) == []
