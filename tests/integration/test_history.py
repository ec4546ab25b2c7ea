"""`silver.history: scd2`: silver keeps every version of each row. Under writes racing the
snapshot and the stream, a batch applied and then lost before its checkpoint commit (replayed),
and a re-snapshot of the table, the history equals a replay of bronze's snapshot rows and the
changelog, and the current versions equal the source (chispa)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from itertools import pairwise
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from binlake.errors import ConfigError, LakeError
from binlake.jobs import commands
from binlake.jobs.status import gather_status
from binlake.lake.stream_tables import StreamTables
from binlake.lake.tables import lake_table
from binlake.silver.merge import offset_token
from binlake.snapshot import task as snapshot_module

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .items import Racer, running_stream, seed_items, stream_losing_its_commit, wait_for
from .replay import connect

pytestmark = pytest.mark.integration

DATA = ["id", "name", "qty", "price", "note"]
VERSION = [*DATA, "_binlake_offset", "_valid_from", "_valid_to", "_is_current"]


def _snapshot_rows(spark: Any, config: Any, table: str) -> DataFrame:
    """Bronze's rows of `table` as versions start from them: at their chunk's HW."""
    bronze = lake_table(config.lake, "bronze", config.source.database, table).read(spark)
    hw = offset_token(F.col("_hw_file"), F.col("_hw_pos"), F.lit(0))
    return bronze.select(*DATA, hw.alias("_binlake_offset")).localCheckpoint()


def _assert_history_replays(spark: Any, config: Any, table: str, snapshot_rows: DataFrame) -> None:
    history = lake_table(config.lake, "silver", config.source.database, table).read(spark)
    assert_df_equality(
        history.select(*VERSION),
        _replayed_history(spark, config, table, snapshot_rows),
        ignore_row_order=True,
        ignore_nullable=True,
    )


def _replayed_history(spark: Any, config: Any, table: str, snapshot_rows: DataFrame) -> DataFrame:
    """The versions a replay of `snapshot_rows` (valid since before capture) and then the
    changelog gives: each insert or update starts one, ended by its key's next change."""
    changelog = lake_table(
        config.lake, "bronze", config.source.database, f"{table}__changelog"
    ).read(spark)
    changes = changelog.select(
        "_op",
        "_binlake_offset",
        F.col("_commit_ts").alias("_valid_from"),
        *[
            F.when(F.col("_op") == "delete", F.col(f"_before.{c}"))
            .otherwise(F.col(f"_after.{c}"))
            .alias(c)
            for c in DATA
        ],
    )
    start = snapshot_rows.select(
        F.lit("snapshot").alias("_op"),
        "_binlake_offset",
        F.lit(None).cast("timestamp").alias("_valid_from"),
        *DATA,
    )
    key = Window.partitionBy("id").orderBy("_binlake_offset")
    replay = (
        start.unionByName(changes)
        .withColumn("_valid_to", F.lead("_valid_from").over(key))
        .withColumn("_is_current", F.lead("_binlake_offset").over(key).isNull())
    )
    return replay.where("_op != 'delete'").select(*VERSION)


