"""Issue 10: schema changes and the table lifecycle while streaming, against a real MariaDB, its
binlog and Delta. Every step writes before and after its DDL while a writer races it; silver is
compared with the source (chispa) after each stream run."""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from binlake.errors import ConfigError, SchemaChangeError
from binlake.jobs import commands
from binlake.lake.files import ArrowFiles, HadoopFiles
from binlake.lake.paths import ledger_path, tables_path
from binlake.lake.stream_tables import StreamTables
from binlake.silver import spread
from binlake.snapshot.ledger import Ledger

from .assertions import (
    assert_changelog_holds_each_change_once,
    assert_silver_is_source,
    source_columns,
)
from .child_runs import KILL_POINTS, run_killed_at, write_config
from .crash import crashed_at
from .items import ITEMS, observed_merges, running_stream, seed_items, wait_for

pytestmark = pytest.mark.integration


def _stream(spark: Any, config: Any) -> None:
    commands.stream(spark, config, available_now=True)


@pytest.mark.parametrize(
    "mode",
    # lenient's replay of these statements: test_ddl_replays and test_ddl_met_late (lenient).
    [pytest.param("lenient", marks=pytest.mark.soak), "evolve"],
)
def test_silver_follows_each_schema_change_while_writes_race(
    spark: Any, sql: Any, make_config: Any, racer: Any, mode: str, caplog: Any
) -> None:
    seed_items(sql, 300)
    config = make_config(stream={"schema_changes": mode})
    with racer():
        commands.snapshot(spark, config)
        _stream(spark, config)
    _stream(spark, config)
    assert_silver_is_source(spark, sql, config, "items")

    # ADD COLUMN with a default, placed AFTER another: existing rows read the default.
    with racer():
        sql("ALTER TABLE items ADD COLUMN extra VARCHAR(20) NULL DEFAULT 'dflt' AFTER name")
        sql("UPDATE items SET extra = 'set' WHERE id % 3 = 0")
    caplog.set_level(logging.WARNING, "binlake.silver.schema_follow")
    _stream(spark, config)
    assert "extra" in assert_silver_is_source(spark, sql, config, "items")
    # The rewrite of every row (and its Change Data Feed's images) is said, not silent.
    assert any(
        "column extra takes the source's default 'dflt' in every row" in r.getMessage()
        for r in caplog.records
    )

    # Widening: INT -> BIGINT, DECIMAL(10,2) -> DECIMAL(14,2), VARCHAR(20) -> VARCHAR(40).
    with racer():
        sql("ALTER TABLE items MODIFY qty BIGINT NOT NULL, MODIFY price DECIMAL(14,2) NOT NULL")
        sql("ALTER TABLE items MODIFY name VARCHAR(40) NOT NULL")
        sql("UPDATE items SET qty = 5000000000, price = 123456789012.25 WHERE id % 7 = 0")
    _stream(spark, config)
    assert_silver_is_source(spark, sql, config, "items")
    # `status` counts a widened silver (delta-rs lacks type widening; Spark reads it then).
    rows = sql("SELECT count(*) FROM items")[0][0]
    assert f" {rows:,} " in commands.status(config, lambda: spark).split(".items")[1]

    # RENAME and DROP in one stream run (the schema read at the rename is the one after the
    # drop: rows between the two are decoded by the names the binlog logs).
    with racer():
        sql("ALTER TABLE items RENAME COLUMN note TO remark")
        sql("UPDATE items SET remark = 'renamed' WHERE id % 4 = 0")
        sql("ALTER TABLE items DROP COLUMN extra")
        sql("UPDATE items SET remark = 'after' WHERE id % 6 = 0")
    _stream(spark, config)
    columns = assert_silver_is_source(spark, sql, config, "items")
    if mode == "evolve":
        assert [c for c in columns if not c.startswith("_")] == [
            n for n, _ in source_columns(sql, "items")
        ]
    else:
        assert {"note", "extra", "remark"} <= set(columns)

    # TRUNCATE: silver empties at that position, then takes the rows written after it.
    with racer():
        sql("TRUNCATE TABLE items")
        sql("INSERT INTO items (id, name, qty, price) VALUES (1, 'again', 1, 2.00)")
    _stream(spark, config)
    assert_silver_is_source(spark, sql, config, "items")
    assert commands.verify(spark, config) in (0, 1)  # runs on evolved tables without failing


