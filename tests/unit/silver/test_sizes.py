"""The silver sizes a stream's run keeps for its choice of settings (`SilverSizes`): read
from Delta once, then again only after `SIZE_KNOWN_S`, after more than `SIZE_KNOWN_CHANGES`
applied changes, or after a DDL; a table without silver is asked each time. And the choice
itself (`settings_for`): interpreted queries by the silver tables' bytes, rewriting MERGEs by
the bytes a batch's changes could rewrite (`lake.tables.TableSize.rewritten`)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from binlake.config.settings import Config, parse_config
from binlake.lake.tables import TableSize
from binlake.model.schema import Column, TableSchema
from binlake.runtime.spark import COPY_ON_WRITE_MERGES, INTERPRETED_QUERIES
from binlake.silver.file_sizes import silver_file_settings
from binlake.stream import batch_settings

ITEMS = TableSchema("db", "items", (Column("id", "int", "int", False),), ("id",), "id")
OTHER = TableSchema("db", "other", (Column("id", "int", "int", False),), ("id",), "id")


@dataclass
class FakeSilver:
    """A silver table of `bytes` in `files` files (no table if `bytes` is None); counts how
    often its size was read."""

    sql: str
    bytes: int | None
    files: int = 1
    reads: list[str] = field(default_factory=list)

    def size(self, spark: Any) -> TableSize | None:
        self.reads.append(self.sql)
        return None if self.bytes is None else TableSize(self.bytes, self.files)


@pytest.fixture
def silvers(monkeypatch: pytest.MonkeyPatch) -> dict[str, FakeSilver]:
    tables = {"items": FakeSilver("items", 1000), "other": FakeSilver("other", None)}
    monkeypatch.setattr(batch_settings, "silver_table", lambda config, table: tables[table.name])
    return tables


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [100.0]
    monkeypatch.setattr(batch_settings.time, "monotonic", lambda: now[0])
    return now


@pytest.fixture
def config() -> Config:
    return parse_config({"source": {"database": "db"}, "lake": {"root": "/tmp/lake"}})


def test_a_size_is_read_once_while_few_changes_are_applied(
    silvers: dict[str, FakeSilver], clock: list[float], config: Config
) -> None:
    sizes = batch_settings.SilverSizes()
    for _ in range(3):
        assert sizes.of(None, config, ITEMS) == TableSize(1000, 1)
        sizes.applied(config, ITEMS, batch_settings.SIZE_KNOWN_CHANGES // 4, ddl=False)
        clock[0] += batch_settings.SIZE_KNOWN_S / 4
    assert len(silvers["items"].reads) == 1


@pytest.mark.parametrize(
    ("changes", "ddl", "seconds", "read_again"),
    [
        (batch_settings.SIZE_KNOWN_CHANGES, False, 0.0, False),  # at the limit, not past it
        (
            batch_settings.SIZE_KNOWN_CHANGES + 1,
            False,
            0.0,
            True,
        ),  # enough changes to have grown it
        (0, True, 0.0, True),  # a DDL may have rewritten it (a backfilled default)
        (
            0,
            False,
            batch_settings.SIZE_KNOWN_S + 1,
            True,
        ),  # too long ago (an OPTIMIZE, other writers)
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
    sizes = batch_settings.SilverSizes()
    sizes.of(None, config, ITEMS)
    silvers["items"].bytes = 9 * 2**20
    sizes.applied(config, ITEMS, changes, ddl)
    clock[0] += seconds
    assert sizes.of(None, config, ITEMS) == TableSize(9 * 2**20 if read_again else 1000, 1)
    assert len(silvers["items"].reads) == (2 if read_again else 1)


def test_a_table_without_silver_is_asked_each_time(
    silvers: dict[str, FakeSilver], clock: list[float], config: Config
) -> None:
    sizes = batch_settings.SilverSizes()
    assert sizes.of(None, config, OTHER) is None
    sizes.applied(config, OTHER, 5, ddl=False)
    silvers["other"].bytes = 10
    assert sizes.of(None, config, OTHER) == TableSize(10, 1)


@pytest.fixture
def chosen(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    """The settings groups `batch_settings.settings_for` put in force, in order."""
    groups: list[dict[str, str]] = []

    @contextlib.contextmanager
    def recorded(spark: Any, settings: dict[str, str]) -> Iterator[None]:
        groups.append(settings)
        yield

    monkeypatch.setattr(batch_settings, "session_settings", recorded)
    return groups


def choose(
    chosen: list[dict[str, str]],
    config: Config,
    changes: dict[str, int],
    sizes: batch_settings.SilverSizes,
) -> list[str]:
    """The names of the settings groups a batch of `changes` is applied with."""
    tables = {t.qualified: t for t in (ITEMS, OTHER)}
    rewrites = {**COPY_ON_WRITE_MERGES, **silver_file_settings()}  # in files of silver's size
    names = {"interpreted": INTERPRETED_QUERIES, "rewrites": rewrites}
    chosen.clear()
    with batch_settings.settings_for(None, config, tables, changes, sizes):
        pass
    return [next(name for name, group in names.items() if group == g) for g in chosen]


def test_the_batch_choice_reads_each_size_once_and_counts_them_together(
    silvers: dict[str, FakeSilver], clock: list[float], config: Config, chosen: list[Any]
) -> None:
    sizes = batch_settings.SilverSizes()
    assert choose(chosen, config, {"db.items": 2}, sizes) == ["interpreted", "rewrites"]
    assert choose(chosen, config, {"db.items": 2}, sizes) == ["interpreted", "rewrites"]
    assert len(silvers["items"].reads) == 1
    silvers["other"].bytes = batch_settings.SMALL_SILVER_BYTES  # together past the limit
    assert choose(chosen, config, {"db.items": 2, "db.other": 1}, sizes) == ["rewrites"]


def test_a_table_without_silver_keeps_the_session_settings(
    silvers: dict[str, FakeSilver], clock: list[float], config: Config, chosen: list[Any]
) -> None:
    assert (
        choose(chosen, config, {"db.items": 1, "db.other": 1}, batch_settings.SilverSizes()) == []
    )
    assert choose(chosen, config, {}, batch_settings.SilverSizes()) == []
    assert choose(chosen, config, {"db.gone": 1}, batch_settings.SilverSizes()) == []


@pytest.mark.parametrize(
    ("changes", "rewrites"),
    [
        (1, True),  # one 1.5 MB file at most
        (5, True),  # 7.5 MB
        (6, False),  # 9 MB: past `REWRITE_BYTES`, deletion vectors
        (0, True),  # a DDL alone: no MERGE rewrites anything
    ],
)
def test_a_large_silver_rewrites_while_its_changes_touch_few_files(
    silvers: dict[str, FakeSilver],
    clock: list[float],
    config: Config,
    chosen: list[Any],
    changes: int,
    rewrites: bool,
) -> None:
    """A silver of 30 MB in 20 files of 1.5 MB (the bench's 1M-row layout): too large to
    interpret, yet a batch of a few changes rewrites a few files."""
    silvers["items"].bytes, silvers["items"].files = 20 * 1536 * 1024, 20
    assert choose(chosen, config, {"db.items": changes}, batch_settings.SilverSizes()) == (
        ["rewrites"] if rewrites else []
    )


@pytest.mark.parametrize(
    ("size", "changes", "rewritten"),
    [
        (TableSize(1000, 4), 1, 250),
        (TableSize(1001, 4), 1, 251),  # the average rounded up
        (TableSize(1000, 4), 3, 750),
        (TableSize(1000, 4), 100, 1000),  # never more than the table
        (TableSize(0, 0), 5, 0),  # an empty silver
    ],
)
def test_the_bytes_a_batch_rewrites_are_its_changes_files_at_most(
    size: TableSize, changes: int, rewritten: int
) -> None:
    assert size.rewritten(changes) == rewritten
