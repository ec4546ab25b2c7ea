"""Issue 72: a table appended to past its planned maximum throughout its snapshot. The open-ended
last chunk is read about `chunk_size` keys at a time, each read with watermarks of its own; a
snapshot killed before the ledger recorded some of those reads resumes from the last recorded
one, re-reads no finished chunk and misses no row of the tail. Readers honour
`snapshot.max_rows_per_second`, which the progress lines show."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from itertools import pairwise
from typing import Any

import pytest
from pyspark.sql import functions as F

from binlake.jobs import commands
from binlake.lake.paths import ledger_path
from binlake.snapshot import task
from binlake.snapshot.chunk_states import MARK
from binlake.snapshot.ledger import Ledger

from .assertions import assert_silver_is_source, bronze_path
from .crash import crashed_at
from .items import seed_items
from .replay import connect

pytestmark = pytest.mark.integration

SEEDED, CHUNK, APPENDED = 300, 50, 1000


class Appender(threading.Thread):
    """Inserts `rows` rows with the keys after the seeded ones, a few per statement, then
    stops; `inserted` counts them."""

    def __init__(self, db_env: dict[str, str], database: str, rows: int) -> None:
        super().__init__(daemon=True)
        self.db_env, self.database, self.rows = db_env, database, rows
        self.inserted = 0

    def run(self) -> None:
        with connect(self.db_env, self.database) as conn, conn.cursor() as cur:
            for first in range(SEEDED + 1, SEEDED + 1 + self.rows, 5):
                values = ", ".join(f"({i}, 'tail', 1, 1.50)" for i in range(first, first + 5))
                cur.execute(f"INSERT INTO items (id, name, qty, price) VALUES {values}")
                self.inserted += 5
                time.sleep(0.01)


def test_rows_appended_past_the_plan_are_read_in_chunks_and_resume_after_a_crash(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    sql: Callable[..., Any],
    make_config: Callable[..., Any],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    seed_items(sql, SEEDED)
    snapshot = {"chunk_size": CHUNK, "parallelism": 2, "chunks_per_commit": 8,
                "max_rows_per_second": 20_000}  # fmt: skip
    config = make_config(snapshot=snapshot)
    appender = Appender(db_env, database, APPENDED)
    planned = task.plan_chunks

    def plan_then_append(*args: Any) -> Any:
        """The plan sees the seeded rows alone: 6 chunks, the last `[251, +inf)`. The appender
        starts then, and runs through the reads, 10 chunks ahead of them from the start."""
        plans = planned(*args)
        if not appender.is_alive() and not appender.inserted:
            appender.start()
            while appender.inserted < 10 * CHUNK:
                time.sleep(0.01)
        return plans

    monkeypatch.setattr(task, "plan_chunks", plan_then_append)
    caplog.set_level(logging.INFO, "binlake.snapshot.progress")
    # The first ledger commit records the plan's chunks and 8 reads of the tail; the second
    # would record the reads on from there: bronze holds them, the ledger does not.
    with crashed_at("binlake.snapshot.ledger:Ledger.mark_finished", "before", 2):
        commands.snapshot(spark, config)
    commands.snapshot(spark, config)
    appender.join()
    commands.stream(spark, config, available_now=True)

    assert_silver_is_source(spark, sql, config, "items")
    chunks = Ledger(spark, ledger_path(config)).chunks(f"{database}.items")
    assert all(c.finished for c in chunks)
    ranges = [c.range for c in chunks]
    assert ranges[0].start is None and ranges[-1].end is None
    assert all(a.end == b.start for a, b in pairwise(ranges)), ranges
    assert len(chunks) > 6 + APPENDED // CHUNK // 2, ranges  # the tail read in chunks
    assert max(c.rows or 0 for c in chunks) <= 2 * CHUNK, [c.rows for c in chunks]

    # No chunk was read twice into the ledger; bronze holds exactly the chunks it records.
    ledger = spark.read.format("delta").load(ledger_path(config))
    marks = ledger.where((F.col("split_column") == MARK) & (F.col("table") == f"{database}.items"))
    assert max(Counter(r.chunk_id for r in marks.collect()).values()) == 1
    bronze = spark.read.format("delta").load(bronze_path(config, "items"))
    per_chunk = bronze.groupBy("_chunk_id").count().collect()
    assert {r["_chunk_id"]: r["count"] for r in per_chunk} == {
        c.chunk_id: c.rows for c in chunks if c.rows
    }
    assert any("capped at 20,000)" in r.getMessage() for r in caplog.records)
