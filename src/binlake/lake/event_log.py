"""The event log: one row per thing a job did, in a Delta table a user can query.

binlake's modules say what happened the way they always have, with a log line. A line that is an
event carries it (`log.info("...", ..., extra=event("stream_batch", ...))`): the line's text is
the event's message, so nothing is said twice. While a job runs (`recording`), an `EventLog`
handler on the `binlake` logger turns those lines, and every warning and error, into rows of the
event table: `_system/events` under `lake.root`, or `<catalog>.<silver_schema>_<db>.binlake_events`
with `lake.catalog`.

Rows wait in memory and go out in one Delta append, made by a thread of the handler's own so no
batch waits for it: after a stream batch (at most every `BATCH_FLUSH_S`: at a short trigger an
append after every batch would take a core from the next batch's MERGE), at a run's start and
end, every `FLUSH_EVERY_S` otherwise, and when the job ends (an error that ends it is its last
row). An append holding batches' rows carries the newest batch id as Delta's idempotent-write
version (`txnAppId` / `txnVersion`), so a batch Spark replays after a crash writes its events
once. On Spark Connect a batch's events are written by the server's `foreachBatch` worker,
which the server stops when its query ends: there each batch appends its rows before it
returns. A process killed outright loses the rows not yet appended (up to `FLUSH_EVERY_S`' worth);
the lake loses nothing. Writing the log is never why a job fails: a failed append is retried
with the next one, and said on stderr.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import types as T

from binlake.config.settings import Config
from binlake.errors import BinlakeError
from binlake.lake.paths import EVENTS_TABLE, events_path
from binlake.lake.tables import CatalogTable, LakeTable, PathTable, events_schema, local_frame
from binlake.model.offsets import BinlogOffset

log = logging.getLogger(__name__)

#: Events other than a stream batch's wait at most this long for their append.
FLUSH_EVERY_S = 30.0
#: A stream batch's events go out at once unless an append began less than this long ago: a
#: small Delta append is a Spark job of its own, and a short trigger leaves little room for one
#: per batch.
BATCH_FLUSH_S = 10.0
#: Events appended at once: each ends or begins a run, which may be killed right after (a
#: continuous stream is stopped by a signal). The ones inside a batch go with the batch's append.
FLUSH_AT_ONCE = frozenset(
    {"stream_start", "snapshot", "table_reset", "binlog_purged", "source_replaced"}
)

EVENT_SCHEMA = T.StructType(
    [
        T.StructField("ts", T.TimestampType(), False),
        T.StructField("job", T.StringType(), False),
        T.StructField("kind", T.StringType(), False),
        T.StructField("tables", T.ArrayType(T.StringType(), False), False),
        T.StructField("file", T.StringType(), True),
        T.StructField("position", T.LongType(), True),
        T.StructField("gtid", T.StringType(), True),
        T.StructField("rows", T.LongType(), True),
        T.StructField("duration_s", T.DoubleType(), True),
        T.StructField("lag_bytes", T.LongType(), True),
        T.StructField("lag_s", T.DoubleType(), True),
        T.StructField("message", T.StringType(), False),
    ]
)


@dataclass(frozen=True)
class Event:
    """What a log line records beside its message.

    `kind`: snapshot_commit (chunks marked in the ledger), snapshot (a run's end), stream_start,
    stream_batch, ddl_applied, table_joined, table_reset, table_sent_back, binlog_purged,
    source_replaced (the stream found its GTID position on a new server), job_paused,
    warning, error.
    `offset`: where it happened in the binlog (a batch's end, a chunk commit's newest high
    watermark, a DDL's own offset). `rows`: a batch's changes, a commit's rows. `txn`: the
    idempotent-write id and version of a stream batch's append."""

    kind: str
    tables: tuple[str, ...] = ()
    offset: BinlogOffset | None = None
    rows: int | None = None
    seconds: float | None = None
    lag_bytes: int | None = None
    lag_seconds: float | None = None
    txn: tuple[str, int] | None = None


def event(
    kind: str,
    tables: Iterable[str] = (),
    offset: BinlogOffset | None = None,
    rows: int | None = None,
    seconds: float | None = None,
    lag_bytes: int | None = None,
    lag_seconds: float | None = None,
    txn: tuple[str, int] | None = None,
) -> dict[str, Event]:
    """A log call's `extra` that makes its line an event."""
    return {
        "event": Event(
            kind, tuple(sorted(tables)), offset, rows, seconds, lag_bytes, lag_seconds, txn
        )
    }


def event_table(config: Config) -> LakeTable:
    if config.lake.catalog is None:
        return PathTable(events_path(config))
    return CatalogTable(config.lake.catalog, events_schema(config), EVENTS_TABLE)


def event_row(job: str, record: logging.LogRecord) -> tuple[Any, ...]:
    """The table row of a log record: its own event, or a warning or error line's."""
    found = getattr(record, "event", None)
    if isinstance(found, Event):
        happened = found
    else:
        happened = Event("error" if record.levelno >= logging.ERROR else "warning")
    offset = happened.offset
    return (
        datetime.fromtimestamp(record.created, UTC),
        job,
        happened.kind,
        list(happened.tables),
        offset.file if offset else None,
        offset.pos if offset else None,
        (offset.gtid or None) if offset else None,
        happened.rows,
        happened.seconds,
        happened.lag_bytes,
        happened.lag_seconds,
        record.getMessage(),
    )


class EventLog(logging.Handler):
    """Appends the events (and warnings and errors) of the `binlake` loggers to the event table.

    With `background`, appends run in a thread of their own, so no batch waits for one (a small
    Delta append costs about a second on two cores): rows that arrive meanwhile go out together
    in the next, carrying the newest batch's id.

    `in_batch_worker`: the handler lives in a Spark Connect server's `foreachBatch` worker,
    which the server stops as soon as its query ends (an available-now run ends right after its
    last batch). Nothing there outlives a batch, so each batch's rows are appended before the
    batch returns, in the batch's own thread."""

    def __init__(
        self,
        spark: SparkSession,
        table: LakeTable,
        job: str,
        background: bool = True,
        in_batch_worker: bool = False,
    ) -> None:
        super().__init__()
        self.spark = spark
        self.table = table
        self.job = job
        self._pending: list[tuple[Any, ...]] = []
        self._txn: tuple[str, int] | None = None  # the newest batch among the pending rows
        self._since: float | None = None  # when the oldest pending row arrived
        self._appended = float("-inf")  # when the last append began
        self._buffer = threading.Lock()
        self._appending = threading.Lock()
        # Set while this thread appends: its own lines (Spark's, a failed append's) are no events.
        self._local = threading.local()
        self._due = threading.Event()
        self._closed = False
        self._in_batch_worker = in_batch_worker
        self._writer: threading.Thread | None = None
        if background and not in_batch_worker:
            self._writer = threading.Thread(
                target=self._append_when_due, name="binlake-events", daemon=True
            )
            self._writer.start()

    def handle(self, record: logging.LogRecord) -> bool:
        """Keeps the record's row; appends for a stream batch, a run's start or end, or rows
        that waited `FLUSH_EVERY_S`. Unlike `logging.Handler.handle`, no lock is held across an
        append, so other threads keep logging meanwhile."""
        if getattr(self._local, "appending", False) or not self._wanted(record):
            return False
        row = event_row(self.job, record)
        found = getattr(record, "event", None)
        txn = found.txn if isinstance(found, Event) else None
        at_once = isinstance(found, Event) and found.kind in FLUSH_AT_ONCE
        now = time.monotonic()
        with self._buffer:
            self._pending.append(row)
            self._txn = txn or self._txn
            self._since = self._since if self._since is not None else now
            due = (
                at_once
                or (txn is not None and self._batch_due(now))
                or now - self._since >= FLUSH_EVERY_S
            )
        if due and self._writer is not None:
            self._due.set()
        elif due:
            self.flush()
        return True

    def _batch_due(self, now: float) -> bool:
        """Whether a stream batch's row goes out now: in a batch worker always (the worker may
        be stopped right after the batch), else unless an append began `BATCH_FLUSH_S` ago."""
        return self._in_batch_worker or now - self._appended >= BATCH_FLUSH_S

    def emit(self, record: logging.LogRecord) -> None:
        self.handle(record)

    @staticmethod
    def _wanted(record: logging.LogRecord) -> bool:
        return record.name.startswith("binlake") and (
            record.levelno >= logging.WARNING or isinstance(getattr(record, "event", None), Event)
        )

    def _append_when_due(self) -> None:
        while not self._closed:
            self._due.wait(FLUSH_EVERY_S)
            self._due.clear()
            self.flush()

    def flush(self) -> None:
        """Append every pending row in one commit (once per batch id, if they hold a batch's)."""
        with self._appending:
            with self._buffer:
                rows, txn = self._pending, self._txn
                self._pending, self._txn, self._since = [], None, None
                self._appended = time.monotonic()
            if not rows:
                return
            self._local.appending = True
            try:
                self._append(rows, txn)
            except Exception as exc:
                self._keep(rows, txn, exc)
            finally:
                self._local.appending = False

    def batches_committed(self) -> None:
        """The stream query ended by itself (available-now): Spark committed every batch it ran
        and replays none of them, so their pending rows go out without the idempotent-write
        version. Its check is what a small append mostly costs (Delta rebuilds the table's
        state to read the stored version, about as much again as the append), and the append
        at a run's end is one the job waits for."""
        with self._buffer:
            self._txn = None

    def close(self) -> None:
        """Stop the writer thread and append what is left: the job's end."""
        self._closed = True
        self._due.set()
        if self._writer is not None and self._writer is not threading.current_thread():
            self._writer.join()
        self.flush()
        super().close()

    def _keep(
        self, rows: list[tuple[Any, ...]], txn: tuple[str, int] | None, failure: Exception
    ) -> None:
        """Rows an append failed to write go out with the next one."""
        with self._buffer:
            self._pending[:0] = rows
            self._txn = self._txn or txn
            self._since = time.monotonic()
        first = next(iter(str(failure).strip().splitlines()), type(failure).__name__)
        log.warning("the event log could not be written (kept for the next append): %s", first)

    def _append(self, rows: list[tuple[Any, ...]], txn: tuple[str, int] | None) -> None:
        frame = local_frame(self.spark, rows, EVENT_SCHEMA).coalesce(1)  # one file per append
        writer = frame.write.format("delta").mode("append")
        if txn is not None:
            writer = writer.option("txnAppId", txn[0]).option("txnVersion", str(txn[1]))
        self.table.save(writer)


def batches_committed(job: str) -> None:
    """Say to `job`'s event log that Spark committed every stream batch it ran
    (`EventLog.batches_committed`)."""
    for handler in logging.getLogger("binlake").handlers:
        if isinstance(handler, EventLog) and handler.job == job:
            handler.batches_committed()


def _ended_by(job: str, exc: Exception) -> logging.LogRecord:
    """The error event of an exception that ends the job, in the words the CLI prints: only
    the event log gets it (the CLI prints the error itself)."""
    if isinstance(exc, BinlakeError):
        text = " ".join(str(exc).splitlines())
    else:
        first = next(iter(str(exc).strip().splitlines()), "")
        text = f"unexpected {type(exc).__name__}: {first}"
    return log.makeRecord(
        log.name, logging.ERROR, __file__, 0, "%s ended: %s", (job, text), None,
        extra=event("error"),
    )  # fmt: skip


def attach(
    spark: SparkSession, config: Config, job: str, in_batch_worker: bool = False
) -> EventLog | None:
    """Record this process's events of `job` into the lake's event table (`lake.event_log`),
    unless a handler does already; returns the handler added. A stream's `foreachBatch` runs
    in a process of its own on Spark Connect, where the job's `recording` never ran, and
    attaches there (`in_batch_worker`)."""
    if not config.lake.event_log:
        return None
    table = event_table(config)
    root = logging.getLogger("binlake")
    for handler in root.handlers:
        if isinstance(handler, EventLog) and (str(handler.table), handler.job) == (str(table), job):
            return None
    added = EventLog(spark, table, job, in_batch_worker=in_batch_worker)
    if not root.isEnabledFor(logging.INFO):  # events are info lines; other handlers keep theirs
        root.setLevel(logging.INFO)
    root.addHandler(added)
    return added


#: What a job does when binlake stops it (`job_pause.JobPause`), while its events are recorded.
StopHook = Callable[[BinlakeError], None]


@contextmanager
def recording(
    spark: SparkSession, config: Config, job: str, on_stop: StopHook | None = None
) -> Iterator[None]:
    """Record the events of the job run inside (`attach`); an exception that ends the job is
    its last event, after what `on_stop` does about it (pausing the Databricks job)."""
    root = logging.getLogger("binlake")
    level = root.level
    handler = attach(spark, config, job)
    if handler is None:
        yield
        return
    try:
        yield
    except Exception as exc:
        if on_stop is not None and isinstance(exc, BinlakeError):
            on_stop(exc)
        handler.handle(_ended_by(job, exc))
        raise
    except KeyboardInterrupt:
        handler.handle(
            log.makeRecord(
                log.name,
                logging.INFO,
                __file__,
                0,
                "%s interrupted (Ctrl-C)",
                (job,),
                None,
                extra=event("interrupted"),
            )
        )
        raise
    finally:
        root.removeHandler(handler)
        root.setLevel(level)
        handler.close()
