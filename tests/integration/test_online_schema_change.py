"""Issue 23: tables altered by an online schema-change tool, followed as an ALTER of the table.

The real `pt-online-schema-change` (Percona Toolkit) copies `items` into `_items_new`, mirrors
writes into it with triggers and cuts over with `RENAME TABLE items TO _items_old, _items_new TO
items`, all while a writer races it. Before binlake knew the pattern, it read the cut-over as a
DROP of `items`: capture stopped for good and every later change was lost without a word (or,
with every table captured, the stream stopped and asked to snapshot `_items_old`)."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import pytest

from binlake.jobs import commands

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .items import running_stream, seed_items, wait_for
from .migrations import pt_online_schema_change

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("tables", "stream_running"),
    [(["items"], True), (None, False)],
    ids=["named-table-stream-running", "every-table-stream-behind"],
)
def test_pt_online_schema_change_under_racing_writes_is_followed_without_a_resnapshot(
    spark: Any, sql: Any, make_config: Any, racer: Any, db_env: dict[str, str], database: str,
    tmp_path: Path, tables: list[str] | None, stream_running: bool,
) -> None:  # fmt: skip
    seed_items(sql, 1000)
    config = make_config(source={"tables": tables}, stream={"trigger_interval": "1s"})
    with racer():
        commands.snapshot(spark, config)
    _stream(spark, config)
    with contextlib.ExitStack() as stack:
        if stream_running:
            stream = stack.enter_context(running_stream(spark, config))
        with racer():
            pt_online_schema_change(db_env, database, tmp_path)
            # Changes after the cut-over: the ones that used to be lost.
            sql("UPDATE items SET region = 'us', remark = 'r', qty = qty + 100 WHERE id % 3 = 0")
            sql("DELETE FROM items WHERE id % 11 = 0")
            sql("INSERT INTO items (id, name, qty, price, region) VALUES (90001, 'x', 1, 1, 'ap')")
        if stream_running:
            wait_for(lambda: not stream.is_alive() or _silver_has(spark, config, 90001))
    _stream(spark, config)
    assert {"region", "remark"} <= set(assert_silver_is_source(spark, sql, config, "items"))
    assert_changelog_holds_each_change_once(spark, config, "items")
    lake = Path(config.lake.root)
    assert not [p for p in lake.rglob("*") if p.is_dir() and "_items_" in p.name]  # no shadows


def test_gh_ost_two_step_cut_over_with_a_stream_batch_between_its_renames(
    spark: Any, sql: Any, make_config: Any, racer: Any
) -> None:
    """gh-ost's statements, scripted (gh-ost mirrors writes from its own binlog reader, so the copy
    runs while no writer does): a ghost table altered and filled, then the two-step cut-over with
    a stream batch ending between `items TO _items_del` and `_items_gho TO items`."""
    seed_items(sql, 600, copy="other")  # `other` keeps the database capturable in the gap
    config = make_config()  # every table: the ghost and changelog tables must stay out
    with racer():
        commands.snapshot(spark, config)
    _stream(spark, config)
    sql("CREATE TABLE _items_ghc (id BIGINT PRIMARY KEY, hint VARCHAR(64))")
    sql("CREATE TABLE _items_gho LIKE items")
    sql("ALTER TABLE _items_gho ADD region VARCHAR(8) NOT NULL DEFAULT 'eu', MODIFY qty BIGINT")
    with racer():
        sql("UPDATE items SET qty = qty + 1 WHERE id % 2 = 0")
    sql("INSERT INTO _items_gho (id, name, qty, price, note) SELECT * FROM items")
    sql("INSERT INTO _items_ghc VALUES (1, 'copy complete')")
    sql("RENAME TABLE items TO _items_del")
    _stream(spark, config)  # the table is parked at this batch's end
    sql("RENAME TABLE _items_gho TO items")
    with racer():
        sql("UPDATE items SET region = 'us', qty = 5000000000 WHERE id % 3 = 0")
    sql("DROP TABLE _items_del, _items_ghc")
    _stream(spark, config)
    assert "region" in assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")


# Lenient, the default, is the real tool's test above; the scripted lenient run is in make soak.
@pytest.mark.parametrize("mode", [pytest.param("lenient", marks=pytest.mark.soak), "evolve"])
def test_gh_ost_column_rename_met_in_an_earlier_batch_than_its_cut_over(
    spark: Any, sql: Any, make_config: Any, racer: Any, mode: str
) -> None:
    """The ghost table's ALTER renames and widens two columns (one twice, `qty` → `amount` →
    `quantity`), a stream batch ends before the cut-over, and the cut-over comes while the
    stream is stopped: the renames must be known from the earlier batch."""
    seed_items(sql, 600)
    config = make_config(source={"tables": ["items"]}, stream={"schema_changes": mode})
    commands.snapshot(spark, config)
    _stream(spark, config)
    sql("CREATE TABLE _items_gho LIKE items")
    sql("ALTER TABLE _items_gho CHANGE note remark VARCHAR(30) NULL, CHANGE qty amount BIGINT")
    sql("ALTER TABLE _items_gho RENAME COLUMN amount TO quantity")
    with racer():
        sql("INSERT INTO _items_gho (id, name, quantity, price, remark) SELECT * FROM items")
    _stream(spark, config)  # the renames are in this batch, the cut-over in the next
    sql("INSERT IGNORE INTO _items_gho SELECT * FROM items")
    sql("UPDATE _items_gho g JOIN items i USING (id) SET g.quantity = i.qty, g.remark = i.note")
    sql("DELETE g FROM _items_gho g LEFT JOIN items i USING (id) WHERE i.id IS NULL")
    sql("RENAME TABLE items TO _items_del, _items_gho TO items")
    sql("UPDATE items SET quantity = quantity + 5000000000 WHERE id % 3 = 0")
    sql("DROP TABLE _items_del")
    _stream(spark, config)
    columns = assert_silver_is_source(spark, sql, config, "items")
    assert "quantity" in columns and "remark" in columns
    assert_changelog_holds_each_change_once(spark, config, "items")


def _stream(spark: Any, config: Any) -> None:
    commands.stream(spark, config, available_now=True)


def _silver_has(spark: Any, config: Any, key: int) -> bool:
    path = config.lake.path("silver", config.source.database, "items")
    return spark.read.format("delta").load(path).where(f"id = {key}").count() == 1
