"""How a batch is run. A large one on both cores: a table's changes spread over several tasks
(`spread.CHANGES_PER_TASK`) and merged into silver from a source Delta does not copy first
(`spark.DETERMINISTIC_MERGE_SOURCES`, in force while the stream runs). Delta copies a source it
cannot prove deterministic because it reads it twice; binlake's batch must read the same both
times, and its replay after a crash must change nothing. One into small silver tables with
interpreted queries (`batch_settings.SMALL_SILVER_BYTES`), and one of few changes with MERGEs that
rewrite files instead of writing deletion vectors (`batch_settings.REWRITE_BYTES`)."""

from __future__ import annotations

import time
from typing import Any

import pytest

from binlake.jobs import commands
from binlake.mysql.connection import connection
from binlake.mysql.prerequisites import validate
from binlake.runtime.spark import (
    COPY_ON_WRITE_MERGES,
    DETERMINISTIC_MERGE_SOURCES,
    INTERPRETED_QUERIES,
)
from binlake.silver import spread
from binlake.silver.merge import silver_table
from binlake.stream import batch_settings

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .items import Racer, observed_merges, seed_items, session_values, stream_losing_its_commit

pytestmark = pytest.mark.integration


def test_a_large_batch_spread_over_tasks_and_merged_uncopied_replays_exactly(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, make_config: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """Written while a racer changes rows, a batch of a few hundred changes (over a limit of 40
    per task) is applied while the racer goes on, lost before its checkpoint commit and applied
    again: silver equals the source and the changelog holds each change once. Every MERGE ran
    with Delta's copy off and the batch in several partitions; the session's own settings are
    back once the stream ends."""
    monkeypatch.setattr(spread, "CHANGES_PER_TASK", 40)
    merges = observed_merges(monkeypatch)
    seed_items(sql, 600)
    config = make_config(stream={"trigger_interval": "1s"})
    before = session_values(spark, DETERMINISTIC_MERGE_SOURCES)
    commands.snapshot(spark, config)
    with Racer(db_env, database, pause=0.002) as racer:
        time.sleep(2)
        assert racer.statements > 2 * 40
        stream_losing_its_commit(spark, config, monkeypatch)
    commands.stream(spark, config, available_now=True)  # the replay, and the racer's last changes
    assert merges and all(m.settings == DETERMINISTIC_MERGE_SOURCES for m in merges)
    assert max(m.partitions for m in merges) > 1
    assert session_values(spark, DETERMINISTIC_MERGE_SOURCES) == before
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")


def test_a_batch_into_small_silver_tables_applies_interpreted_and_a_larger_one_compiled(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, make_config: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """On a session with Spark's default (compiled) code, the batches into a silver of a few KB
    MERGE with interpreted queries while a racer writes, rewriting the files they touch (no
    deletion vector in their commits); with `SMALL_SILVER_BYTES` below that silver's size
    and `REWRITE_BYTES` below what its five changes could rewrite (Delta's own bytes and
    file count of it) they MERGE compiled, writing deletion vectors. The session's own settings
    are back after each stream, and silver equals the source. (The suite's session is
    interpreted: set back to Spark's default for this test.)"""
    merges = observed_merges(monkeypatch)
    seed_items(sql, 600)
    config = make_config()
    suite = session_values(spark, INTERPRETED_QUERIES)
    for key in suite:
        spark.conf.unset(key)
    own_rewrites = session_values(spark, COPY_ON_WRITE_MERGES)
    assert own_rewrites != COPY_ON_WRITE_MERGES
    try:
        compiled = session_values(spark, INTERPRETED_QUERIES)
        assert compiled != INTERPRETED_QUERIES
        commands.snapshot(spark, config)
        commands.stream(spark, config, available_now=True)  # silver made, the table joined
        qualified = f"{database}.items"
        with connection(config.source) as conn:
            tables = {t.qualified: t for t in validate(conn, config)}
        silver = silver_table(config, tables[qualified])
        size = silver.size(spark)
        assert (
            size is not None
            and 0 < size.bytes <= batch_settings.SMALL_SILVER_BYTES
            and size.files > 0
        )
        gone = {qualified: 1, f"{database}.gone": 1}  # a table without silver: no choice
        assert batch_settings.silver_sizes(spark, config, tables, gone) is None
        created = _merge_metrics(spark, silver.sql)
        with Racer(db_env, database, pause=0.01) as racer:
            while racer.statements < 50:
                racer.stop.wait(0.05)
            commands.stream(spark, config, available_now=True)
        small = list(merges)
        small_commits = _merge_metrics(spark, silver.sql)[len(created) :]
        assert session_values(spark, INTERPRETED_QUERIES) == compiled
        assert session_values(spark, COPY_ON_WRITE_MERGES) == own_rewrites
        monkeypatch.setattr(batch_settings, "SMALL_SILVER_BYTES", size.bytes - 1)
        monkeypatch.setattr(batch_settings, "REWRITE_BYTES", size.rewritten(5) - 1)
        sql("UPDATE items SET qty = qty + 1 WHERE id <= 5")
        commands.stream(spark, config, available_now=True)
        larger_commits = _merge_metrics(spark, silver.sql)[len(created) + len(small_commits) :]
        assert session_values(spark, INTERPRETED_QUERIES) == compiled
        assert session_values(spark, COPY_ON_WRITE_MERGES) == own_rewrites
    finally:
        for key, value in suite.items():
            spark.conf.set(key, value)
    assert small and all(m.codegen == INTERPRETED_QUERIES for m in small)
    assert all(m.rewrites == COPY_ON_WRITE_MERGES for m in small)
    larger = merges[len(small) :]
    assert larger and all(m.codegen == compiled and m.rewrites == own_rewrites for m in larger)
    # What Delta did: the small batches' MERGEs rewrote files, the larger one wrote a vector.
    assert small_commits
    assert all(int(m["numTargetDeletionVectorsAdded"]) == 0 for m in small_commits)
    assert any(int(m["numTargetFilesRemoved"]) > 0 for m in small_commits)
    assert [int(m["numTargetDeletionVectorsAdded"]) > 0 for m in larger_commits] == [True]
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")


def _merge_metrics(spark: Any, table: str) -> list[dict[str, str]]:
    """The operation metrics of the MERGE commits of `table` (SQL text), oldest first."""
    history = spark.sql(f"DESCRIBE HISTORY {table}").where("operation = 'MERGE'")
    return [dict(r["operationMetrics"]) for r in history.orderBy("version").collect()]
