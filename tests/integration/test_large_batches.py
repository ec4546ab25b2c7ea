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
from binlake.spark import DETERMINISTIC_MERGE_SOURCES

from .items import (
    Racer,
    assert_changelog_holds_each_change_once,
    assert_silver_is_source,
    merge_source_settings,
    observed_merges,
    seed_items,
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
