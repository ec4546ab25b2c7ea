"""`lake.table_layout`: a table's bronze and silver are clustered by its configured columns and
all its Delta tables carry its properties, from their creation, through a reset (whose empty
bronze and rebuilt silver are overwrites, which drop Delta's clustering) and a schema change,
with writes racing; silver still equals the source."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from binlake.config.secrets import with_resolved_password
from binlake.errors import ConfigError
from binlake.jobs import commands
from binlake.lake.tables import STATS_COLUMNS, bronze_table
from binlake.mysql.column_rules import lake_view
from binlake.mysql.connection import connection
from binlake.mysql.discovery import load_schema
from binlake.silver.merge import changelog_table, silver_table

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .items import Racer, seed_items
from .migrations import migrate_during_batches

pytestmark = pytest.mark.integration

PROPERTIES = {"delta.logRetentionDuration": "interval 60 days", "binlake.owner": "sales"}
LAYOUT = {"items": {"cluster_by": ["qty", "name"], "properties": PROPERTIES}}


def _layouts(spark: Any, config: Any) -> dict[str, tuple[list[str], dict[str, str]]]:
    """Each of items' Delta tables: its clustering columns and the layout's properties it has."""
    table = lake_view(config.source, _items(config))
    found = {}
    for kind, target in (
        ("bronze", bronze_table(config, table)),
        ("changelog", changelog_table(config, table)),
        ("silver", silver_table(config, table)),
    ):
        detail = spark.sql(f"DESCRIBE DETAIL {target.sql}").first()
        held = {k: v for k, v in detail["properties"].items() if k in PROPERTIES}
        found[kind] = (list(detail["clusteringColumns"]), held)
    return found


EXPECTED = {
    "bronze": (["qty", "name"], PROPERTIES),
    "changelog": ([], PROPERTIES),
    "silver": (["qty", "name"], PROPERTIES),
}


def test_clustering_and_properties_hold_through_a_reset_and_a_schema_change(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    sql: Callable[..., Any],
    make_config: Callable[..., Any],
) -> None:
    seed_items(sql, 300)
    config = make_config(
        snapshot={"chunk_size": 100}, stream={"schema_changes": "evolve"},
        lake={"table_layout": LAYOUT},
    )  # fmt: skip
    with Racer(db_env, database):
        commands.snapshot(spark, config)
        commands.stream(spark, config, available_now=True)
        assert _layouts(spark, config) == EXPECTED
        commands.snapshot(spark, config, ["items"], reset=True)
        commands.stream(spark, config, available_now=True)
        assert _layouts(spark, config) == EXPECTED
        sql("ALTER TABLE items ADD COLUMN shelf VARCHAR(20) DEFAULT 's1'")
        commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)
    assert _layouts(spark, config) == EXPECTED
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")


def test_a_layout_naming_a_missing_column_or_table_is_refused_before_any_work(
    spark: Any, sql: Callable[..., Any], make_config: Callable[..., Any]
) -> None:
    seed_items(sql, 10)
    typo = make_config(lake={"table_layout": {"items": {"cluster_by": ["qtty"]}}})
    with pytest.raises(ConfigError, match=r"clusters by 'qtty'.*did you mean 'qty'"):
        commands.snapshot(spark, typo)
    excluded = make_config(
        source={"column_rules": {"items": {"exclude": ["name"]}}},
        lake={"table_layout": {"items": {"cluster_by": ["name"]}}},
    )
    with pytest.raises(ConfigError, match="clusters by 'name'"):
        commands.snapshot(spark, excluded)
    nowhere = make_config(lake={"table_layout": {"itemz": {"cluster_by": ["qty"]}}})
    with pytest.raises(ConfigError, match="itemz"):
        commands.snapshot(spark, nowhere)
    assert not bronze_table(typo, _items(typo)).exists(spark)


def _items(config: Any) -> Any:
    with connection(with_resolved_password(config.source)) as conn:
        return load_schema(conn, config.source.database, "items", {})


def _statistics(spark: Any, target: Any) -> tuple[str | None, set[str]]:
    """`target`'s statistics columns property, and the columns whose min and max its files'
    entries in the Delta log hold."""
    detail = spark.sql(f"DESCRIBE DETAIL {target.sql}").first()
    log = spark.read.json(f"{detail['location']}/_delta_log/*.json").where("add IS NOT NULL")
    held = {c for r in log.select("add.stats").collect() for c in json.loads(r[0])["minValues"]}
    return detail["properties"].get(STATS_COLUMNS), held


def test_bronze_and_the_changelog_gather_statistics_of_what_they_are_found_by(
    spark: Any, sql: Callable[..., Any], make_config: Callable[..., Any], racer: Any
) -> None:
    """Delta's default statistics (min, max, nulls of the first 32 columns) are much of a wide
    write's cost: bronze is filtered by `_chunk_id` alone, the changelog by its offsets and
    commit times; silver keeps the default. On main their files held statistics of every
    column."""
    seed_items(sql, 300)
    config = make_config(snapshot={"chunk_size": 100, "chunks_per_commit": 1})
    with racer():
        commands.snapshot(spark, config)
        commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)
    table = lake_view(config.source, _items(config))
    assert _statistics(spark, bronze_table(config, table)) == ("_chunk_id", {"_chunk_id"})
    changelog = ("`_binlake_offset`, `_commit_ts`", {"_binlake_offset", "_commit_ts"})
    assert _statistics(spark, changelog_table(config, table)) == changelog
    assert _statistics(spark, silver_table(config, table))[1] >= {"id", "name", "qty"}
    assert_silver_is_source(spark, sql, config, "items")


def test_a_clustering_column_renamed_during_a_reset_snapshot_is_followed(
    spark: Any, sql: Callable[..., Any], make_config: Callable[..., Any], racer: Any,
    monkeypatch: Any,
) -> None:  # fmt: skip
    """A clustered bronze gathers statistics of its clustering columns too (Delta clusters by
    columns it has statistics of), and Delta refuses to overwrite a table whose statistics
    columns are gone: a reset's snapshot meeting the rename of one must still follow it."""
    seed_items(sql, 400)
    snapshot = {"chunk_size": 100, "parallelism": 1, "chunks_per_commit": 1}
    layout = {"table_layout": {"items": {"cluster_by": ["note"]}}}
    config = make_config(snapshot=snapshot, lake=layout)
    commands.snapshot(spark, config)
    bronze = bronze_table(config, lake_view(config.source, _items(config)))
    assert _statistics(spark, bronze)[0] == "_chunk_id, `note`"
    rename = ["ALTER TABLE items RENAME COLUMN note TO remark", "UPDATE items SET remark = 'r'"]
    migrate_during_batches(monkeypatch, sql, {2: rename})
    with racer():
        commands.snapshot(spark, config, ["items"], reset=True)
    renamed = make_config(
        snapshot=snapshot, lake={"table_layout": {"items": {"cluster_by": ["remark"]}}}
    )
    commands.snapshot(spark, renamed)
    assert _statistics(spark, bronze)[0] == "_chunk_id, `remark`"
    with racer():
        commands.stream(spark, renamed, available_now=True)
    commands.stream(spark, renamed, available_now=True)
    assert_silver_is_source(spark, sql, renamed, "items")
