"""A table's lifecycle across jobs and failures: the orders in which a user's jobs, resets and
crashes meet, each ending with silver equal to the source and each change once in the
changelog."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from binlake.errors import LakeError, SnapshotIncompleteError, SourceError
from binlake.jobs import commands
from binlake.lake.stream_tables import StreamTables
from binlake.lake.tables import lake_table
from binlake.snapshot.ledger import Ledger
from binlake.snapshot.task import ChunkScheduler
from binlake.stream.joining import left_to_snapshot

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .items import ITEMS, running_stream, seed_items, wait_for
from .replay import connect

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
    commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    sql("UPDATE items SET qty = qty + 100 WHERE id <= 150")
    sql("DELETE FROM items WHERE id > 280")

    def killed(self: ChunkScheduler, work: Any) -> Any:
        raise RuntimeError("the reset snapshot died before reading")

    with monkeypatch.context() as patched:
        patched.setattr(ChunkScheduler, "run", killed)
        with pytest.raises(RuntimeError):
            commands.snapshot(spark, config, ["items"], reset=True)
    again = make_config(stream={"job_name": "after_reset"})
    with pytest.raises(SnapshotIncompleteError):
        commands.stream(spark, again, available_now=True)
    commands.snapshot(spark, again)
    sql("UPDATE items SET qty = qty + 1000 WHERE id BETWEEN 100 AND 200")
    commands.stream(spark, again, available_now=True)
    assert_silver_is_source(spark, sql, again, "items")
    assert_changelog_holds_each_change_once(spark, again, "items")


def _changelog_offsets(spark: Any, config: Any, table: str) -> int:
    """How many changes the changelog holds (after checking each is there once)."""
    assert_changelog_holds_each_change_once(spark, config, table)
    name = f"{table}__changelog"
    return lake_table(config.lake, "bronze", config.source.database, name).read(spark).count()


def test_a_job_started_again_over_a_deleted_checkpoint_appends_each_change_once(
    spark: Any, sql: Any, make_config: Any
) -> None:
    """Deleting a checkpoint and starting the job again under its name is the usual Spark
    habit. On the parent commit the new checkpoint's batch ids started at 0 again, and Delta
    skipped every changelog append until they passed the old ones: the changes were lost."""
    seed_items(sql, 300)
    config = make_config()
    commands.snapshot(spark, config)
    sql("UPDATE items SET qty = qty + 1 WHERE id <= 100")
    commands.stream(spark, config, available_now=True)
    sql("UPDATE items SET qty = qty + 1 WHERE id > 250")
    commands.stream(spark, config, available_now=True)
    assert _changelog_offsets(spark, config, "items") == 150
    shutil.rmtree(config.lake.path("_system", "checkpoints", config.stream.job_name))
    sql("UPDATE items SET qty = qty + 1 WHERE id BETWEEN 101 AND 130")
    commands.stream(spark, config, available_now=True)
    assert_silver_is_source(spark, sql, config, "items")
    assert _changelog_offsets(spark, config, "items") == 180


def test_a_join_repeated_after_a_crash_appends_each_change_once(
    spark: Any, sql: Any, make_config: Any, racer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table added to `source.tables` joins the running job once its snapshot finishes: its
    changes since its chunks' high watermarks are applied, then the job's table list records
    it. A crash between the two repeats the join when the job starts again, at the position of
    its last committed batch, then replays the batch that crashed. On the parent commit the
    join's changelog append was keyed by its position, and the replayed batch appended the
    changes after it a second time."""
    seed_items(sql, 300, copy="other")
    config = make_config(source={"tables": ["items"]}, stream={"trigger_interval": "1s"})
    commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    both = make_config(source={"tables": ["items", "other"]}, stream={"trigger_interval": "1s"})
    other = f"{config.source.database}.other"
    update = StreamTables.update
    crashed: list[bool] = []

    def crash_before_recording_the_join(self: StreamTables, change: Any) -> Any:
        if other in change({}) and not crashed:
            crashed.append(True)
            raise RuntimeError("killed before the join was recorded")
        return update(self, change)

    with racer("other"), monkeypatch.context() as patched:
        patched.setattr(StreamTables, "update", crash_before_recording_the_join)
        with running_stream(spark, both) as stream:
            commands.snapshot(spark, both)  # `other` joins the running stream when it finishes
            wait_for(lambda: not stream.is_alive())
    assert crashed
    commands.stream(spark, both, available_now=True)
    assert_silver_is_source(spark, sql, both, "items")
    assert_silver_is_source(spark, sql, both, "other")
    assert_changelog_holds_each_change_once(spark, both, "other")


def test_a_missing_silver_table_stops_the_stream_until_it_is_rebuilt(
    spark: Any, sql: Any, make_config: Any, racer: Any
) -> None:
    """Silver moved away by hand (or dropped) while the job was stopped: on the parent commit
    the next start rebuilt it from the old bronze and lost every change since the snapshot,
    without a word; a silver that went while the job ran was skipped and its batch committed."""
    seed_items(sql, 300)
    config = make_config()
    commands.snapshot(spark, config)
    sql("UPDATE items SET qty = qty + 1 WHERE id <= 100")
    commands.stream(spark, config, available_now=True)
    silver = Path(config.lake.path("silver", config.source.database, "items"))
    moved = silver.with_name("items-moved")
    silver.rename(moved)
    sql("UPDATE items SET qty = qty + 1 WHERE id > 250")
    with pytest.raises(LakeError, match=r"silver of .*items.* is missing .* --reset"):
        commands.stream(spark, config, available_now=True)
    with racer():
        commands.snapshot(spark, config, ["items"], reset=True)
        commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")


