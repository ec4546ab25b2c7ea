"""`silver.deletes: soft`: a row the source deletes stays in silver with `_deleted_at`, the
delete's binlog commit time; its live rows equal the source, under writes racing the snapshot
and the stream, across a key deleted and inserted again, and a replayed catch-up."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pyspark.sql import functions as F

from binlake.errors import ConfigError
from binlake.jobs import commands
from binlake.lake.tables import lake_table

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .items import Racer, seed_items

ROWS = 400


def test_deleted_rows_stay_with_their_delete_time_and_live_rows_equal_the_source(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    sql: Callable[..., Any],
    make_config: Callable[..., Any],
) -> None:
    seed_items(sql, ROWS)
    config = make_config(
        silver={"deletes": "soft"},
        snapshot={"chunk_size": 50},
        stream={"trigger_interval": "1s"},
    )
    with Racer(db_env, database):  # inserts, updates and deletes race the snapshot and stream
        commands.snapshot(spark, config)
        commands.stream(spark, config, available_now=True)
    sql("DELETE FROM items WHERE id = 8")
    sql("DELETE FROM items WHERE id = 7")
    sql("INSERT INTO items (id, name, qty, price) VALUES (7, 'back again', 1, 1.50)")
    commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)  # nothing new: changes nothing

    columns = assert_silver_is_source(spark, sql, config, "items", where="_deleted_at IS NULL")
    assert columns[-2:] == ["_binlake_offset", "_deleted_at"]
    assert_changelog_holds_each_change_once(spark, config, "items")
    assert commands.verify(spark, config) == 0  # verify compares the live rows

    silver = lake_table(config.lake, "silver", database, "items").read(spark)
    changelog = lake_table(config.lake, "bronze", database, "items__changelog").read(spark)
    # Each key whose last change is a delete is kept, at that delete's commit time.
    last = (
        changelog.withColumn("_key", F.coalesce("_after.id", "_before.id"))
        .groupBy("_key")
        .agg(F.max_by(F.struct("_op", "_commit_ts"), "_binlake_offset").alias("last"))
    )
    expected = {
        (r["_key"], r["last"]["_commit_ts"]) for r in last.where("last._op = 'delete'").collect()
    }
    kept = {(r["id"], r["_deleted_at"]) for r in silver.where("_deleted_at IS NOT NULL").collect()}
    assert kept == expected
    assert len(kept) > 1  # the racer's deletes and id 8
    live = {id_ for (id_,) in sql("SELECT id FROM items")}
    assert not {key for key, _ in kept} & live
    (eight,) = silver.where("id = 8").collect()
    assert eight["name"] == "item8"  # the row as it was when deleted
    (seven,) = silver.where("id = 7").collect()
    assert (seven["name"], seven["_deleted_at"]) == ("back again", None)


def test_a_silver_made_with_hard_deletes_keeps_deletes_from_the_switch_on(
    spark: Any, sql: Callable[..., Any], make_config: Callable[..., Any]
) -> None:
    seed_items(sql, 100)
    hard = make_config(stream={"trigger_interval": "1s"})
    commands.run(spark, hard)
    sql("DELETE FROM items WHERE id = 1")
    commands.stream(spark, hard, available_now=True)
    soft = make_config(stream={"trigger_interval": "1s"}, silver={"deletes": "soft"})
    sql("DELETE FROM items WHERE id = 2")

    commands.stream(spark, soft, available_now=True)

    silver = lake_table(soft.lake, "silver", soft.source.database, "items").read(spark)
    assert [r["id"] for r in silver.where("_deleted_at IS NOT NULL").collect()] == [2]
    assert silver.where("id = 1").count() == 0  # deleted before the switch: gone, as it was
    assert_silver_is_source(spark, sql, soft, "items", where="_deleted_at IS NULL")


def test_a_source_column_named_deleted_at_is_refused_with_soft_deletes(
    spark: Any, sql: Callable[..., Any], make_config: Callable[..., Any]
) -> None:
    sql("CREATE TABLE accounts (id INT PRIMARY KEY, _deleted_at DATETIME NULL)")
    config = make_config(silver={"deletes": "soft"})

    with pytest.raises(ConfigError, match=r"accounts has a column '_deleted_at'"):
        commands.snapshot(spark, config)
