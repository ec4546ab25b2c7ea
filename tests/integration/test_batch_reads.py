"""A large batch is read by several Spark tasks side by side (`stream.read_tasks`,
`stream.bytes_per_read_task`).

A batch was one read of the binlog, decoded by one task while the other cores waited. Now a
batch of several times `bytes_per_read_task` is cut into reads of about equal bytes, each from a
transaction start, each with a replica id of its own; a DDL of the batch ends the cutting (the
schema history records it only once the batch applied it, so a read starting past it would
decode with the schema before). The oracles: the server's own binlog for where transactions
end, the whole range read as one for what the reads must yield together, and the source itself
for silver after a racing catch-up.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from binlake.jobs import commands
from binlake.model.offsets import BinlogOffset
from binlake.mysql.server import current_offset
from binlake.silver.change_record import DDL
from binlake.silver.spread import CHANGES_PER_TASK
from binlake.stream import batch_summary as summaries
from binlake.stream.batch_summary import batch_summary
from binlake.stream.binlog_source import (
    BinlogRange,
    BinlogStreamReader,
    StreamSpec,
    binlog_source,
    read_range,
)
from binlake.stream.task import stream_spec

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .items import Racer, observed_merges, seed_items
from .replay import commit_ends, connect

pytestmark = pytest.mark.integration

READ_BYTES = 4096  # the fewest binlog bytes per read: the backlogs below are many times that


def _head(db_env: dict[str, str]) -> BinlogOffset:
    with connect(db_env) as conn:
        return current_offset(conn)


def _backlog_around_a_ddl(db_env: dict[str, str], database: str, sql: Any) -> None:
    """Racing writes, a DDL of the captured table, then racing writes in its new schema."""
    for _ in range(2):
        with Racer(db_env, database) as racer:
            while racer.statements < 150:
                racer.stop.wait(0.05)
        if not sql("SHOW COLUMNS FROM items LIKE 'colour'"):
            sql("ALTER TABLE items ADD COLUMN colour VARCHAR(12) DEFAULT 'red'")


def _snapshotted(spark: Any, make_config: Callable[..., Any], sql: Any) -> Any:
    """A snapshotted table: the schema history and the job's tables the reads plan from."""
    seed_items(sql, 400)
    config = make_config(snapshot={"chunk_size": 200}, stream={"bytes_per_read_task": READ_BYTES})
    commands.run(spark, config)
    return config


def _rows(spec: StreamSpec, read: BinlogRange) -> list[dict[str, Any]]:
    return [row for batch in read_range(spec, read) for row in batch.to_pylist()]


