"""The bronze snapshot task: plan, read chunks as Spark tasks, commit bronze, then the ledger.

The driver plans every captured table into chunks and records all plans in the ledger in one
commit. Pending chunks are then read in commit batches: each batch is one Spark job
(`batch_reads.read_chunks`) whose tasks read their chunks lock-free at their own watermarks,
written straight into bronze (`replaceWhere _chunk_id IN (...)`: a retried batch replaces,
never duplicates). Only then are the chunks marked finished in the ledger, from the reports of
the task attempts whose rows the write committed. Tables run side by side (`ChunkScheduler`),
and one ledger MERGE marks the batches of many tables, so a small table costs about one bronze
commit. One pass: nothing is staged or read twice.

A table appended to during its snapshot is read in chunks of about `chunk_size` rows: the task
that reads the open-ended last chunk cuts it short where its first `chunk_size` keys end
(`chunk_reader.TailCut`) and goes on with the rest as the next chunk, up to a commit batch of
them; the ledger records each range read (`ledger.replanned`), and the rest, if any, is the
table's next batch. Each read is corrected by its own watermarks, as any chunk is. Readers pace
themselves to `snapshot.max_rows_per_second` (`pacing`).
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import pymysql
from pyspark.sql import SparkSession

from binlake.config.secrets import with_resolved_password
from binlake.config.settings import Config, SourceConfig
from binlake.errors import ConfigError, SchemaChangeError, carried_by
from binlake.lake.event_log import event
from binlake.lake.files import driver_files
from binlake.lake.lease import HeldLease, snapshot_lease
from binlake.lake.paths import ledger_path, tables_path
from binlake.lake.stream_tables import StreamTables
from binlake.lake.table_layout import apply_layout
from binlake.lake.tables import (
    BRONZE_STATS_COLUMNS,
    STATS_COLUMNS,
    bronze_table,
    column_mapping,
    create_schemas,
)
from binlake.model.counts import counted
from binlake.model.schema import TableSchema
from binlake.mysql.column_rules import lake_view
from binlake.mysql.connection import bulk_driver, connection
from binlake.mysql.lineage import source_lineage
from binlake.mysql.prerequisites import validate
from binlake.mysql.schema_history import SchemaEntry, SchemaHistory, schema_history
from binlake.mysql.server import current_offset
from binlake.runtime.interrupts import raise_if_interrupted, stop_requests
from binlake.runtime.spark import task_slots
from binlake.snapshot.batch_reads import TailReads, chunk_reports, chunk_results, read_chunks
from binlake.snapshot.chunk_states import by_table
from binlake.snapshot.chunks import ChunkRange
from binlake.snapshot.ddl_follow import DdlWatch, FollowedTable, Resnapshot
from binlake.snapshot.ledger import ChunkResult, ChunkState, Ledger
from binlake.snapshot.pacing import CapShares
from binlake.snapshot.planner import plan_table
from binlake.snapshot.progress import Progress, Reading
from binlake.snapshot.resets import PendingResets, reset_table
from binlake.snapshot.row_filters import check_row_filters
from binlake.snapshot.table_rules import TableRules

log = logging.getLogger(__name__)

#: Said at a first Ctrl-C (or SIGTERM): what the snapshot does before it stops.
STOP_NOTICE = (
    "stopping: the chunks being read are committed first, then the snapshot stops "
    "(Ctrl-C again stops at once; those chunks are then read again by the next run)"
)


@dataclass(frozen=True)
class SnapshotSummary:
    tables: int
    chunks: int
    chunks_read: int
    rows: int
    seconds: float


#: How many times one run snapshots a table again by itself, after DDL it cannot follow.
RESNAPSHOTS = 3


def run_snapshot(
    spark: SparkSession, config: Config, only: list[str] | None = None, reset: bool = False
) -> SnapshotSummary:
    """Snapshot the captured tables (or `only` these); resumes from the ledger and skips finished
    chunks. With `reset`, the named tables are snapshotted again from scratch, as is a table
    changed during its snapshot by a DDL bronze cannot follow (`snapshot_ddl`)."""
    lease = snapshot_lease(driver_files(spark), config)
    with lease.held("binlake snapshot") as held:
        return _run_snapshot(spark, config, held, only, reset)


def _run_snapshot(
    spark: SparkSession, config: Config, lease: HeldLease, only: list[str] | None, reset: bool
) -> SnapshotSummary:
    started = time.monotonic()
    source = with_resolved_password(config.source)
    history = schema_history(spark, config)
    rounds = [_snapshot_round(spark, config, source, history, lease, only, reset, started)]
    while rounds[-1].resnapshot:
        if len(rounds) > RESNAPSHOTS:
            raise SchemaChangeError(
                f"{', '.join(rounds[-1].resnapshot)} changed during each of {RESNAPSHOTS} "
                "snapshots in ways a snapshot cannot follow: the last change "
                f"{'; '.join(rounds[-1].resnapshot.values())}. Run the snapshot once the "
                "table's migrations are done"
            )
        for reason in rounds[-1].resnapshot.values():
            log.warning("snapshot: %s; the table is snapshotted again, by itself", reason)
        again = [t.split(".", 1)[1] for t in rounds[-1].resnapshot]
        rounds.append(_snapshot_round(spark, config, source, history, lease, again, True, started))
    chunks = {t: n for r in rounds for t, n in r.chunks.items()}  # the last plan of each table
    summary = SnapshotSummary(
        len(rounds[0].chunks), sum(chunks.values()), sum(r.read for r in rounds),
        sum(r.rows for r in rounds), time.monotonic() - started,
    )  # fmt: skip
    log.info(
        "snapshot complete: %s (%d read now), %s in %.1f s",
        counted(summary.chunks, "chunk"), summary.chunks_read, counted(summary.rows, "row"),
        summary.seconds,
        extra=event("snapshot", chunks, rows=summary.rows, seconds=summary.seconds),
    )  # fmt: skip
    return summary


@dataclass(frozen=True)
class _Round:
    """One pass over the tables: their plans' sizes, what it read, and the tables a DDL it could
    not follow sends back to the start (table → why)."""

    chunks: dict[str, int]
    read: int
    rows: int
    resnapshot: dict[str, str]


def _snapshot_round(
    spark: SparkSession,
    config: Config,
    source: SourceConfig,
    history: SchemaHistory,
    lease: HeldLease,
    only: list[str] | None,
    reset: bool,
    started: float,
) -> _Round:
    with connection(source) as conn:
        # Read before the schemas: a DDL after it is one the stream meets (schema_history).
        schemas_at = current_offset(conn)
        tables = chosen_tables(validate(conn, config), only)
        check_row_filters(spark, config, tables)
        create_schemas(spark, config, {t.database for t in tables})
        ledger = Ledger(spark, ledger_path(config))
        resets = PendingResets(driver_files(spark), config)
        pending = {p for d in {t.database for t in tables} for p in resets.of_database(d)}
        again = {t.qualified for t in tables if reset or t.qualified in pending}
        filters = TableRules(config, driver_files(spark))
        known = history.entries_of(t.qualified for t in tables)
        filters.require_unchanged(
            t for t in tables if t.qualified not in again and known[t.qualified]
        )
        if again:  # before anything is reset: the source must be the lineage's server
            schemas_at = schemas_at.on(source_lineage(driver_files(spark), config, source))
        for table in tables:
            if table.qualified in again:
                if not reset:
                    log.info("snapshot: finishing the reset of %s a run began", table.qualified)
                reset_table(spark, config, ledger, table)
        recorded = by_table(ledger.chunks())
        tables = _not_taken_in_at_create(spark, config, tables, recorded, again)
        plans = plan_chunks(conn, ledger, tables, config, recorded)
    unrecorded = [t for t in tables if t.qualified in again or not known[t.qualified]]
    filters.record(unrecorded)
    if unrecorded or any(not c.finished for plan in plans.values() for c in plan):
        # Offsets are recorded: in the lake's lineage, which a run with nothing to read (a
        # `binlake run` after a failover, before its stream moved the lake) never needs.
        schemas_at = schemas_at.on(source_lineage(driver_files(spark), config, source))
    bases = {t.qualified: SchemaEntry(schemas_at, t) for t in unrecorded}
    history.reset_all(bases)
    known.update({name: [base] for name, base in bases.items()})
    for name in again:
        resets.end(name)
    progress = Progress(plans, started, config.snapshot.max_rows_per_second)
    log.info(
        "snapshot: %s, %s, %d already finished",
        counted(len(tables), "table"), counted(progress.total, "chunk"), progress.done,
    )  # fmt: skip
    work = [
        (t, plans[t.qualified], known[t.qualified][-1])
        for t in tables
        if not all(c.finished for c in plans[t.qualified])
    ]
    resnapshot: dict[str, str] = {}
    if work:
        bulk_driver()  # say here, not only in the workers' logs, which reader the chunks use
        watch = DdlWatch(config, source, history)
        try:
            scheduler = ChunkScheduler(spark, config, source, ledger, progress, watch, lease)
            resnapshot = scheduler.run(work)
        finally:
            watch.close()
    for table in tables:  # made now, or emptied by a reset (which drops its clustering)
        if table.qualified not in resnapshot:
            apply_layout(spark, config, table, bronze_table(config, table), cluster=True)
    chunks = {t.qualified: progress.chunks(t.qualified) for t in tables}
    return _Round(chunks, progress.read, progress.rows, resnapshot)


#: Committed chunks wait at most this long for their ledger MERGE, unless a commit batch's worth
#: is waiting: one MERGE then marks many small tables, and a crash re-reads at most this much.
MARK_EVERY_S = 5.0


class ChunkScheduler:
    """Reads and commits the pending chunks of many tables, `Config.table_slots` tables at once.

    Each table runs in a driver thread of its own: its chunks in commit batches, each one Spark
    job and one bronze commit, one batch after another (two commits to one Delta table at once
    would conflict). The threads hand each committed batch to the calling thread, which marks
    them finished in the ledger, many tables per MERGE: the ledger's cost no longer grows with
    the number of tables. A crash between a bronze commit and its mark re-reads those chunks,
    and their bronze commit replaces the rows (see `read_and_commit`).

    Concurrent jobs must not share a replica server id (the server would evict one binlog
    replay): slot `s` reads with ids `low + s * parallelism + partition`. Each reader of a
    batch paces itself to its share of `snapshot.max_rows_per_second`, set as the batch starts
    over the readers that can run then (`pacing.CapShares`).
    """

    def __init__(
        self,
        spark: SparkSession,
        config: Config,
        source: SourceConfig,
        ledger: Ledger,
        progress: Progress,
        watch: DdlWatch,
        lease: HeldLease,
    ) -> None:
        self.spark = spark
        self.config = config
        self.source = source
        self.ledger = ledger
        self.progress = progress
        self.watch = watch
        self.lease = lease
        self._committed: queue.SimpleQueue[_Committed] = queue.SimpleQueue()
        self._slots: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._stop = threading.Event()  # a failure, or the end: nothing more is marked
        self._no_more = threading.Event()  # a stop asked for: no new batch starts
        self._resnapshot: dict[str, str] = {}
        self._reading: dict[str, Reading] = {}  # table → its batch being read
        self._shares = CapShares(0, 1, 0, 1, None)  # the cap's split, set by `run`

    def run(self, work: list[tuple[TableSchema, list[ChunkState], SchemaEntry]]) -> dict[str, str]:
        """Every table's pending chunks read, committed and marked; the first failure raised
        after the batches committed before it are marked. Returns the tables a DDL the
        snapshot cannot follow stopped (table → why), to be snapshotted again."""
        slots = min(self.config.table_slots, len(work))
        for slot in range(slots):
            self._slots.put(slot)
        options = self.config.snapshot
        self._shares = CapShares(options.max_rows_per_second, slots, len(work),
                                 options.parallelism, task_slots(self.spark))  # fmt: skip
        pool = ThreadPoolExecutor(slots, thread_name_prefix="binlake-snapshot")
        with stop_requests(STOP_NOTICE) as asked:
            try:
                running = {pool.submit(self.copy_table, *w) for w in work}
                failure = self._mark_until_done(running, asked)
            finally:
                self._stop.set()
                pool.shutdown(wait=True, cancel_futures=True)
        if failure is not None:
            raise failure
        finished, total = self.progress.finished, self.progress.total
        if asked.is_set() and finished < total:
            raise KeyboardInterrupt(
                f"snapshot stopped with {finished}/{total} chunks committed; run the same "
                "command again and it reads only the rest"
            )
        return self._resnapshot

    def _mark_until_done(
        self, running: set[Future[None]], asked: threading.Event
    ) -> BaseException | None:
        """Marks committed batches as they arrive (each table thread also wakes this loop when
        it ends); returns the first failure of a table thread. Once a stop is `asked`, the
        table threads start no new batch and the ones in flight are committed and marked."""
        waiting: list[_Committed] = []
        marked_at = time.monotonic()
        failure: BaseException | None = None
        while running:
            raise_if_interrupted()
            with contextlib.suppress(queue.Empty):
                waiting.append(self._committed.get(timeout=MARK_EVERY_S))
            waiting += self._drain()
            ended = {f for f in running if f.done()}
            running -= ended
            failure = failure or next(
                (f.exception() for f in ended if not f.cancelled() and f.exception()), None
            )
            if failure is not None:
                self._stop.set()
            if asked.is_set():
                self._no_more.set()
            due = time.monotonic() - marked_at >= MARK_EVERY_S
            full = sum(len(c.results) for c in waiting) >= self.config.snapshot.commit_batch
            awaited = any(c.marked is not None for c in waiting)
            if waiting and (due or full or awaited or not running or failure is not None):
                self._mark(waiting)
                waiting, marked_at = [], time.monotonic()
            self.progress.report_if_quiet(list(self._reading.values()))
        self._mark(self._drain())  # put between the last drain and the thread's end
        return failure

    def _drain(self) -> list[_Committed]:
        committed: list[_Committed] = []
        while not self._committed.empty():
            committed.append(self._committed.get())
        return committed

    def _mark(self, committed: list[_Committed]) -> None:
        """One ledger MERGE for all of them; a chunk caught up to a DDL after its read was
        queued is marked with its latest entry."""
        latest = {(r.table, r.chunk_id): r for c in committed for r in c.results}
        if latest:
            planned = [s for c in committed for s in c.planned]
            self.lease.check()
            self.ledger.mark_finished(latest.values(), planned)
            self.progress.add(
                [r for c in committed if c.marked is None for r in c.results], planned
            )
            marked = latest.values()
            self.progress.report(
                event(
                    "snapshot_commit",
                    {r.table for r in marked},
                    max(r.hw for r in marked),
                    sum(r.rows for r in marked),
                )
            )
        for c in committed:
            if c.marked is not None:
                c.marked.set()

    def _mark_now(self, results: list[ChunkResult]) -> None:
        """Marks `results` and returns once the ledger holds them (a table thread's catch-up
        to a DDL, which the schema history may only record after)."""
        marked = threading.Event()
        self._committed.put(_Committed(results, marked))
        while not marked.wait(1.0):
            if self._stop.is_set():
                raise RuntimeError("the snapshot stopped before the catch-up was marked")

    def copy_table(self, table: TableSchema, plan: list[ChunkState], entry: SchemaEntry) -> None:
        slot = self._slots.get()
        try:
            if self._stop.is_set() or self._no_more.is_set():
                return
            server_id = self.config.snapshot_server_id(slot * self.config.snapshot.parallelism)
            rules = self.config.source
            followed = FollowedTable(self.spark, self.source, server_id,
                                     bronze_table(self.config, table), plan, entry, self.watch,
                                     schema_history(self.spark, self.config),
                                     rules.row_filter_of(table.qualified),
                                     rules.column_rule_of(table.qualified) is not None)  # fmt: skip

            def read_batch(schema: TableSchema, batch: list[ChunkState]) -> list[ChunkResult]:
                return read_and_commit(self.spark, self.config, self.source, schema, batch, slot,
                                       self._shares.reader())  # fmt: skip

            chunks = deque(c for c in plan if not c.finished)
            batch_size = self.config.snapshot.commit_batch
            while chunks:
                if self._stop.is_set() or self._no_more.is_set():
                    return
                batch = [chunks.popleft() for _ in range(min(batch_size, len(chunks)))]
                self._reading[table.qualified] = Reading(
                    table.qualified, len(batch), time.monotonic()
                )
                try:
                    results = followed.read(batch, read_batch, self._mark_now)
                except Resnapshot as why:
                    self._resnapshot[table.qualified] = str(why)
                    return
                finally:
                    self._reading.pop(table.qualified, None)
                planned = followed.replan(results)
                read = {r.chunk_id for r in results}
                chunks.extend(c for c in planned if c.chunk_id not in read)  # the rest, if any
                self._committed.put(_Committed(results, planned=planned))
        finally:
            self._shares.table_done()
            self._slots.put(slot)
            self._committed.put(_Committed([]))  # wakes the marking loop: the thread has ended


@dataclass(frozen=True)
class _Committed:
    """Chunks committed to bronze, for the ledger; `marked` is set once they are marked (a
    table thread waits for a catch-up to a DDL to be marked)."""

    results: list[ChunkResult]
    marked: threading.Event | None = None
    #: The plan rows the reads added (`ledger.replanned`), in the same ledger commit.
    planned: list[ChunkState] = field(default_factory=list)


def chosen_tables(tables: list[TableSchema], only: list[str] | None) -> list[TableSchema]:
    """The captured tables `--tables` names, each by its name or as `db.table` (all of them
    without it); a name two databases share must be qualified."""
    if only is None:
        return tables
    chosen: list[TableSchema] = []
    for name in only:
        named = [t for t in tables if name in (t.name, t.qualified)]
        if len(named) != 1:
            captured = ", ".join(sorted(t.qualified for t in tables))
            what = (
                "a table of several databases: write db.table"
                if named
                else ("which source.tables does not capture")
            )
            raise ConfigError(f"--tables names {name}, {what} (captured: {captured})")
        chosen.extend(t for t in named if t not in chosen)
    return chosen


def _not_taken_in_at_create(
    spark: SparkSession,
    config: Config,
    tables: list[TableSchema],
    recorded: dict[str, list[ChunkState]],
    again: set[str],
) -> list[TableSchema]:
    """`tables` less those this config's stream job took in at their CREATE (in its table list
    with no plan in the ledger; a snapshot's join leaves a plan), unless a reset reads them
    again. The stream's silver holds every row of such a table from the binlog, so a snapshot
    would read the whole table for nothing: the catch-up job (`binlake run`) snapshots before
    each stream run."""
    joined = StreamTables(tables_path(config), driver_files(spark)).read()
    taken_in = {
        t.qualified for t in tables
        if t.qualified in joined and t.qualified not in recorded and t.qualified not in again
    }  # fmt: skip
    if taken_in:
        log.info(
            "snapshot: nothing to read of %s: stream %s took %s in from %s CREATE "
            "(`--reset` snapshots %s anyway)",
            ", ".join(sorted(taken_in)), config.stream.job_name,
            *(("it", "its", "it") if len(taken_in) == 1 else ("them", "their", "them")),
        )  # fmt: skip
    return [t for t in tables if t.qualified not in taken_in]


def plan_chunks(
    conn: pymysql.Connection,
    ledger: Ledger,
    tables: list[TableSchema],
    config: Config,
    recorded: dict[str, list[ChunkState]] | None = None,
) -> dict[str, list[ChunkState]]:
    """Every table's chunks: from the ledger (`recorded`: its chunks by table, if already
    read), or planned now and recorded in one commit."""

    def planner(table: TableSchema) -> Callable[[], list[ChunkRange]]:
        return lambda: plan_table(conn, table, config.snapshot)

    plans = {t.qualified: (t.split_column, planner(t)) for t in tables}
    return ledger.record_plans(plans, recorded)


def read_and_commit(
    spark: SparkSession,
    config: Config,
    source: SourceConfig,
    table: TableSchema,
    batch: list[ChunkState],
    slot: int,
    reader_rate: float = 0.0,
) -> list[ChunkResult]:
    """The batch read and committed to bronze: its chunks' rows replace theirs, and where it
    holds the open-ended chunk, the rows of every chunk id above it too (chunks its reads went
    on to in a run that crashed before the ledger recorded them)."""
    tail_reads = TailReads(config.snapshot.chunk_size, config.snapshot.commit_batch)
    rows, reports = read_chunks(spark, config, source, table, batch, slot, reader_rate, tail_reads)
    bronze = bronze_table(config, table)
    tail = next((c.chunk_id for c in batch if c.range.end is None), None)
    try:
        landed = lake_view(source, table).column_names
        created = {**column_mapping(landed), STATS_COLUMNS: BRONZE_STATS_COLUMNS}
        bronze.replace_chunks(spark, rows, [c.chunk_id for c in batch], created, tail)
    except Exception as failure:  # a chunk read's own error, raised in a Spark task
        raise carried_by(failure) or failure from None
    return chunk_results(table, batch, chunk_reports(reports))
