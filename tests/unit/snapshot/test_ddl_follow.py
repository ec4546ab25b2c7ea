"""Which DDL met during a snapshot bronze follows, and which send the table back to the start."""

from __future__ import annotations

import pytest

from binlake.model.offsets import BinlogOffset
from binlake.model.schema import Column, TableSchema
from binlake.mysql.schema_history import SchemaChange
from binlake.snapshot.ddl_follow import refusal


def _table(*columns: Column, key: tuple[str, ...] = ("id",), split: str = "id") -> TableSchema:
    return TableSchema("db", "t", (Column("id", "int", "int", False), *columns), key, split)


BEFORE = _table(Column("qty", "int", "int", True), Column("name", "varchar", "varchar(20)", True))


def _change(after: TableSchema | None, kind: str = "alter", statement: str = "ALTER") -> str:
    return refusal(
        SchemaChange("db.t", BinlogOffset("b.000001", 9), statement, BEFORE, after, kind)
    )


@pytest.mark.parametrize(
    "after",
    [
        _table(*BEFORE.columns[1:], Column("region", "varchar", "varchar(8)", False, "'eu'")),
        _table(Column("qty", "bigint", "bigint", True), BEFORE.columns[2]),
        _table(Column("qty", "int", "int", True), Column("name", "varchar", "varchar(40)", True)),
        _table(BEFORE.columns[1]),
    ],
    ids=["add-column", "widen-int", "longer-varchar", "drop-column"],
)
def test_changes_of_columns_bronze_can_apply_are_followed(after: TableSchema) -> None:
    assert _change(after) == ""
    assert _change(after, kind="swap", statement="RENAME TABLE t TO _t_old, _t_new TO t") == ""


def test_a_new_key_a_new_split_column_and_another_kind_of_value_are_refused() -> None:
    assert "row key" in _change(_table(*BEFORE.columns[1:], key=("id", "qty")))
    assert "split column" in _change(_table(*BEFORE.columns[1:], split="qty"))
    retyped = _table(Column("qty", "varchar", "varchar(9)", True), BEFORE.columns[2])
    assert "another kind of value" in _change(retyped)


@pytest.mark.parametrize("kind", ["truncate", "unfollowable", "create"])
def test_rows_removed_or_replaced_without_row_events_are_refused(kind: str) -> None:
    assert "without row events" in _change(BEFORE, kind=kind)


@pytest.mark.parametrize("kind", ["drop", "park", "rename"])
def test_a_table_gone_is_refused(kind: str) -> None:
    assert "dropped or renamed away" in _change(None, kind=kind)
