"""A table's lifecycle across jobs and failures: the orders in which a user's jobs, resets and
crashes meet, each ending with silver equal to the source and each change once in the
changelog."""

from __future__ import annotations

from typing import Any

import pytest

from binlake import jobs
from binlake.errors import SnapshotIncompleteError
from binlake.snapshot import ChunkScheduler

from .items import assert_changelog_holds_each_change_once, assert_silver_is_source, seed_items

pytestmark = pytest.mark.integration


def test_a_new_job_started_before_the_reset_snapshot_finished_builds_silver_from_it(
    spark: Any, sql: Any, make_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The usual recovery after a purged binlog: reset the table, start a new job. The new job's
    first start came before the reset snapshot finished and was refused; on the parent commit it
    had recorded its table list anyway, so its next start took the old job's silver as its own
    and the changes between the old job's end and the new snapshot never reached silver."""
    seed_items(sql, 300)
    config = make_config()
    jobs.snapshot(spark, config)
    jobs.stream(spark, config, available_now=True)
    sql("UPDATE items SET qty = qty + 100 WHERE id <= 150")
    sql("DELETE FROM items WHERE id > 280")

    def killed(self: ChunkScheduler, work: Any) -> Any:
        raise RuntimeError("the reset snapshot died before reading")

    with monkeypatch.context() as patched:
        patched.setattr(ChunkScheduler, "run", killed)
        with pytest.raises(RuntimeError):
            jobs.snapshot(spark, config, ["items"], reset=True)
    again = make_config(stream={"job_name": "after_reset"})
    with pytest.raises(SnapshotIncompleteError):
        jobs.stream(spark, again, available_now=True)
    jobs.snapshot(spark, again)
    sql("UPDATE items SET qty = qty + 1000 WHERE id BETWEEN 100 AND 200")
    jobs.stream(spark, again, available_now=True)
    assert_silver_is_source(spark, sql, again, "items")
    assert_changelog_holds_each_change_once(spark, again, "items")