def test_a_batch_is_cut_between_transactions_into_reads_that_yield_what_one_read_does(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    make_config: Callable[..., Any],
    sql: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = _snapshotted(spark, make_config, sql)
    start = _head(db_env)
    _backlog_around_a_ddl(db_env, database, sql)
    end = _head(db_env)
    spec = stream_spec(config, config.source, start, {})

    reads = BinlogStreamReader(spec).partitions(start.to_dict(), end.to_dict())
    whole = _rows(spec, spec.plan(start, end))
    (ddl,) = [BinlogOffset(r["_file"], r["_pos"]) for r in whole if r["_op"] == DDL]

    assert all(isinstance(r, BinlogRange) for r in reads)
    assert len(reads) >= 2, "a backlog of many times bytes_per_read_task was read whole"
    assert [r.server_id for r in reads] == list(config.stream_read_ids[: len(reads)])
    assert len(set(config.stream_read_ids)) == len(config.stream_read_ids) == 4
    assert reads[0].start == start and reads[-1].end == end
    cuts = [r.start for r in reads[1:]]
    assert cuts == [r.end for r in reads[:-1]], "the reads are not contiguous"
    commits = commit_ends(db_env, start, end)
    assert all(cut in commits for cut in cuts), "a read starts inside a transaction"
    assert all(cut < ddl for cut in cuts), "a read starts past the batch's DDL"
    in_reads = [_rows(spec, r) for r in reads]
    assert [row for rows in in_reads for row in rows] == whole
    assert sum(r["_op"] == "update" for r in whole) > 100
    # As Spark reads it (a stream's micro-batch, a joining table's catch-up), in those reads:
    # the summary counts each read's changes, the most of which tell where a table's changes
    # need spreading over tasks before they are typed.
    bounded = replace(spec, name=f"{spec.name}_bounded")
    spark.dataSource.register(binlog_source(bounded, spec.plan(start, end)))
    batch = spark.read.format(bounded.name).load()
    assert batch.rdd.getNumPartitions() == len(reads)
    per_read = [Counter(r["_table"] for r in rows if r["_op"] != DDL) for rows in in_reads]
    # Summarised by Spark, and collected whole as a small batch is: the same summary.
    by_spark = batch_summary(batch)
    monkeypatch.setattr(summaries, "SMALL_BATCH_RECORDS", len(whole) - 1)  # one record too many
    assert batch_summary(batch, collect=True).records is None
    monkeypatch.setattr(summaries, "SMALL_BATCH_RECORDS", len(whole))
    collected = batch_summary(batch, collect=True)
    assert by_spark.records is None and collected.records is not None
    for summary in (by_spark, collected):
        assert summary.counts == dict(sum(per_read, Counter()))
        assert summary.most_in_a_read == {t: max(c[t] for c in per_read) for t in summary.counts}
        assert [d.offset for d in summary.ddl] == [ddl]
    assert (collected.newest, collected.ddl) == (by_spark.newest, by_spark.ddl)
    offsets = {t: sorted(r["_offset"] for r in rows) for t, rows in collected.records.items()}
    expected: dict[str, list[str]] = {}
    for r in whole:
        if r["_op"] != DDL:
            expected.setdefault(r["_table"], []).append(r["_offset"])
    assert offsets == {t: sorted(o) for t, o in expected.items()}


def test_a_catch_up_read_by_several_tasks_with_writes_racing_lands_each_change_once(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    make_config: Callable[..., Any],
    sql: Callable[..., Any],
) -> None:
    config = _snapshotted(spark, make_config, sql)
    _backlog_around_a_ddl(db_env, database, sql)
    with Racer(db_env, database, pause=0.05):  # writes race the catch-up's reads
        commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)  # what the racer wrote meanwhile
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")


def test_a_joining_tables_catch_up_is_read_by_several_tasks_with_writes_racing(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    make_config: Callable[..., Any],
    sql: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A table added to a running job catches up from its own high watermarks in one pass over
    the binlog: cut like a micro-batch into reads side by side, each holding fewer changes
    than `CHANGES_PER_TASK`, so its MERGE source is in as many partitions with no shuffle."""
    seed_items(sql, 400, copy="later")
    small_reads = {"bytes_per_read_task": READ_BYTES}
    narrow = make_config(source={"tables": ["items"]}, stream=small_reads)
    commands.run(spark, narrow)
    wider = make_config(source={"tables": ["items", "later"]}, stream=small_reads)
    with Racer(db_env, database, "later", pause=0.002) as racer:
        commands.snapshot(spark, wider)  # its chunks' binlog windows race
        backlog = racer.statements + 300  # then a backlog past its high watermarks
        while racer.statements < backlog:
            racer.stop.wait(0.05)
    # The stream runs on past the backlog before the table joins: its catch-up holds it all.
    commands.stream(spark, narrow, available_now=True)
    merges = observed_merges(monkeypatch)
    with Racer(db_env, database, "later", pause=0.05):
        commands.stream(spark, wider, available_now=True)
    commands.stream(spark, wider, available_now=True)
    caught_up = next(m for m in merges if m.table.endswith(".later"))
    assert caught_up.changes is not None and 300 <= caught_up.changes < CHANGES_PER_TASK
    assert caught_up.partitions > 1, "the catch-up was read by one task"
    for table in ("later", "items"):
        assert_silver_is_source(spark, sql, wider, table)
    assert_changelog_holds_each_change_once(spark, wider, "later")
