"""A backlog drains as a series of bounded batches (`stream.max_bytes_per_batch`,
`stream.max_changes_per_batch`).

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

from binlake.jobs import commands
from binlake.lake.event_log import event_table
from binlake.lake.files import ArrowFiles, batch_ids
from binlake.lake.paths import checkpoint_path
from binlake.model.offsets import BinlogOffset, bytes_behind
from binlake.mysql.server import binlog_sizes, current_offset
from binlake.stream.sink import batch_end

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .items import Racer, logged_events, seed_items
from .replay import commit_ends, connect

pytestmark = pytest.mark.integration

BUDGET = 32 * 1024  # bytes per batch: the backlog below is several times that


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
    commands.run(spark, config)  # snapshot, then a first catch-up
    before = _batch_ends(config)
    with Racer(db_env, database) as racer:  # the backlog: the stream is not running
        while racer.statements < 500:
            racer.stop.wait(0.1)
    # One transaction of ~60 KB: more than the bound, so a batch of its own.
    sql("UPDATE items SET qty = qty + 1, name = CONCAT(name, '-big')")
    with Racer(db_env, database, pause=0.2):  # writes race the drain
        commands.stream(spark, config, available_now=True)
        with connect(db_env) as conn:
            head, sizes = current_offset(conn), binlog_sizes(conn)
    commands.stream(spark, config, available_now=True)  # what the racer wrote during the drain

    ends = _batch_ends(config)[len(before) - 1 :]
    commits = commit_ends(db_env, ends[0], ends[-1])
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


CHANGES = 20  # row changes per batch: the racer's backlog is several times that


def test_a_change_bound_counts_the_captured_tables_changes_alone(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    make_config: Callable[..., Any],
    sql: Callable[..., Any],
) -> None:
    """`stream.max_changes_per_batch`: the racer writes one change per transaction, so every
    batch that ends before the binlog head holds exactly the bound, however many rows of a
    table the job does not capture lie between (60 per transaction: counted, each would end a
    batch early); a transaction of more changes than the bound is a batch of its own."""
    seed_items(sql, 400)
    sql("CREATE TABLE noise (id INT PRIMARY KEY, note VARCHAR(300))")
    config = make_config(
        source={"tables": ["items"]},
        snapshot={"chunk_size": 200},
        stream={"max_changes_per_batch": CHANGES, "max_bytes_per_batch": None},
        lake={"event_log": True},
    )
    commands.run(spark, config)
    done = len(logged_events(spark, config, "stream_batch"))
    with Racer(db_env, database, pause=0.005) as racer:  # the backlog
        for block in range(4):
            first = block * 60
            rows = ", ".join(f"({first + i}, REPEAT('n', 300))" for i in range(60))
            sql(f"INSERT INTO noise VALUES {rows}")
            while racer.statements < 30 * (block + 1):
                racer.stop.wait(0.05)
    sql("UPDATE items SET qty = qty + 1")  # one transaction of ~400 changes
    sql("INSERT INTO noise VALUES (1000, 'after')")  # so its batch ends before `head`
    with Racer(db_env, database, pause=0.5):  # writes race the drain
        # The drain ends at the head it finds when it starts, at or after this one: a batch
        # that ends before it is not the drain's last (which ends wherever the head was).
        with connect(db_env) as conn:
            head = current_offset(conn)
        commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)

    batches = [
        (BinlogOffset(b.file, b.position), b.rows)
        for b in logged_events(spark, config, "stream_batch")[done:]
    ]
    full = [rows for end, rows in batches if end < head]
    assert len(full) >= 6, full
    # The batch before the large transaction ends where it begins, however short it is then.
    large = max(full)
    assert large > 300, full
    at = full.index(large)
    assert 0 < full[at - 1] <= CHANGES, full
    assert full[: at - 1] + full[at + 1 :] == [CHANGES] * (len(full) - 2), full
    # Within both bounds, a catch-up is one batch up to the head (it used to end at the start
    # of the range's last transaction, and read that one as a batch of its own).
    done = len(logged_events(spark, config, "stream_batch"))
    for key in range(5):
        sql("INSERT INTO items (id, name, qty, price) VALUES (%s, 'tail', 1, 1.50)", (900 + key,))
    commands.stream(spark, config, available_now=True)
    assert [b.rows for b in logged_events(spark, config, "stream_batch")[done:]] == [5]
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")