def test_table_created_while_streaming_is_captured_from_its_create(
    spark: Any, sql: Any, make_config: Any, racer: Any
) -> None:
    seed_items(sql, 200)
    config = make_config()
    commands.snapshot(spark, config)
    _stream(spark, config)
    with racer():
        sql(ITEMS.replace("items", "fresh"))
        sql("INSERT INTO fresh VALUES (1, 'a', 1, 1.00, NULL), (2, 'b', 2, 2.00, 'x')")
        sql("UPDATE fresh SET qty = 20 WHERE id = 2")
    with racer("fresh"):
        _stream(spark, config)
        sql("DELETE FROM fresh WHERE id = 1")
    _stream(spark, config)
    assert_silver_is_source(spark, sql, config, "fresh")
    assert_silver_is_source(spark, sql, config, "items")
    # DROP TABLE: capture stops, silver is kept.
    sql("DROP TABLE fresh")
    _stream(spark, config)
    assert spark.read.format("delta").load(config.lake.path("silver", config.source.database,
                                                            "fresh")).count() > 0  # fmt: skip


def test_tables_created_in_one_batch_are_all_captured(
    spark: Any, sql: Any, make_config: Any, racer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24: the CREATEs of one micro-batch are applied side by side, each recording its
    table in the job's table list; none may be lost from capture while writes race. In that
    batch, reads of the list are slowed down (as a loaded driver or an object store slows
    them), so the threads' updates overlap."""
    seed_items(sql, 50)
    config = make_config()
    commands.snapshot(spark, config)
    _stream(spark, config)
    created = [f"fresh{i}" for i in range(4)]
    for name in created:
        sql(ITEMS.replace("items", name))
        _insert_fresh(sql, 1, 30, name)
    with monkeypatch.context() as slowed, racer(created[0]), racer("items"):
        slowed.setattr(HadoopFiles, "read_text", _slow_registry_reads(HadoopFiles.read_text))
        _stream(spark, config)  # every CREATE in one batch
    for name in created:
        _insert_fresh(sql, 31, 40, name)
        sql(f"UPDATE `{name}` SET qty = qty + 1 WHERE id % 2 = 0")
    _stream(spark, config)
    for name in created:
        assert_silver_is_source(spark, sql, config, name)
        assert_changelog_holds_each_change_once(spark, config, name)
    assert_silver_is_source(spark, sql, config, "items")


def _slow_registry_reads(
    read_text: Callable[[HadoopFiles, str], str | None],
) -> Callable[[HadoopFiles, str], str | None]:
    """`HadoopFiles.read_text` taking a second longer for the job's table list."""

    def slow(files: HadoopFiles, path: str) -> str | None:
        text = read_text(files, path)
        if "binlake-tables" in path:
            time.sleep(1.0)
        return text

    return slow


def _insert_fresh(sql: Any, first: int, last: int, table: str = "fresh") -> None:
    values = ", ".join(f"({i}, 'f{i}', {i % 13}, {i}.50, NULL)" for i in range(first, last + 1))
    sql(f"INSERT INTO `{table}` VALUES {values}")


@pytest.mark.parametrize(
    "killed",
    [
        # Without a kill: the same sequence as the kill below, whose rerun proves more.
        pytest.param(None, marks=pytest.mark.soak),
        "stream_before_checkpoint_commit",
        # A snapshot's resume after this kill: test_faults' kill point of the same name.
        pytest.param("snapshot_between_bronze_and_ledger", marks=pytest.mark.soak),
    ],
)
def test_table_created_while_streaming_then_snapshotted_keeps_every_change(
    spark: Any, sql: Any, make_config: Any, racer: Any, tmp_path: Path, killed: str | None
) -> None:
    """A snapshot for another stream job of the lake (one started later, from the ledger)
    reads a table this stream captured from its CREATE. This stream's silver came from the
    binlog, not from that bronze, so it must not drop the changes those chunks hold. Killed
    after the CREATE's batch (before its checkpoint) or before the snapshot's ledger marks, the
    rerun converges; a stream between the killed snapshot and its rerun does not wait for it.
    (This job's own catch-up reads nothing of the table: the test after this one.)"""
    seed_items(sql, 50)
    config = make_config()
    other_job = make_config(stream={"job_name": "backfill"})
    commands.snapshot(spark, config)
    _stream(spark, config)
    sql(ITEMS.replace("items", "fresh"))
    _insert_fresh(sql, 1, 400)
    if killed == "stream_before_checkpoint_commit":  # what the rerun meets: crashed in-process
        with crashed_at(*KILL_POINTS[killed]):
            _stream(spark, config)
    _stream(spark, config)
    _insert_fresh(sql, 401, 700)
    sql("UPDATE fresh SET qty = qty + 100 WHERE id % 3 = 0")
    sql("DELETE FROM fresh WHERE id % 7 = 0")
    with racer("fresh"):
        if killed == "snapshot_between_bronze_and_ledger":
            config_file = write_config(other_job, tmp_path / "binlake.yml")
            finishing = ("binlake.snapshot.ledger:Ledger.mark_finished", "before", 1)
            run_killed_at(config_file, finishing, ["snapshot"])
            _stream(spark, config)
        assert commands.snapshot(spark, other_job).chunks_read >= 1
    _insert_fresh(sql, 701, 800)
    sql("UPDATE fresh SET note = 'late' WHERE id % 5 = 0")
    with racer("fresh"):
        _stream(spark, config)
    _stream(spark, config)
    assert_silver_is_source(spark, sql, config, "fresh")
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "fresh")


