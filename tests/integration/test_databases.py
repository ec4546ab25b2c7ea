"""Capture across databases: `source.tables` of `db.table` patterns, with no `source.database`,
read by one snapshot and one binlog reader. Each shard's `items` (equal keys in every shard)
lands as its own table, with writes racing in every shard; a per-table key names one shard's
table; a DDL in one shard changes that shard's table alone; a shard database dropped and created
again holds only its new rows; a shard database created while the stream runs joins from its
first row; a database the pattern does not match stays out."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import pytest

from binlake.jobs import commands
from binlake.lake.tables import lake_table

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .items import ITEMS, Racer, seed_items
from .replay import connect

pytestmark = pytest.mark.integration


def test_shards_in_several_databases_land_through_one_reader(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    in_database: Callable[[str], Callable[..., list[tuple[Any, ...]]]],
    make_config: Callable[..., Any],
) -> None:
    shards = {suffix: in_database(suffix) for suffix in ("s1", "s2", "s3")}
    for sql in shards.values():
        seed_items(sql, 300)  # ids 1..300 in every shard
    shards["s1"]("CREATE TABLE noise (id INT PRIMARY KEY, v INT)")
    outside = in_database("other")
    seed_items(outside, 20)
    config = make_config(
        source={
            "database": None,
            "tables": [rf"{database}_s[0-9]+\.items"],
            # A key by db.table: s2's items alone keeps only rows of qty other than 3.
            "row_filters": {f"{database}_s2.items": "qty <> 3"},
        },
        stream={"schema_changes": "evolve"},
    )
    with ExitStack() as racing:
        for suffix in shards:
            racing.enter_context(Racer(db_env, f"{database}_{suffix}"))
        commands.snapshot(spark, config)
        commands.stream(spark, config, available_now=True)
        shards["s1"]("INSERT INTO noise VALUES (1, 1), (2, 2)")
        # A DDL through the session's database: s2's items alone changes.
        shards["s2"]("ALTER TABLE items ADD COLUMN shelf VARCHAR(8) DEFAULT 'a1'")
        # A shard dropped and provisioned again by a migration's CREATE TABLE IF NOT EXISTS:
        # the dropped table's rows must not outlive it (DROP DATABASE logs no DROP TABLE).
        with connect(db_env) as conn, conn.cursor() as cur:
            cur.execute(f"DROP DATABASE `{database}_s3`")
            cur.execute(f"CREATE DATABASE `{database}_s3`")
        shards["s3"](ITEMS.replace("CREATE TABLE", "CREATE TABLE IF NOT EXISTS"))
        shards["s3"]("INSERT INTO items VALUES (1, 'again', 5, 1.00, NULL), (7, 'b', 6, 2, 'x')")
        # A shard created while the stream runs joins from its first row.
        shards["s4"] = in_database("s4")
        seed_items(shards["s4"], 40)
        racing.enter_context(Racer(db_env, f"{database}_s4"))
        commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)
    for suffix, sql in shards.items():
        kept = "qty <> 3" if suffix == "s2" else "TRUE"
        columns = assert_silver_is_source(
            spark, sql, config, "items", source_where=kept, database=f"{database}_{suffix}"
        )
        assert ("shelf" in columns) is (suffix == "s2"), suffix
        assert_changelog_holds_each_change_once(spark, config, "items", f"{database}_{suffix}")
    assert commands.verify(spark, config) == 0  # the source's side read per database
    status = commands.status(config, lambda: spark)
    assert all(f"{database}_{s}.items" in status for s in shards), status
    assert "none: captured from its CREATE" in status.split(f"{database}_s4.items")[1], status
    for name, table in ((f"{database}_s1", "noise"), (f"{database}_other", "items")):
        assert not lake_table(config.lake, "silver", name, table).exists(spark)
        assert not lake_table(config.lake, "bronze", name, table).exists(spark)