def test_history_equals_a_replay_of_the_changelog_across_a_replay_and_a_resnapshot(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    sql: Callable[..., Any],
    make_config: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    seed_items(sql, 400)
    config = make_config(
        silver={"history_tables": {"it.*": "scd2"}},
        snapshot={"chunk_size": 50},
        stream={"trigger_interval": "1s"},
    )

    with Racer(db_env, database):  # inserts, updates, deletes and key moves
        commands.snapshot(spark, config)
        first_snapshot = _snapshot_rows(spark, config, "items")
        commands.stream(spark, config, available_now=True)
        stream_losing_its_commit(spark, config, monkeypatch)
        commands.stream(spark, config, available_now=True)  # replays the lost batch first
    commands.stream(spark, config, available_now=True)

    silver = lake_table(config.lake, "silver", database, "items")
    columns = assert_silver_is_source(spark, sql, config, "items", where="_is_current")
    assert columns[-5:] == [
        "_binlake_offset",
        "_valid_from",
        "_valid_to",
        "_is_current",
        "_binlake_end_offset",
    ]
    assert_changelog_holds_each_change_once(spark, config, "items")
    assert commands.verify(spark, config) == 0  # verify compares the current versions
    history = silver.read(spark)
    assert history.where("NOT _is_current").count() > 50, "the racer changed too few rows"
    _assert_history_replays(spark, config, "items", first_snapshot)

    # A re-snapshot joins the history: rows changed since (here, behind the stream's back in
    # the lake's view: the stream is not running) end their version and start one; the rest
    # keep theirs.
    versions = history.count()
    live = [id_ for (id_,) in sql("SELECT id FROM items ORDER BY id LIMIT 8")]
    renamed, deleted = live[:5], live[5:]
    sql("UPDATE items SET name = 'renamed' WHERE id IN (%s, %s, %s, %s, %s)", renamed)
    sql("DELETE FROM items WHERE id IN (%s, %s, %s)", deleted)
    commands.snapshot(spark, config, tables=["items"], reset=True)
    commands.stream(spark, config, available_now=True)
    assert_silver_is_source(spark, sql, config, "items", where="_is_current")
    after = silver.read(spark)
    assert after.count() == versions + len(renamed)  # one new version each; nothing lost
    assert after.groupBy("id").agg(F.count_if("_is_current").alias("n")).where("n > 1").isEmpty()
    # The join ended the 8 keys' versions and started the renamed keys' at one time, its own.
    joined = after.where(F.col("id").isin(live))
    (ended_at,) = {r[1] for r in joined.groupBy("id").agg(F.max("_valid_to")).collect()}
    current = joined.where("_is_current").collect()
    assert sorted(r["id"] for r in current) == renamed
    assert {(r["name"], r["_valid_from"]) for r in current} == {("renamed", ended_at)}

    # TRUNCATE ends every current version at its own position and commit time.
    live_versions = after.where("_is_current").count()
    sql("TRUNCATE TABLE items")
    sql("INSERT INTO items (id, name, qty, price) VALUES (1, 'after the truncate', 1, 1.00)")
    commands.stream(spark, config, available_now=True)
    assert_silver_is_source(spark, sql, config, "items", where="_is_current")
    ended = silver.read(spark).where("_binlake_end_offset IS NOT NULL")
    ends = ended.groupBy("_binlake_end_offset", "_valid_to").count().orderBy("_binlake_end_offset")
    last_end = ends.collect()[-1]
    assert last_end["count"] == live_versions
    assert last_end["_valid_to"] >= ended_at


def test_a_join_repeated_after_a_crash_restores_the_history_it_began_from(
    spark: Any, sql: Any, make_config: Any, racer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table joining the running job crashes after its snapshot rows and catch-up changes
    reached silver, before the job recorded the join: the join runs again. Compared with the
    current versions, those rows would end the catch-up's versions and start the snapshot's
    again; the join restores silver to where it began instead, and the history stays a replay."""
    seed_items(sql, 300, copy="other")
    scd2 = {"history_tables": {"other": "scd2"}}
    config = make_config(source={"tables": ["items"]}, stream={"trigger_interval": "1s"})
    commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    both = make_config(
        source={"tables": ["items", "other"]},
        silver=scd2,
        stream={"trigger_interval": "1s"},
        snapshot={"chunks_per_commit": 1},
    )
    other = f"{config.source.database}.other"
    update = StreamTables.update
    read_and_commit = snapshot_module.read_and_commit
    crashed: list[bool] = []
    changed: list[Any] = []

    def crash_before_recording_the_join(self: StreamTables, change: Any) -> Any:
        if other in change({}) and not crashed:
            crashed.append(True)
            raise RuntimeError("killed before the join was recorded")
        return update(self, change)

    def change_the_first_chunk_after_it(*args: Any) -> Any:
        """The racer alone may leave nothing between the chunks' high watermarks (it failed so
        in CI): rows of the first chunk change after its HW and before the next chunk's read,
        so the join has a catch-up to apply. `args` are `read_and_commit`'s (spark, config,
        source, schema, batch, slot)."""
        results = read_and_commit(*args)
        batch = args[4]
        if batch[0].table == other and batch[0].range.start is None and not changed:
            sql("UPDATE `other` SET note = 'caught up' WHERE id < %s", (batch[-1].range.end,))
            changed.append(batch[-1].range.end)
        return results

    with racer("other"), monkeypatch.context() as patched:
        patched.setattr(StreamTables, "update", crash_before_recording_the_join)
        patched.setattr(snapshot_module, "read_and_commit", change_the_first_chunk_after_it)
        with running_stream(spark, both) as stream:
            commands.snapshot(spark, both)  # `other` joins the running stream when it finishes
            wait_for(lambda: not stream.is_alive())
    assert crashed and changed
    silver = lake_table(config.lake, "silver", config.source.database, "other")
    assert silver.read(spark).where("note = 'caught up'").count() > 0, "no catch-up"
    commands.stream(spark, both, available_now=True)
    assert_silver_is_source(spark, sql, both, "other", where="_is_current")
    assert_changelog_holds_each_change_once(spark, both, "other")
    _assert_history_replays(spark, both, "other", _snapshot_rows(spark, both, "other"))


def test_a_latest_silver_turns_into_history_and_history_is_never_read_as_latest(
    spark: Any, sql: Callable[..., Any], make_config: Any
) -> None:
    """Made under soft deletes: the live rows become current versions, the deleted one a
    version ended at its delete, and `_deleted_at` goes."""
    seed_items(sql, 50)
    latest = make_config(stream={"trigger_interval": "1s"}, silver={"deletes": "soft"})
    commands.run(spark, latest)
    sql("DELETE FROM items WHERE id = 7")
    commands.stream(spark, latest, available_now=True)
    deleted_at = lake_table(latest.lake, "silver", latest.source.database, "items").read(spark)
    (seven,) = deleted_at.where("id = 7").collect()
    history = make_config(
        stream={"trigger_interval": "1s"}, silver={"deletes": "soft", "history": "scd2"}
    )
    sql("UPDATE items SET name = 'changed' WHERE id = 3")

    commands.stream(spark, history, available_now=True)

    silver = lake_table(history.lake, "silver", history.source.database, "items").read(spark)
    assert "_deleted_at" not in silver.columns
    assert_silver_is_source(spark, sql, history, "items", where="_is_current")
    three = silver.where("id = 3").orderBy("_binlake_offset").collect()
    assert [(r["name"], r["_is_current"]) for r in three] == [("item3", False), ("changed", True)]
    assert three[0]["_valid_from"] is None  # a row from before: valid since before the history
    (ended,) = silver.where("id = 7").collect()
    assert (ended["_is_current"], ended["_valid_to"]) == (False, seven["_deleted_at"])
    (items,) = gather_status(history, lambda: spark).tables
    assert (items.silver_rows, items.silver_versions) == (49, 51)  # status counts both
    with pytest.raises(LakeError, match=r"keeps every version of its rows .* set silver.history"):
        commands.stream(spark, latest, available_now=True)


def test_history_tables_naming_no_table_is_refused_with_the_closest_name(
    spark: Any, sql: Callable[..., Any], make_config: Any
) -> None:
    seed_items(sql, 10)
    config = make_config(silver={"history_tables": {"itmes": "scd2"}})
    with pytest.raises(
        ConfigError, match=r"'itmes', which matches no captured table \(did you mean 'items'\?\)"
    ):
        commands.snapshot(spark, config)


def _lock_waiter_commits_after_the_holder(db_env: dict[str, str], database: str) -> None:
    """Session `holder` locks row 1001 in an open transaction; an autocommit UPDATE of it (the
    waiter) starts and waits for the lock; two seconds later the holder updates the row and
    commits, and the waiter's UPDATE runs and commits right after. The binlog holds the holder's
    transaction first, the waiter's second: every event of the waiter carries its statement's
    start, two seconds before the holder's commit."""
    with connect(db_env, database) as holder, holder.cursor() as locking:
        locking.execute("BEGIN")
        locking.execute("SELECT * FROM items WHERE id = 1001 FOR UPDATE")

        def wait_then_update() -> None:
            with connect(db_env, database) as waiter, waiter.cursor() as cur:
                cur.execute("UPDATE items SET name = 'waiter' WHERE id = 1001")

        waiting = threading.Thread(target=wait_then_update)
        waiting.start()
        time.sleep(2.2)  # commit times are whole seconds: the two statements' differ by 2
        assert waiting.is_alive(), "the waiter did not wait for the lock"
        locking.execute("UPDATE items SET name = 'holder' WHERE id = 1001")
        locking.execute("COMMIT")
        waiting.join(timeout=30)
    assert not waiting.is_alive()


