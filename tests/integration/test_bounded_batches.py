"""A backlog drains as a series of bounded batches (`stream.max_bytes_per_batch`).

A stream paused while the source keeps writing meets a backlog: before, it read everything up to
the binlog head as one batch (one partition, one MERGE per table), whatever its size. Now each
batch reads at most the configured binlog bytes and ends between two transactions; a single
transaction larger than the bound is a batch of its own. The drain runs with a writer racing it,
and the oracle for "between two transactions" is the server's own binlog: every batch that ends
before the head ends where a transaction's commit event ends. The event log holds each batch,
where it ended.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import QueryEvent, XidEvent

from binlake import jobs
from binlake.events import event_table
from binlake.lake_files import ArrowFiles
from binlake.layout import checkpoint_path
from binlake.offsets import BinlogOffset, bytes_behind
from binlake.sink import batch_end
from binlake.snapshot import batch_ids
from binlake.source import binlog_sizes, current_offset

from .items import (
    Racer,
    assert_changelog_holds_each_change_once,
    assert_silver_is_source,
    seed_items,
)
from .replay import connect

pytestmark = pytest.mark.integration

BUDGET = 32 * 1024  # bytes per batch: the backlog below is several times that
BINLOG_SERVER_ID = 991_100  # the test's own binlog read; outside every make_config range


def _commit_ends(
    db_env: dict[str, str], start: BinlogOffset, stop: BinlogOffset
) -> set[BinlogOffset]:
    """Where each transaction in `(start, stop]` ends, read from the server's binlog: the end
    of its XID event (InnoDB) or of its COMMIT or DDL statement."""
    stream = BinLogStreamReader(
        connection_settings={
            "host": "127.0.0.1",
            "port": int(db_env["BINLAKE_SOURCE_PORT"]),
            "user": "binlake",
            "password": db_env["BINLAKE_SOURCE_PASSWORD"],
        },
        server_id=BINLOG_SERVER_ID, resume_stream=True, log_file=start.file,
        log_pos=start.pos, blocking=False, only_events=[XidEvent, QueryEvent],
    )  # fmt: skip
    ends = set()
    try:
        for event in stream:
            offset = BinlogOffset(stream.log_file, stream.log_pos)
            if offset > stop:
                break
            if isinstance(event, XidEvent) or event.query != "BEGIN":
                ends.add(offset)
    finally:
        stream.close()
    return ends


def _batch_ends(config: Any) -> list[BinlogOffset]:
    files, checkpoint = ArrowFiles(), checkpoint_path(config)
    ids = sorted(batch_ids(files, f"{checkpoint}/commits"))
    ends = [batch_end(files, checkpoint, i) for i in ids]
    assert all(end is not None for end in ends)
    return [end for end in ends if end is not None]


def test_a_backlog_drains_in_bounded_batches_that_end_between_transactions(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    make_config: Callable[..., Any],
    sql: Callable[..., Any],
) -> None:
    seed_items(sql, 800)
    config = make_config(
        snapshot={"chunk_size": 200},
        stream={"trigger_interval": "1s", "max_bytes_per_batch": BUDGET},
        lake={"event_log": True},
    )
    jobs.run(spark, config)  # snapshot, then a first catch-up
    before = _batch_ends(config)
    with Racer(db_env, database) as racer:  # the backlog: the stream is not running
        while racer.statements < 500:
            racer.stop.wait(0.1)
    # One transaction of ~60 KB: more than the bound, so a batch of its own.
    sql("UPDATE items SET qty = qty + 1, name = CONCAT(name, '-big')")
    with Racer(db_env, database, pause=0.2):  # writes race the drain
        jobs.stream(spark, config, available_now=True)
        with connect(db_env) as conn:
            head, sizes = current_offset(conn), binlog_sizes(conn)
    jobs.stream(spark, config, available_now=True)  # what the racer wrote during the drain

    ends = _batch_ends(config)[len(before) - 1 :]
    commits = _commit_ends(db_env, ends[0], ends[-1])
    spans = [bytes_behind(a, b, sizes) for a, b in itertools.pairwise(ends)]
    assert len(spans) >= 5, spans
    for (a, b), span in zip(itertools.pairwise(ends), spans, strict=True):
        inside = [c for c in commits if a < c <= b]
        assert b in commits or b >= head, f"batch ({a}, {b}] ends inside a transaction"
        assert span <= BUDGET or len(inside) == 1, f"batch ({a}, {b}]: {span} bytes"
    assert max(spans) > BUDGET, "the large transaction was split or never met"
    logged = event_table(config).read(spark).where("kind = 'stream_batch'").orderBy("ts")
    assert [BinlogOffset(b.file, b.position) for b in logged.collect()] == _batch_ends(config)
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")
