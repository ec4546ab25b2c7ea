"""The silver sizes a stream's run keeps for its choice of code generation (`sink.SilverSizes`):
read from Delta once, then again only after `SIZE_KNOWN_S`, after more than
`SIZE_KNOWN_CHANGES` applied changes, or after a DDL; a table without silver is asked each time."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from binlake import sink
from binlake.config import Config, parse_config
from binlake.schema import Column, TableSchema

ITEMS = TableSchema("db", "items", (Column("id", "int", "int", False),), ("id",), "id")
OTHER = TableSchema("db", "other", (Column("id", "int", "int", False),), ("id",), "id")


@dataclass
class FakeSilver:
    """A silver table whose Delta size is `size`; counts how often it was read."""

    sql: str
    size: int | None
    reads: list[str] = field(default_factory=list)

    def size_in_bytes(self, spark: Any) -> int | None:
        self.reads.append(self.sql)
        return self.size


@pytest.fixture
def silvers(monkeypatch: pytest.MonkeyPatch) -> dict[str, FakeSilver]:
    tables = {"items": FakeSilver("items", 1000), "other": FakeSilver("other", None)}
    monkeypatch.setattr(sink, "silver_table", lambda config, table: tables[table.name])
    return tables


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(sink.time, "monotonic", lambda: now[0])
    return now


@pytest.fixture
def config() -> Config:
    return parse_config({"source": {"database": "db"}, "lake": {"root": "/tmp/lake"}})


def test_a_size_is_read_once_while_few_changes_are_applied(
    silvers: dict[str, FakeSilver], clock: list[float], config: Config
) -> None:
    sizes = sink.SilverSizes()
    for _ in range(3):
        assert sizes.of(None, config, ITEMS) == 1000
        sizes.applied(config, ITEMS, sink.SIZE_KNOWN_CHANGES // 4, ddl=False)
        clock[0] += sink.SIZE_KNOWN_S / 4
    assert len(silvers["items"].reads) == 1


@pytest.mark.parametrize(
    ("changes", "ddl", "seconds", "read_again"),
    [
        (sink.SIZE_KNOWN_CHANGES, False, 0.0, False),  # at the limit, not past it
        (sink.SIZE_KNOWN_CHANGES + 1, False, 0.0, True),  # enough changes to have grown it
        (0, True, 0.0, True),  # a DDL may have rewritten it (a backfilled default)
        (0, False, sink.SIZE_KNOWN_S + 1, True),  # too long ago (an OPTIMIZE, other writers)
    ],
)
def test_a_size_is_read_again_once_it_may_have_changed(
    silvers: dict[str, FakeSilver],
    clock: list[float],
    config: Config,
    changes: int,
    ddl: bool,
    seconds: float,
    read_again: bool,
) -> None:
    sizes = sink.SilverSizes()
    sizes.of(None, config, ITEMS)
    silvers["items"].size = 9 * 2**20
    sizes.applied(config, ITEMS, changes, ddl)
    clock[0] += seconds
    assert sizes.of(None, config, ITEMS) == (9 * 2**20 if read_again else 1000)
    assert len(silvers["items"].reads) == (2 if read_again else 1)


def test_a_table_without_silver_is_asked_each_time(
    silvers: dict[str, FakeSilver], clock: list[float], config: Config
) -> None:
    sizes = sink.SilverSizes()
    assert sizes.of(None, config, OTHER) is None
    sizes.applied(config, OTHER, 5, ddl=False)
    silvers["other"].size = 10
    assert sizes.of(None, config, OTHER) == 10


def test_the_batch_choice_reads_each_size_once_and_counts_them_together(
    silvers: dict[str, FakeSilver], clock: list[float], config: Config
) -> None:
    tables = {t.qualified: t for t in (ITEMS, OTHER)}
    sizes = sink.SilverSizes()
    assert sink.small_silvers(None, config, tables, ["db.items"], sizes)
    assert sink.small_silvers(None, config, tables, ["db.items"], sizes)
    assert len(silvers["items"].reads) == 1
    silvers["other"].size = sink.SMALL_SILVER_BYTES  # together past the limit
    assert not sink.small_silvers(None, config, tables, ["db.items", "db.other"], sizes)
