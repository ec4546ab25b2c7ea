"""A large batch on both cores: a table's changes spread over several tasks
(`silver.CHANGES_PER_TASK`) and merged into silver from a source Delta does not copy first
(`spark.DETERMINISTIC_MERGE_SOURCES`, in force while the stream runs). Delta copies a source it
cannot prove deterministic because it reads it twice; binlake's batch must read the same both
times, and its replay after a crash must change nothing."""

from __future__ import annotations

import time
from typing import Any

import pytest

from binlake import jobs, silver
from binlake.sink import INTERPRETED_CHANGES
from binlake.spark import DETERMINISTIC_MERGE_SOURCES, INTERPRETED_QUERIES

from .items import (
    Racer,
    assert_changelog_holds_each_change_once,
    assert_silver_is_source,
    merge_source_settings,
    observed_merges,
    seed_items,
    session_values,
    stream_losing_its_commit,
)

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
    monkeypatch.setattr(silver, "CHANGES_PER_TASK", 40)
    merges = observed_merges(monkeypatch)
    seed_items(sql, 600)
    config = make_config(stream={"trigger_interval": "1s"})
    before = merge_source_settings(spark)
    jobs.snapshot(spark, config)
    with Racer(db_env, database, pause=0.002) as racer:
        time.sleep(2)
        assert racer.statements > 2 * 40
        stream_losing_its_commit(spark, config, monkeypatch)
    jobs.stream(spark, config, available_now=True)  # the replay, and the racer's last changes
    assert merges and all(m.settings == DETERMINISTIC_MERGE_SOURCES for m in merges)
    assert max(m.partitions for m in merges) > 1
    assert merge_source_settings(spark) == before
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")


def test_a_small_batch_applies_interpreted_and_a_large_one_compiled(
    spark: Any, sql: Any, make_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a session with Spark's default (compiled) code, a batch of a few changes MERGEs with
    interpreted queries and one past `INTERPRETED_CHANGES` with compiled code; the session's
    own settings are back after each. (The suite's session is interpreted: set back to the
    default for this test.)"""
    merges = observed_merges(monkeypatch)
    seed_items(sql, 600)
    config = make_config()
    suite = {key: spark.conf.get(key) for key in INTERPRETED_QUERIES}
    for key in suite:
        spark.conf.unset(key)
    try:
        default = session_values(spark, INTERPRETED_QUERIES)
        assert default != INTERPRETED_QUERIES
        jobs.snapshot(spark, config)
        jobs.stream(spark, config, available_now=True)  # silver made, the table joined
        sql("UPDATE items SET qty = qty + 1 WHERE id <= 5")
        jobs.stream(spark, config, available_now=True)
        sql("UPDATE items SET qty = qty + 1 WHERE id <= %s", (INTERPRETED_CHANGES + 50,))
        jobs.stream(spark, config, available_now=True)
        assert session_values(spark, INTERPRETED_QUERIES) == default
    finally:
        for key, value in suite.items():
            spark.conf.set(key, value)
    assert [m.changes for m in merges] == [5, INTERPRETED_CHANGES + 50]
    assert merges[0].codegen == INTERPRETED_QUERIES
    assert merges[1].codegen == default
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")
