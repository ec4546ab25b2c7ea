"""The `items` table the schema-change tests share: its seed, a writer racing it, a stream run
in a thread, and what a test observes of the stream's batches (its MERGEs, their settings, the
event log's rows). The checks of silver and the changelog are in assertions.py."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pymysql
import pytest

from binlake.jobs import commands
from binlake.lake.event_log import event_table
from binlake.runtime.spark import (
    COPY_ON_WRITE_MERGES,
    DETERMINISTIC_MERGE_SOURCES,
    INTERPRETED_QUERIES,
)
from binlake.silver import merge
from binlake.stream.sink import BatchSink

from .replay import connect

ITEMS = (
    "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, qty INT NOT NULL, "
    "price DECIMAL(10,2) NOT NULL, note VARCHAR(10) NULL)"
)


def seed_items(sql: Any, rows: int, copy: str | None = None) -> None:
    """`items` with `rows` rows (and a second table `copy` holding the same rows)."""
    sql(ITEMS)
    values = ", ".join(
        f"({i}, 'item{i}', {i % 17}, {i}.25, {'NULL' if i % 5 else repr(f'n{i}')})"
        for i in range(1, rows + 1)
    )
    sql(f"INSERT INTO items VALUES {values}")
    if copy is not None:
        sql(ITEMS.replace("items", copy))
        sql(f"INSERT INTO `{copy}` SELECT * FROM items")


class Racer:
    """A writer racing the stream: updates and deletes of existing rows, inserts of new ones,
    using only `id` and `qty` (which every step keeps). Errors from a DDL in flight are
    ignored: a failed statement changed nothing. `inserts_only`: an append-only table's writer,
    inserting keys below the seeded ones and above them in turn (the first chunk and the last)."""

    def __init__(
        self,
        db_env: dict[str, str],
        database: str,
        table: str = "items",
        pause: float = 0.01,
        inserts_only: bool = False,
    ) -> None:
        self.db_env, self.database, self.table, self.pause = db_env, database, table, pause
        self.inserts_only = inserts_only
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.rng = random.Random(7)
        self.next_id, self.low_id = 10_000, 0
        self.statements = 0  # executed so far

    def _statement(self) -> tuple[str, tuple[Any, ...]]:
        roll = 1.0 if self.inserts_only else self.rng.random()
        key = self.rng.randint(1, 400)
        if roll < 0.6:
            return f"UPDATE `{self.table}` SET qty = qty + 1 WHERE id = %s", (key,)
        if roll < 0.8:
            return f"DELETE FROM `{self.table}` WHERE id = %s", (key,)
        insert = f"INSERT INTO `{self.table}` (id, name, qty, price) VALUES (%s, 'racer', 1, 1.50)"
        if self.inserts_only and self.statements % 2:
            self.low_id -= 1
            return insert, (self.low_id,)
        self.next_id += 1
        return insert, (self.next_id,)

    def _run(self) -> None:
        with connect(self.db_env, self.database) as conn, conn.cursor() as cur:
            while not self.stop.is_set():
                statement, args = self._statement()
                # A DDL in flight may fail the statement, which then changed nothing.
                with contextlib.suppress(pymysql.MySQLError):
                    cur.execute(statement, args)
                    self.statements += 1
                self.stop.wait(self.pause)

    def __enter__(self) -> Racer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join()


def logged_events(spark: Any, config: Any, kind: str) -> list[Any]:
    """The event log's rows of `kind`, oldest first."""
    frame = event_table(config).read(spark)
    return frame.where(frame.kind == kind).orderBy("ts").collect()


def wait_for(condition: Callable[[], bool], timeout: float = 180.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.5)


class StreamThread(threading.Thread):
    """A continuous `binlake stream` in a thread that keeps what the stream raised (`raised`),
    for a test to assert how it stopped."""

    def __init__(self, spark: Any, config: Any) -> None:
        super().__init__(daemon=True)
        self.spark, self.config = spark, config
        self.raised: BaseException | None = None

    def run(self) -> None:
        try:
            commands.stream(self.spark, self.config)
        except BaseException as exc:
            self.raised = exc
            raise


@contextlib.contextmanager
def running_stream(spark: Any, config: Any) -> Iterator[StreamThread]:
    """A continuous `binlake stream` in a thread, stopped (even when the test fails) on exit."""
    thread = StreamThread(spark, config)
    thread.start()
    try:
        wait_for(lambda: bool(spark.streams.active) or not thread.is_alive())
        yield thread
    finally:
        for query in spark.streams.active:
            query.stop()
        thread.join(timeout=120)


def stream_losing_its_commit(spark: Any, config: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """An available-now stream whose first batch is applied to silver and the changelog, then
    fails before Spark commits it (what a driver lost at that point leaves): the next stream
    replays the batch."""
    original = BatchSink.__call__

    def applied_then_lost(self: BatchSink, batch: Any, batch_id: int) -> None:
        original(self, batch, batch_id)
        raise RuntimeError("the driver died before the checkpoint commit")

    with monkeypatch.context() as patched:
        patched.setattr(BatchSink, "__call__", applied_then_lost)
        with pytest.raises(Exception, match="died before the checkpoint commit"):
            commands.stream(spark, config, available_now=True)


def session_values(session: Any, settings: dict[str, str]) -> dict[str, str | None]:
    """The session's values of the keys of `settings` (None: unset), e.g. of
    `spark.INTERPRETED_QUERIES` to see whether its queries run interpreted now."""
    return {key: session.conf.get(key, None) for key in settings}


@dataclass(frozen=True)
class MergeSeen:
    """A silver MERGE as it ran: its table, the change count it was given, its source's
    partitions and the session's MERGE-source, code-generation and rewrite settings then."""

    table: str
    changes: int | None
    partitions: int
    settings: dict[str, str | None]
    codegen: dict[str, str | None]  # the session's values of `spark.INTERPRETED_QUERIES`' keys
    rewrites: dict[str, str | None]  # the session's values of `spark.COPY_ON_WRITE_MERGES`' keys


def observed_merges(monkeypatch: pytest.MonkeyPatch) -> list[MergeSeen]:
    """Each silver MERGE from now on, recorded as it runs."""
    merged: list[MergeSeen] = []
    real_merge = merge.TableApply.merge_silver

    def observed(self: merge.TableApply, typed: Any, summary: Any) -> None:
        session = typed.sparkSession
        settings = session_values(session, DETERMINISTIC_MERGE_SOURCES)
        codegen = session_values(session, INTERPRETED_QUERIES)
        partitions = typed.rdd.getNumPartitions()
        changes = self.spread.changes if self.spread else None
        rewrites = session_values(session, COPY_ON_WRITE_MERGES)
        seen = MergeSeen(self.table.qualified, changes, partitions, settings, codegen, rewrites)
        merged.append(seen)
        real_merge(self, typed, summary)

    monkeypatch.setattr(merge.TableApply, "merge_silver", observed)
    return merged
