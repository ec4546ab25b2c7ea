"""`source.row_filters`: only the rows a table's predicate holds land. The racer's updates add 1
to `qty`, so with `qty % 2 = 0` every update moves a row into or out of the filter, while the
snapshot and the stream run, across a batch replayed after a lost checkpoint commit and key
moves; bronze, the changelog and silver hold only rows inside it, and silver equals the source's
filtered rows (chispa)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import functions as F

from binlake.errors import ConfigError, SchemaChangeError
from binlake.jobs import commands
from binlake.lake.tables import lake_table

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .items import Racer, running_stream, seed_items, stream_losing_its_commit, wait_for

pytestmark = pytest.mark.integration

EVEN = "qty % 2 = 0"


def test_rows_moving_in_and_out_of_a_filter_land_exactly_under_racing_writes(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    sql: Callable[..., Any],
    make_config: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seed_items(sql, 400)
    config = make_config(
        source={"row_filters": {"items": EVEN}},
        snapshot={"chunk_size": 50},
        stream={"trigger_interval": "1s"},
    )

    with Racer(db_env, database):
        commands.snapshot(spark, config)
        commands.stream(spark, config, available_now=True)
        stream_losing_its_commit(spark, config, monkeypatch)
        commands.stream(spark, config, available_now=True)  # replays the lost batch first
    # Key moves (a delete and an insert at one position) of rows inside and outside.
    sql("UPDATE items SET id = id + 100000 WHERE id <= 30")
    commands.stream(spark, config, available_now=True)

    assert_silver_is_source(spark, sql, config, "items", source_where=EVEN)
    assert_changelog_holds_each_change_once(spark, config, "items")
    assert commands.verify(spark, config) == 0  # the source's side is filtered the same way
    bronze = lake_table(config.lake, "bronze", database, "items").read(spark)
    assert bronze.count() > 0 and bronze.where(f"NOT ({EVEN})").isEmpty()
    changelog = lake_table(config.lake, "bronze", database, "items__changelog").read(spark)
    outside = changelog.where("_before.qty % 2 = 1 OR _after.qty % 2 = 1")
    assert outside.isEmpty(), "an image outside the filter landed"
    ops = {r["_op"]: r["count"] for r in changelog.groupBy("_op").count().collect()}
    # Rows leaving the filter are deletes, rows entering it inserts: both happen.
    assert ops.get("delete", 0) > 20 and ops.get("insert", 0) > 20, ops
    moved = changelog.where(F.col("_after.id") > 100000).count()
    assert moved == len(sql(f"SELECT id FROM items WHERE id > 100000 AND {EVEN}"))

    # Another filter would mix two: refused until the table is snapshotted with it.
    thirds = "qty % 3 = 0"
    changed = make_config(source={"row_filters": {"items": thirds}})
    with pytest.raises(
        ConfigError, match=r'snapshot was read with {"row_filter": "qty % 2 = 0"}.* --reset'
    ):
        commands.stream(spark, changed, available_now=True)
    commands.snapshot(spark, changed, ["items"], reset=True)
    commands.stream(spark, changed, available_now=True)
    assert_silver_is_source(spark, sql, changed, "items", source_where=thirds)


@pytest.mark.parametrize(
    ("filters", "refusal"),
    [
        (
            {"items": "qyt % 2 = 0"},
            r"source.row_filters of .*items: 'qyt % 2 = 0' is not a predicate",
        ),
        ({"itmes": EVEN}, r"source.row_filters names 'itmes', .* \(did you mean 'items'\?\)"),
    ],
)
def test_a_filter_that_cannot_run_is_refused_before_any_work(
    spark: Any, sql: Callable[..., Any], make_config: Any, filters: dict[str, str], refusal: str
) -> None:
    seed_items(sql, 10)
    config = make_config(source={"row_filters": filters})
    with pytest.raises(ConfigError, match=refusal):
        commands.snapshot(spark, config)
    assert not lake_table(config.lake, "bronze", config.source.database, "items").exists(spark)


def test_a_ddl_moving_the_filters_column_stops_the_stream_until_the_filter_follows_it(
    spark: Any, sql: Callable[..., Any], make_config: Any, racer: Any
) -> None:
    """Silver's rows were chosen by the filter's column: a DDL that renames or drops it (in any
    `stream.schema_changes` mode) stops the stream before any row of the new layout lands, naming
    the filter and the remedy, which works: the filter named anew, the table snapshotted again."""
    noted = "qty % 2 = 0 OR note IS NOT NULL"
    shape = {"snapshot": {"chunk_size": 100}, "stream": {"trigger_interval": "1s"}}
    config = make_config(source={"row_filters": {"items": noted}}, **shape)
    seed_items(sql, 200)
    commands.snapshot(spark, config)
    silver = lake_table(config.lake, "silver", config.source.database, "items")
    with racer(), running_stream(spark, config) as running:
        sql("ALTER TABLE items CHANGE note remark VARCHAR(10) NULL")
        sql("UPDATE items SET remark = 'r' WHERE id % 3 = 0")
        wait_for(lambda: not running.is_alive() or "remark" in silver.read(spark).columns)
    assert running.raised, "the stream went on past the rename of the filter's column"
    stop = r"items changed at .*: it renames 'note', which its row filter .* reads.* --reset"
    assert isinstance(running.raised, SchemaChangeError), running.raised
    assert running.raised.exit_code == 7 and re.search(stop, str(running.raised))
    assert "remark" not in silver.read(spark).columns  # nothing of the new layout was applied

    remarked = "qty % 2 = 0 OR remark IS NOT NULL"
    followed = make_config(source={"row_filters": {"items": remarked}}, **shape)
    with racer():
        commands.snapshot(spark, followed, ["items"], reset=True)
    commands.stream(spark, followed, available_now=True)
    assert_silver_is_source(spark, sql, followed, "items", source_where=remarked)
    assert_changelog_holds_each_change_once(spark, followed, "items")

    # Dropped while no stream ran: the next one names the filter's column gone, and the remedy.
    held = sorted(silver.read(spark).collect())
    sql("ALTER TABLE items DROP COLUMN remark")
    sql("UPDATE items SET qty = qty + 1 WHERE id <= 20")
    gone = r"'qty % 2 = 0 OR remark IS NOT NULL' is not a predicate .* Renamed or dropped .*--reset"
    with pytest.raises(ConfigError, match=gone):
        commands.stream(spark, followed, available_now=True)
    assert sorted(silver.read(spark).collect()) == held