def test_the_catch_up_job_reads_nothing_of_a_table_its_stream_captured_from_its_create(
    spark: Any, sql: Any, make_config: Any, racer: Any
) -> None:
    """`binlake run` (the bundle's catch-up job: snapshot, then stream) after its stream took a
    new table in from its CREATE: silver already holds every row of it from the binlog. On an
    earlier commit the snapshot planned and read the whole table anyway (wasted reads on the
    source, a bronze copy nothing uses). Now it reads none of it, writes racing, and silver
    stays exact; `--reset` still snapshots it."""
    seed_items(sql, 50)
    config = make_config()
    commands.run(spark, config)
    sql(ITEMS.replace("items", "fresh"))
    _insert_fresh(sql, 1, 300)
    _stream(spark, config)
    sql("UPDATE fresh SET qty = qty + 1 WHERE id % 4 = 0")
    with racer("fresh"), racer("items"):
        commands.run(spark, config)
    fresh = f"{config.source.database}.fresh"
    assert not [c for c in Ledger(spark, ledger_path(config)).chunks() if c.table == fresh]
    assert "none: captured from its CREATE" in commands.status(config, lambda: spark)
    _stream(spark, config)
    assert_silver_is_source(spark, sql, config, "fresh")
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "fresh")
    reread = commands.snapshot(spark, config, ["fresh"], reset=True)
    assert reread.chunks_read >= 1
    _stream(spark, config)
    assert_silver_is_source(spark, sql, config, "fresh")


def test_stop_mode_stops_before_the_change_and_resumes_after_reset(
    spark: Any, sql: Any, make_config: Any, racer: Any
) -> None:
    seed_items(sql, 300)
    config = make_config(stream={"schema_changes": "stop"})
    commands.snapshot(spark, config)
    _stream(spark, config)
    sql("UPDATE items SET qty = 99 WHERE id <= 10")
    sql("ALTER TABLE items ADD COLUMN extra INT NULL")
    sql("UPDATE items SET qty = 100, extra = 1 WHERE id <= 5")
    with pytest.raises(SchemaChangeError) as stopped:
        _stream(spark, config)
    message = str(stopped.value)
    assert "items" in message and "ADD COLUMN extra" in message
    assert "--tables items --reset" in message
    silver = spark.read.format("delta").load(
        config.lake.path("silver", config.source.database, "items")
    )
    # Stopped before the DDL: the update before it landed, the one after it did not.
    assert {r["qty"] for r in silver.where("id <= 5").collect()} == {99}
    with racer():
        commands.snapshot(spark, config, ["items"], reset=True)
        _stream(spark, config)
    _stream(spark, config)
    assert "extra" in assert_silver_is_source(spark, sql, config, "items")


@pytest.mark.parametrize("on_unfollowable", ["stop", "resnapshot"])
def test_narrowing_resnapshots_the_table_or_stops_with_the_remedy(
    spark: Any, sql: Any, make_config: Any, on_unfollowable: str
) -> None:
    seed_items(sql, 50)
    config = make_config(stream={"on_unfollowable_ddl": on_unfollowable})
    commands.snapshot(spark, config)
    _stream(spark, config)
    sql("UPDATE items SET qty = qty + 1 WHERE id % 3 = 0")
    sql("ALTER TABLE items MODIFY price DECIMAL(6,2) NOT NULL")
    sql("UPDATE items SET price = 7.5 WHERE id % 4 = 0")
    if on_unfollowable == "stop":
        with pytest.raises(SchemaChangeError, match=r"price.*narrowing.*--reset"):
            _stream(spark, config)
    else:
        _stream(spark, config)
        assert_silver_is_source(spark, sql, config, "items")
        assert_changelog_holds_each_change_once(spark, config, "items")