def test_dml_logged_as_a_statement_stops_the_stream_until_the_table_is_snapshotted_again(
    spark: Any, sql: Any, db_env: dict[str, str], database: str, make_config: Any, racer: Any
) -> None:
    """A session with binlog_format=STATEMENT changes a captured table: the binlog holds the
    statement, no row events. On the parent commit the stream skipped it, and silver kept the
    rows it changed as they were, without a word."""
    seed_items(sql, 300)
    config = make_config()
    commands.snapshot(spark, config)
    with racer():
        commands.stream(spark, config, available_now=True)
        with connect(db_env, database) as conn, conn.cursor() as cur:
            cur.execute("SET SESSION binlog_format = 'STATEMENT'")
            cur.execute("UPDATE items SET qty = qty + 500 WHERE id BETWEEN 250 AND 300")
        with pytest.raises(SourceError, match=r"logged as a statement.*--tables items --reset"):
            commands.stream(spark, config, available_now=True)
        commands.snapshot(spark, config, ["items"], reset=True)
        commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")


def test_a_reset_killed_midway_is_finished_by_the_next_snapshot(
    spark: Any, sql: Any, make_config: Any, racer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`snapshot --reset` dies after forgetting the table's plan, before emptying its bronze;
    the table shrank meanwhile, and the next run is a plain `binlake snapshot`. On the parent
    commit it planned fewer chunks, the old bronze kept the rows of the chunk ids it no longer
    had (ghost chunks), and silver, rebuilt from bronze, held rows the source had deleted."""
    seed_items(sql, 300)
    config = make_config()
    commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    forget = Ledger.forget

    def killed_after_forgetting(self: Ledger, table: str) -> None:
        forget(self, table)
        raise RuntimeError("killed after the ledger forgot the table")

    with monkeypatch.context() as patched:
        patched.setattr(Ledger, "forget", killed_after_forgetting)
        with pytest.raises(RuntimeError, match="killed after"):
            commands.snapshot(spark, config, ["items"], reset=True)
    sql("DELETE FROM items WHERE id > 120")
    with racer():
        commands.snapshot(spark, config)
        commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")


def test_a_joining_tables_catch_up_is_read_by_spark_not_on_the_driver(
    spark: Any, sql: Any, make_config: Any, racer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A busy table's changes during its long snapshot are its join's catch-up. On the parent
    commit they were read into one list in the driver's memory (every restart again); now a
    Spark task reads them, as it reads a micro-batch, so reading the binlog on the driver fails
    this test."""
    seed_items(sql, 300, copy="other")
    config = make_config(source={"tables": ["items"]})
    commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    both = make_config(source={"tables": ["items", "other"]})
    with racer("other"):
        commands.snapshot(spark, both)
        time.sleep(2)  # changes after the chunks' high watermarks: the catch-up's

    def on_the_driver(*args: Any) -> Any:
        raise AssertionError("the catch-up was read on the driver")

    with monkeypatch.context() as patched:
        for module in ("binlake.stream.joining", "binlake.stream.binlog_source"):
            patched.setattr(f"{module}.read_range", on_the_driver, raising=False)
        commands.stream(spark, both, available_now=True)
    assert_silver_is_source(spark, sql, both, "other")
    assert _changelog_offsets(spark, both, "other") > 0, "the catch-up applied nothing"


def test_a_table_altered_between_its_snapshot_and_its_join_joins_in_bronzes_layout(
    spark: Any, sql: Any, make_config: Any, racer: Any
) -> None:
    """A table added to `source.tables` joins at the next stream start after its snapshot. On
    the parent commit its silver was built from bronze with the schema the stream read from
    the server at its start: a column added since the snapshot, absent from bronze, failed
    every start (exit 70) until a reset; added while the stream ran, it never landed."""
    seed_items(sql, 300, copy="other")
    config = make_config(source={"tables": ["items"]})
    commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    both = make_config(source={"tables": ["items", "other"]})
    with racer("other"):
        commands.snapshot(spark, both)
        sql("ALTER TABLE other ADD COLUMN tag VARCHAR(20) NOT NULL DEFAULT 'before'")
        sql("UPDATE other SET tag = 'after' WHERE id <= 100")
    commands.stream(spark, both, available_now=True)
    assert_silver_is_source(spark, sql, both, "other")
    assert_changelog_holds_each_change_once(spark, both, "other")


def test_a_table_a_snapshot_holds_is_never_brought_in_by_a_create_the_stream_meets(
    spark: Any, sql: Any, make_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """MySQL logs every `CREATE TABLE IF NOT EXISTS t`, also of a `t` that exists (MariaDB logs
    only one that creates). On the parent commit a stream meeting it while `t` was being
    snapshotted or reset took `t` for a new table: it emptied silver, captured `t` from there on
    and never joined the finished snapshot. The stream now leaves a table its snapshot holds
    (planned in the ledger, or a reset pending) to that snapshot's join."""
    seed_items(sql, 30, copy="other")
    sql(ITEMS.replace("items", "fresh"))
    config = make_config(source={"tables": ["items"]})
    commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    both = make_config(source={"tables": ["items", "other", "fresh"]})

    def killed(self: ChunkScheduler, work: Any) -> Any:
        raise RuntimeError("the snapshot died before reading")

    with monkeypatch.context() as patched:
        patched.setattr(ChunkScheduler, "run", killed)
        with pytest.raises(RuntimeError):
            commands.snapshot(spark, both, ["items", "other"], reset=True)
    db = config.source.database
    created = {f"{db}.items", f"{db}.other", f"{db}.fresh"}
    assert left_to_snapshot(spark, both, created) == {f"{db}.items", f"{db}.other"}
    commands.snapshot(spark, both)
    commands.stream(spark, both, available_now=True)
    assert_silver_is_source(spark, sql, both, "items")
    assert_silver_is_source(spark, sql, both, "other")