def test_a_statement_that_waited_on_a_lock_starts_its_version_at_its_commit(
    spark: Any, db_env: dict[str, str], database: str, sql: Callable[..., Any], make_config: Any
) -> None:
    """Versions start at their changes' commit times: a statement that waited on a row lock and
    committed after the lock's holder changed the row starts its version no earlier than the
    holder's version, so no interval is inverted and an as-of query (as documented) finds one
    version of the key at every time."""
    seed_items(sql, 10)
    # The insert and the holder's update in one batch, the waiter's in the next: it starts from
    # the holder's commit time, which the first batch's end carries (the checkpoint holds it
    # across a restart).
    stream = {"trigger_interval": "1s", "max_changes_per_batch": 2}
    config = make_config(silver={"history": "scd2"}, stream=stream)
    commands.snapshot(spark, config)
    sql("INSERT INTO items VALUES (1001, 'new', 1, 1.25, NULL)")
    _lock_waiter_commits_after_the_holder(db_env, database)

    commands.stream(spark, config, available_now=True)

    assert_silver_is_source(spark, sql, config, "items", where="_is_current")
    silver = lake_table(config.lake, "silver", database, "items").read(spark)
    versions = silver.where("id = 1001").orderBy("_binlake_offset").collect()
    assert [v["name"] for v in versions] == ["new", "holder", "waiter"]
    bounds = {v["_valid_from"] for v in versions} | {v["_valid_to"] for v in versions} - {None}
    instants = [
        (t,) for t in sorted({b + timedelta(seconds=s) for b in bounds for s in (-1, 0, 1)})
    ]
    as_of = (  # the documented as-of query, at each instant around the versions' bounds
        spark.createDataFrame(instants, "at timestamp")
        .join(
            silver.where("id = 1001"),
            (F.col("_valid_from") <= F.col("at"))
            & (F.coalesce("_valid_to", F.current_timestamp()) > F.col("at")),
            "left",
        )
        .groupBy("at")
        .agg(F.collect_list("name").alias("found"))
        .collect()
    )
    first = versions[0]["_valid_from"]
    assert {r["at"]: r["found"] for r in as_of if len(r["found"]) != (r["at"] >= first)} == {}
    for version, following in pairwise(versions):
        assert version["_valid_to"] == following["_valid_from"]
        assert version["_valid_from"] <= version["_valid_to"], f"inverted: {version}"
    changelog = lake_table(config.lake, "bronze", database, "items__changelog").read(spark)
    committed = [r["_commit_ts"] for r in changelog.orderBy("_binlake_offset").collect()]
    assert committed == sorted(committed), "commit times go back in binlog order"