def test_table_added_to_the_config_joins_without_losing_changes(
    spark: Any, sql: Any, make_config: Any, racer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The joining table's catch-up, large here (over a limit of 20 changes per task), is
    typed in several tasks like a large batch."""
    monkeypatch.setattr(spread, "CHANGES_PER_TASK", 20)
    merges = observed_merges(monkeypatch)
    seed_items(sql, 200, copy="later")
    config = make_config(source={"tables": ["items"]})
    commands.snapshot(spark, config)
    _stream(spark, config)
    wider = make_config(source={"tables": ["items", "later"]})  # the same lake
    # The stream keeps running on the old config while the new table is snapshotted.
    with racer("later"):
        _stream(spark, config)
        commands.snapshot(spark, wider)
        _stream(spark, config)
    with racer("later"):
        _stream(spark, wider)
    _stream(spark, wider)
    joined = next(m for m in merges if m.table.endswith(".later"))  # its catch-up's
    assert joined.changes is not None and joined.changes > 20, joined
    assert joined.partitions > 1, joined
    assert_silver_is_source(spark, sql, wider, "later")
    assert_silver_is_source(spark, sql, wider, "items")
    assert_changelog_holds_each_change_once(spark, wider, "later")


def test_reset_of_one_table_while_the_stream_keeps_running(
    spark: Any, sql: Any, make_config: Any, racer: Any
) -> None:
    seed_items(sql, 200, copy="other")
    config = make_config(stream={"trigger_interval": "1s"})
    commands.snapshot(spark, config)
    running = threading.Thread(target=commands.stream, args=(spark, config), daemon=True)
    running.start()
    tables = StreamTables(tables_path(config), ArrowFiles())
    qualified = f"{config.source.database}.items"
    with racer("items"), racer("other"):
        wait_for(lambda: qualified in tables.read())
        commands.snapshot(spark, config, ["items"], reset=True)
        # The running stream takes the table back once its new snapshot finished.
        wait_for(lambda: qualified in tables.read())
        time.sleep(3)
    for query in spark.streams.active:
        query.stop()
    running.join(timeout=120)
    _stream(spark, config)
    assert_silver_is_source(spark, sql, config, "items")
    assert_silver_is_source(spark, sql, config, "other")
    assert_changelog_holds_each_change_once(spark, config, "items")


@pytest.mark.parametrize("mode", ["lenient", "evolve"])
def test_columns_swapped_in_one_alter_keep_their_values(
    spark: Any, sql: Any, make_config: Any, racer: Any, mode: str
) -> None:
    """Issue 68 item 12: one ALTER swapping two columns' names (RENAME COLUMN, then CHANGE)
    renames both at once; silver moves each column's values with its name, for its rows so far
    and the rows streamed after the swap."""
    seed_items(sql, 400)
    config = make_config(stream={"schema_changes": mode})
    commands.snapshot(spark, config)
    _stream(spark, config)
    with racer():
        sql("ALTER TABLE items ADD COLUMN stock INT NOT NULL DEFAULT 0")
        sql("UPDATE items SET stock = id * 10")
        sql("ALTER TABLE items RENAME COLUMN qty TO stock, RENAME COLUMN stock TO qty")
        sql("UPDATE items SET stock = stock + 1000 WHERE id % 4 = 0")
        sql("ALTER TABLE items CHANGE name note VARCHAR(20) NULL, "
            "CHANGE note name VARCHAR(20) NULL")  # fmt: skip
        sql("UPDATE items SET note = CONCAT(note, '!') WHERE id % 3 = 0")
    _stream(spark, config)
    assert_silver_is_source(spark, sql, config, "items")
    with racer():
        sql("UPDATE items SET stock = stock + 1, name = 'later' WHERE id % 5 = 0")
    _stream(spark, config)
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")


def test_a_column_named_like_binlakes_own_stops_the_stream_with_its_remedy(
    spark: Any, sql: Any, make_config: Any
) -> None:
    """A column the source adds under one of the names binlake gives silver's own columns
    (`_deleted_at` under soft deletes) stops the stream before it, with the remedy (a reset,
    as test_row_filters runs it); a table that has one when it is snapshotted is refused before
    any work."""
    seed_items(sql, 20)
    config = make_config(silver={"deletes": "soft"}, stream={"trigger_interval": "1s"})
    commands.snapshot(spark, config)
    with running_stream(spark, config) as running:
        sql("ALTER TABLE items ADD COLUMN _deleted_at DATETIME NULL")
        sql("UPDATE items SET qty = 100 WHERE id = 1")
        running.join(timeout=120)
    stop = r"items changed at .*'_deleted_at', a column binlake .* --tables items --reset"
    assert isinstance(running.raised, SchemaChangeError), running.raised
    assert running.raised.exit_code == 7 and re.search(stop, str(running.raised))
    silver = spark.read.format("delta").load(config.lake.path("silver", config.source.database,
                                                              "items"))  # fmt: skip
    assert silver.where("id = 1").first()["qty"] == 1  # the update after the ADD: not applied

    sql("ALTER TABLE items CHANGE _deleted_at _binlake_offset DATETIME NULL")
    with pytest.raises(ConfigError, match=r"items has a column '_binlake_offset'"):
        commands.snapshot(spark, config, ["items"], reset=True)
