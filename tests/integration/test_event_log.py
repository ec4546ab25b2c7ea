"""The event log (`_system/events`): what each job did, as rows a user can query.

One lifecycle with a writer racing it: a stream started before any snapshot (an error), the
snapshot, catch-ups, a column added, a table reset and joined again. Each kind of event is
checked against the lake's own record of the same thing (the summaries, the checkpoint, the
schema history, the job's table list, the changelog), not by counting rows alone.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from typing import Any

import pytest

from binlake.errors import SnapshotIncompleteError
from binlake.jobs import commands
from binlake.lake.event_log import EVENT_SCHEMA, EventLog, event
from binlake.lake.files import ArrowFiles
from binlake.lake.paths import tables_path
from binlake.lake.stream_tables import StreamTables
from binlake.lake.tables import PathTable, lake_table
from binlake.model.offsets import BinlogOffset
from binlake.mysql.schema_history import schema_history
from binlake.stream.task import checkpoint_offset

from .assertions import assert_silver_is_source
from .items import Racer, logged_events, seed_items

pytestmark = pytest.mark.integration


def _offset(row: Any) -> BinlogOffset:
    return BinlogOffset(row.file, row.position)


def test_the_event_log_records_each_step_of_a_lifecycle_as_the_lake_does(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    make_config: Callable[..., Any],
    sql: Callable[..., Any],
) -> None:
    seed_items(sql, 600, copy="others")
    config = make_config(
        snapshot={"chunk_size": 100}, stream={"trigger_interval": "1s"}, lake={"event_log": True}
    )
    job, items, others = config.stream.job_name, f"{database}.items", f"{database}.others"
    with pytest.raises(SnapshotIncompleteError) as refused:
        commands.stream(spark, config, available_now=True)
    with Racer(db_env, database, pause=0.02):
        first = commands.snapshot(spark, config)
        commands.stream(spark, config, available_now=True)
    sql("ALTER TABLE items ADD COLUMN color VARCHAR(10) NULL")
    sql("UPDATE items SET color = 'red' WHERE id < 50")
    commands.stream(spark, config, available_now=True)
    again = commands.snapshot(spark, config, ["others"], reset=True)
    commands.stream(spark, config, available_now=True)

    (error,) = logged_events(spark, config, "error")
    assert error.job == job and " ".join(str(refused.value).splitlines()) in error.message

    commits = logged_events(spark, config, "snapshot_commit")
    assert {t for c in commits for t in c.tables} == {items, others}
    assert sum(c.rows for c in commits) == first.rows + again.rows
    runs = logged_events(spark, config, "snapshot")
    assert [(r.job, r.rows) for r in runs] == [("snapshot", first.rows), ("snapshot", again.rows)]

    batches = logged_events(spark, config, "stream_batch")
    ends = [_offset(b) for b in batches]
    assert all(a <= b for a, b in itertools.pairwise(ends)), ends
    assert ends[-1] == checkpoint_offset(ArrowFiles(), config)
    changelog = lake_table(config.lake, "bronze", database, "items__changelog").read(spark)
    assert sum(b.rows for b in batches) == changelog.count() > 49
    assert all(b.lag_bytes is not None and b.lag_bytes >= 0 for b in batches)
    assert (batches[-1].lag_bytes, batches[-1].lag_s) == (0, 0.0)  # nothing wrote since
    starts = logged_events(spark, config, "stream_start")
    assert len(starts) == 3
    for start in starts[1:]:  # each resumed where the run before it ended
        assert _offset(start) == max(_offset(b) for b in batches if b.ts < start.ts)

    (ddl,) = logged_events(spark, config, "ddl_applied")
    assert ddl.tables == [items] and "ADD COLUMN color" in ddl.message
    assert _offset(ddl) == schema_history(spark, config).entries(items)[-1].offset
    (reset,) = logged_events(spark, config, "table_reset")
    assert (reset.job, reset.tables) == ("snapshot", [others])
    (joined,) = logged_events(spark, config, "table_joined")
    assert joined.tables == [others]
    assert _offset(joined) == StreamTables(tables_path(config), ArrowFiles()).read()[others]
    assert_silver_is_source(spark, sql, config, "items")
    assert_silver_is_source(spark, sql, config, "others")


def test_a_replayed_batch_appends_its_events_once(spark: Any, tmp_path: Any) -> None:
    table = PathTable(str(tmp_path / "events"))
    handler = EventLog(spark, table, "job", background=False)
    logger = logging.getLogger("binlake.stream.sink")
    for _ in range(2):  # the batch, then Spark's replay of it after a crash
        line = logger.makeRecord(
            logger.name, logging.INFO, __file__, 0, "batch %d applied", (7,), None,
            extra=event("stream_batch", rows=3, txn=("binlake-stream-q", 7)),
        )  # fmt: skip
        assert handler.handle(line)
    written = table.read(spark)
    assert [f.name for f in written.schema] == EVENT_SCHEMA.names
    rows = written.select("job", "kind", "rows", "message").collect()
    assert [tuple(r) for r in rows] == [("job", "stream_batch", 3, "batch 7 applied")]
