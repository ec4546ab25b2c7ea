"""`binlake snapshot --tables/--reset`: bad input is refused before any Spark or database work."""

from __future__ import annotations

import pytest

from binlake.cli import build_parser, main
from binlake.errors import ConfigError
from binlake.snapshot import chosen_tables
from binlake.source import Column, TableSchema


def _table(name: str) -> TableSchema:
    return TableSchema("db", name, (Column("id", "int", "int", False),), ("id",), "id")


def test_reset_without_tables_is_refused_before_anything_runs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["snapshot", "--set", "source.database=db", "--reset"]) == 2
    assert "--reset needs --tables" in capsys.readouterr().err


def test_tables_accept_repeats_and_comma_lists() -> None:
    args = build_parser().parse_args(["snapshot", "--tables", "a,b", "--tables", " c "])
    assert args.tables == ["a", "b", "c"]


def test_tables_that_are_not_captured_are_named() -> None:
    tables = [_table("orders"), _table("items")]
    assert [t.name for t in chosen_tables(tables, ["items"])] == ["items"]
    assert chosen_tables(tables, None) == tables
    with pytest.raises(ConfigError, match=r"--tables names ordres.*captured: items, orders"):
        chosen_tables(tables, ["ordres"])
