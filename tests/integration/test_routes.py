"""Routes: the `items` shards of several databases (equal keys in every shard, schemas that
differ) merged into one silver table with `_source_db` and `_source_table` leading its key, with
writes racing in every shard: a shard's DDL, TRUNCATE and a shard created while the stream runs
touch only that shard's rows, and a stream crashed between two shards' MERGEs of one batch
replays it exactly."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import pytest
from pyspark.sql import functions as F

from binlake.errors import ConfigError
from binlake.jobs import commands
from binlake.lake.tables import lake_table

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .crash import crashed_at
from .items import ITEMS, Racer, seed_items

pytestmark = pytest.mark.integration

Runner = Callable[..., list[tuple[Any, ...]]]


def test_shards_routed_into_one_silver_keep_apart_through_ddl_and_a_kill(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    in_database: Callable[[str], Runner],
    make_config: Callable[..., Any],
) -> None:
    shards = {suffix: in_database(suffix) for suffix in ("s1", "s2", "s3")}
    for sql in shards.values():
        seed_items(sql, 300)  # ids 1..300 in every shard
    # Shard schemas that differ: a column only s2 has, a type s3 holds wider.
    shards["s2"]("ALTER TABLE items ADD COLUMN shelf VARCHAR(8) NOT NULL DEFAULT 'top'")
    shards["s3"]("ALTER TABLE items MODIFY qty BIGINT NOT NULL")
    target = f"{database}_all"
    config = make_config(
        source={"database": None, "tables": [rf"{database}_s[0-9]+\.items"]},
        silver={"routes": [{"source": rf"{database}_s[0-9]+\.(items)", "target": f"{target}.\\1"}]},
        snapshot={"chunk_size": 100},
    )
    with ExitStack() as racing:
        for suffix in shards:
            racing.enter_context(Racer(db_env, f"{database}_{suffix}"))
        commands.snapshot(spark, config)
        commands.stream(spark, config, available_now=True)
        # A column added to one shard: every shard's rows get the column, only s1's the default.
        shards["s1"]("ALTER TABLE items ADD COLUMN aisle INT NOT NULL DEFAULT 7")
        # One shard emptied: the other shards' rows of the same keys stay.
        shards["s2"]("TRUNCATE TABLE items")
        shards["s2"]("INSERT INTO items (id, name, qty, price) VALUES (1,'n',1,1), (2, 'b', 2, 2)")
        # A shard created while the stream runs joins the route from its first row.
        shards["s4"] = in_database("s4")
        seed_items(shards["s4"], 40)
        racing.enter_context(Racer(db_env, f"{database}_s4"))
        commands.stream(spark, config, available_now=True)
        # Crashed after the batch's first MERGE into the route's silver, before the next shard's.
        with crashed_at("binlake.silver.merge:TableApply.merge_silver", "after", 1):
            commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)

    for suffix, sql in shards.items():
        shard = f"{database}_{suffix}"
        assert_silver_is_source(
            spark, sql, config, "items", database=shard, routed_into=(target, "items")
        )
        assert_changelog_holds_each_change_once(spark, config, "items", shard)
        # Bronze stays per shard (s4 was captured from its CREATE: it has none).
        assert lake_table(config.lake, "bronze", shard, "items").exists(spark) is (suffix != "s4")
    silver = lake_table(config.lake, "silver", target, "items").read(spark)
    assert silver.count() == sum(sql("SELECT count(*) FROM items")[0][0] for sql in shards.values())
    assert dict(silver.dtypes)["qty"] == "bigint"  # widened to hold s3's
    of = {s: silver.where(F.col("_source_db") == f"{database}_{s}") for s in shards}
    assert of["s2"].where(F.col("shelf").isNull()).isEmpty()  # s2's own column, held
    assert of["s1"].where(F.col("shelf").isNotNull()).isEmpty()  # NULL for the others
    assert of["s1"].where(F.col("aisle").isNull()).isEmpty()
    assert of["s3"].where(F.col("aisle").isNotNull()).isEmpty()
    assert commands.verify(spark, config) == 0
    status = commands.status(config, lambda: spark)
    assert all(f"{database}_{s}.items" in status for s in shards), status
    for suffix in shards:  # no shard has a silver table of its own
        assert not lake_table(config.lake, "silver", f"{database}_{suffix}", "items").exists(spark)


def test_a_route_refuses_scd2_and_a_target_another_table_owns(
    database: str,
    in_database: Callable[[str], Runner],
    make_config: Callable[..., Any],
    spark: Any,
) -> None:
    for suffix in ("s1", "s2"):
        in_database(suffix)(ITEMS)
    tables = [rf"{database}_s[0-9]+\.items"]
    route = {"source": rf"{database}_s1\.items", "target": f"{database}_s2.items"}
    config = make_config(source={"database": None, "tables": tables}, silver={"routes": [route]})
    with pytest.raises(ConfigError, match=r"silver table of the captured table .*_s2\.items"):
        commands.snapshot(spark, config)
    route = {"source": rf"{database}_s[0-9]\.items", "target": f"{database}_all.items"}
    config = make_config(
        source={"database": None, "tables": tables},
        silver={"routes": [route], "history": "scd2"},
    )
    with pytest.raises(ConfigError, match="a route's silver keeps each member's latest rows"):
        commands.snapshot(spark, config)


def test_tables_of_one_database_routed_keep_soft_deletes_apart_through_a_reset(
    spark: Any, sql: Any, racer: Any, make_config: Callable[..., Any], database: str
) -> None:
    """`orders_00..63`'s form in one database: a bare target is a table of that database. Soft
    deletes stay their member's, and one member snapshotted again (`--reset`) replaces only its
    own rows."""
    names = [f"items_{n}" for n in (1, 2, 3)]
    for name in names:
        sql(ITEMS.replace("items", name))
        sql(f"INSERT INTO {name} (id, name, qty, price) SELECT seq, 'x', seq, 1 FROM seq_1_to_200")
        # Rows the racers never touch (they change ids 1..400 and insert from 10,001).
        sql(f"INSERT INTO {name} (id, name, qty, price) SELECT seq, 'y', 1, 1 FROM seq_501_to_510")
    config = make_config(
        source={"tables": [r"items_[0-9]"]},
        silver={"deletes": "soft", "routes": [{"source": r"items_[0-9]", "target": "items"}]},
    )
    with ExitStack() as racing:
        for name in names:
            racing.enter_context(racer(name))
        commands.snapshot(spark, config)
        commands.stream(spark, config, available_now=True)
        sql("DELETE FROM items_2 WHERE id > 500 AND id < 10000")
        commands.stream(spark, config, available_now=True)
        commands.snapshot(spark, config, tables=["items_3"], reset=True)
        commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)
    for name in names:
        assert_silver_is_source(
            spark, sql, config, name, where="_deleted_at IS NULL", routed_into=(database, "items")
        )
    silver = lake_table(config.lake, "silver", database, "items").read(spark)
    deleted = silver.where(F.col("_deleted_at").isNotNull())
    of_2 = {r["id"] for r in deleted.where(F.col("_source_table") == "items_2").collect()}
    assert set(range(501, 511)) <= of_2  # kept, deleted, through items_3's reset
    for name in names:  # a kept row is one its own table deleted, whatever the others hold
        own = {r["id"] for r in deleted.where(F.col("_source_table") == name).collect()}
        assert not own & {row[0] for row in sql(f"SELECT id FROM {name}")}, name
    assert commands.verify(spark, config) == 0
