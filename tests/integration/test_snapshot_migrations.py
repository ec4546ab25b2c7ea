"""Issue 29: a snapshot carries on through the migrations that land while it reads.

A large table's snapshot runs for hours, and migrations do not wait for it. Before, a DDL in the
middle of a snapshot stopped it with "the binlog's layout no longer matches its captured schema"
and the `--reset` remedy: the table's snapshot went back to zero. Now bronze follows the DDL at
its offset: the chunks already read are caught up to the DDL and changed by it, the chunks after
it are read in the new layout, and the stream starts after it.

The DDL lands while a chunk batch is being read (its window crosses the DDL) or between two
batches; a writer races throughout.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from binlake.jobs import commands
from binlake.snapshot import ddl_follow
from binlake.snapshot import task as snapshot_task
from binlake.snapshot.ledger import Ledger

from .assertions import (
    assert_changelog_holds_each_change_once,
    assert_silver_is_source,
    source_columns,
)
from .items import seed_items
from .migrations import migrate_during_batches, pt_online_schema_change, run_soon

pytestmark = pytest.mark.integration

#: Landing one after another in one snapshot, each while a different commit batch is read.
MIGRATIONS = [
    [
        "ALTER TABLE items ADD COLUMN region VARCHAR(8) NOT NULL DEFAULT 'eu' AFTER name",
        "UPDATE items SET region = 'us' WHERE id % 4 = 0",
    ],
    [
        "ALTER TABLE items MODIFY name VARCHAR(40) NOT NULL, MODIFY qty BIGINT NOT NULL",
        "UPDATE items SET name = CONCAT(name, '-now-longer-than-twenty') WHERE id % 5 = 0",
    ],
    [
        "ALTER TABLE items RENAME COLUMN note TO remark",
        "UPDATE items SET remark = 'renamed' WHERE id % 6 = 0",
    ],
    ["ALTER TABLE items DROP COLUMN region", "UPDATE items SET qty = 0 WHERE id < 50"],
]
SNAPSHOT = {"chunk_size": 100, "parallelism": 1, "chunks_per_commit": 2}


def test_migrations_during_a_snapshot_land_without_a_resnapshot(
    spark: Any, sql: Any, make_config: Any, racer: Any, monkeypatch: Any
) -> None:
    """ADD COLUMN with a default, two widenings, a column rename and a DROP COLUMN, each in the
    middle of the snapshot of a 16-chunk table. On main the snapshot stopped at the first with
    "the binlog's layout ... no longer matches its captured schema" (a DDL between two batches
    instead let it finish in the old layout, and the stream then failed on bronze)."""
    seed_items(sql, 1600)
    config = make_config(snapshot=SNAPSHOT)
    migrate_during_batches(monkeypatch, sql, dict(zip([2, 3, 5, 6], MIGRATIONS, strict=True)))
    with racer():
        summary = commands.snapshot(spark, config)
    chunks = Ledger(spark, config.lake.path("_system", "chunks")).chunks()
    assert summary.chunks == len(chunks) >= 16 and all(c.finished for c in chunks)
    _stream_and_compare(spark, sql, config, racer)


def test_pt_online_schema_change_during_a_snapshot_is_followed(
    spark: Any, sql: Any, make_config: Any, racer: Any, monkeypatch: Any,
    db_env: dict[str, str], database: str, tmp_path: Path,
) -> None:  # fmt: skip
    """The real tool copies `items` into `_items_new` and swaps it in while the snapshot reads
    `items`: the chunks read before the swap are caught up to it, the rest are read from the
    new table, and nothing of `_items_new` or `_items_old` lands."""
    seed_items(sql, 1600)
    config = make_config(snapshot=SNAPSHOT)
    tool = threading.Thread(target=pt_online_schema_change, args=(db_env, database, tmp_path))
    real = snapshot_task.read_and_commit
    started = 0

    def read_and_commit(*args: Any, **kwargs: Any) -> Any:
        nonlocal started
        started += 1
        if started == 2:
            tool.start()
        if started == 5:
            tool.join()  # the swap lands before the fifth batch at the latest
        return real(*args, **kwargs)

    monkeypatch.setattr(snapshot_task, "read_and_commit", read_and_commit)
    with racer():
        commands.snapshot(spark, config)
    assert not tool.is_alive()
    _stream_and_compare(spark, sql, config, racer)
    assert "region" in [n for n, _ in source_columns(sql, "items")]


def test_ddl_the_snapshot_cannot_follow_resnapshots_that_table_by_itself(
    spark: Any, sql: Any, make_config: Any, racer: Any, monkeypatch: Any
) -> None:
    """Rows removed without row events (TRUNCATE), then a new row key during the snapshot that
    follows: the chunks read before cannot be caught up, so the table's snapshot starts again
    in the new layout, without a person, while `other` goes on (on main the stream stopped at
    the DDL and asked for `snapshot --tables items --reset`)."""
    seed_items(sql, 800)
    sql("CREATE TABLE other (id INT PRIMARY KEY, v INT)")
    sql("INSERT INTO other SELECT id, qty FROM items")
    config = make_config(snapshot=SNAPSHOT)
    truncate = ["TRUNCATE TABLE items", "INSERT INTO items VALUES (1, 'again', 1, 1.00, NULL)"]
    new_key = "ALTER TABLE items DROP PRIMARY KEY, ADD PRIMARY KEY (id, qty)"
    real_read, real_reset = snapshot_task.read_and_commit, snapshot_task.reset_table
    items_batches, resets = 0, 0

    def read_and_commit(*args: Any, **kwargs: Any) -> Any:
        nonlocal items_batches
        if args[3].name == "items":
            items_batches += 1
            if items_batches == 2:  # while its second batch is read
                threading.Thread(target=run_soon, args=(sql, truncate), daemon=True).start()
            if resets == 1 and not sql("SHOW INDEX FROM items WHERE Column_name = 'qty'"):
                sql(new_key)  # the re-snapshot's first batch then meets it
        return real_read(*args, **kwargs)

    def reset_table(*args: Any, **kwargs: Any) -> None:
        nonlocal resets
        resets += 1
        real_reset(*args, **kwargs)

    monkeypatch.setattr(snapshot_task, "read_and_commit", read_and_commit)
    monkeypatch.setattr(snapshot_task, "reset_table", reset_table)
    with racer():
        summary = commands.snapshot(spark, config)
    chunks = Ledger(spark, config.lake.path("_system", "chunks")).chunks()
    assert summary.chunks == len(chunks) and all(c.finished for c in chunks)
    assert resets == 2  # after the TRUNCATE, then after the new key
    _stream_and_compare(spark, sql, config, racer)
    assert_silver_is_source(spark, sql, config, "other")


def test_a_snapshot_failing_while_following_a_migration_resumes_exactly(
    spark: Any, sql: Any, make_config: Any, racer: Any, monkeypatch: Any
) -> None:
    """A snapshot stopped with chunks read before the DDL, then one that fails right after
    bronze was rewritten for it (before the ledger and the schema history knew: what a kill
    there leaves): the resumed snapshot converges, and reads none of the chunks finished
    before again."""
    seed_items(sql, 1000)
    config = make_config(snapshot=SNAPSHOT)
    with racer():
        _snapshot_failing_at(spark, config, monkeypatch, "read_and_commit", 4, before=True)
        for statement in MIGRATIONS[0]:
            sql(statement)
        _snapshot_failing_at(spark, config, monkeypatch, "catch_up", 1, before=False)
        summary = commands.snapshot(spark, config)
    assert summary.chunks_read == summary.chunks - 6  # three batches stayed read
    _stream_and_compare(spark, sql, config, racer)


def _snapshot_failing_at(
    spark: Any, config: Any, monkeypatch: Any, step: str, call: int, before: bool
) -> None:
    """A snapshot that fails at the `call`-th call of `step` (of `snapshot.task` or
    `snapshot.ddl_follow`), before it runs or right after it returns; what it committed before
    stays."""
    owner = snapshot_task if hasattr(snapshot_task, step) else ddl_follow
    real = getattr(owner, step)
    calls = 0

    def failing(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == call and before:
            raise RuntimeError("stopped by the test")
        result = real(*args, **kwargs)
        if calls == call:
            raise RuntimeError("stopped by the test")
        return result

    with monkeypatch.context() as patched:
        patched.setattr(owner, step, failing)
        with pytest.raises(RuntimeError, match="stopped by the test"):
            commands.snapshot(spark, config)


def _stream_and_compare(spark: Any, sql: Any, config: Any, racer: Any) -> None:
    with racer():
        commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")
