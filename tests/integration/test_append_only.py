"""An append-only table (orders, events, logs): its batches hold inserts alone, and silver's
MERGE of such a batch has no matched clauses (Delta appends what its anti-join with silver
leaves). Inserts race the snapshot's chunks and the stream, and a batch crashes after its MERGE;
silver must still equal the source and the changelog hold each insert once."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from binlake.jobs import commands
from binlake.lake.tables import lake_table

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .crash import crashed_at
from .items import Racer, seed_items

pytestmark = pytest.mark.integration


def test_inserts_racing_the_snapshot_and_a_crashed_batch_land_once_by_insert_only_merges(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    sql: Callable[..., Any],
    make_config: Callable[..., Any],
) -> None:
    seed_items(sql, 400)
    config = make_config(snapshot={"chunk_size": 50}, stream={"trigger_interval": "1s"})
    with Racer(db_env, database, inserts_only=True) as racer:  # first and last chunk's keys
        commands.snapshot(spark, config)
        commands.stream(spark, config, available_now=True)
        # Silver's MERGE commits, then the run dies before the changelog and the batch commit.
        with crashed_at("binlake.silver.merge:TableApply.merge_silver", "after", 1):
            commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)  # replays the crashed batch, then the rest
    assert racer.statements > 0

    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")
    silver = lake_table(config.lake, "silver", database, "items")
    merges = spark.sql(f"DESCRIBE HISTORY {silver.sql}").where("operation = 'MERGE'").collect()
    clauses = [json.loads(m["operationParameters"]["matchedPredicates"]) for m in merges]
    assert len(clauses) >= 2 and all(c == [] for c in clauses), clauses
