"""The silver streaming task: start offset, high-watermark filter, query, progress.

Startup modes (`stream.startup_mode`): `initial` starts at min(HW) of the finished snapshot and
filters by the chunks' high watermarks; `latest-offset`, `specific-offset` and `timestamp` capture
without a snapshot and apply every change after their start offset. Once the query has a
checkpoint under `_system/checkpoints/<job>`, Spark resumes from it and the start offset is unused.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, replace
from typing import Any

from pyspark.errors import StreamingQueryException
from pyspark.sql import SparkSession
from pyspark.sql.streaming import DataStreamWriter, StreamingQuery

from binlake.config.secrets import with_hash_salt, with_resolved_password
from binlake.config.settings import Config, SourceConfig, StreamConfig
from binlake.errors import (
    BinlogPurgedError,
    BinlogResetError,
    SnapshotIncompleteError,
    SourceError,
    SourceReplacedError,
    carried_by,
)
from binlake.lake.event_log import batches_committed, event
from binlake.lake.files import LakeFiles, batch_ids, driver_files, join
from binlake.lake.lease import HeldLease, stream_lease
from binlake.lake.paths import checkpoint_path, ledger_path, schema_root, tables_path
from binlake.lake.stream_tables import StreamTables
from binlake.lake.tables import create_schemas
from binlake.model.counts import counted
from binlake.model.offsets import BinlogOffset
from binlake.model.schema import TableSchema
from binlake.mysql.binlog_archive import BinlogArchive
from binlake.mysql.connection import connection
from binlake.mysql.gtids import offset_of_gtid, server_identity
from binlake.mysql.lineage import current_lineage, locate, snapshot_reads
from binlake.mysql.lost_binlog import check_available, lost_remedy
from binlake.mysql.prerequisites import validate
from binlake.mysql.retention import warn_if_purge_near
from binlake.mysql.schema_history import SchemaEntry, SchemaHistory, entry_at, schema_history
from binlake.mysql.server import head_offset, logs_column_names
from binlake.mysql.transactions import first_offset_at_or_after
from binlake.runtime.interrupts import raise_if_interrupted
from binlake.runtime.spark import (
    DETERMINISTIC_MERGE_SOURCES,
    KEY_SETS_BY_REFERENCE,
    session_settings,
)
from binlake.silver.merge import ensure_silver, require_silver
from binlake.snapshot.chunk_states import by_table
from binlake.snapshot.ledger import ChunkState, Ledger, high_watermarks, snapshot_rows
from binlake.snapshot.row_filters import check_row_filters
from binlake.snapshot.table_rules import TableRules
from binlake.stream.binlog_source import ChunkMarks, StreamSpec, binlog_source
from binlake.stream.joining import join_ready_tables
from binlake.stream.resnapshot import Resnapshots, restart_pending, start_anew
from binlake.stream.side_by_side import side_by_side
from binlake.stream.sink import BatchSink, batch_end

log = logging.getLogger(__name__)


def checkpoint_offset(files: LakeFiles, config: Config) -> BinlogOffset | None:
    """The end offset of the newest committed micro-batch in the query's checkpoint."""
    root = checkpoint_path(config)
    for batch in sorted(batch_ids(files, join(root, "commits")), reverse=True):
        end = batch_end(files, root, batch)
        if end is not None:
            return end
    return None


def planned_offset(files: LakeFiles, config: Config) -> BinlogOffset | None:
    """The end offset of a micro-batch planned and not committed (a run that failed or was
    killed inside it), which Spark replays first on the next start; None if there is none."""
    root = checkpoint_path(config)
    committed = max(batch_ids(files, join(root, "commits")), default=-1)
    planned = max(batch_ids(files, join(root, "offsets")), default=-1)
    return batch_end(files, root, planned) if planned > committed else None


@dataclass(frozen=True)
class _Rebased:
    """Where a resumed stream starts on the source as it is now (see `_rebased`)."""

    start: BinlogOffset
    rebase: tuple[tuple[BinlogOffset, BinlogOffset], ...] = ()
    replayed: tuple[BinlogOffset, BinlogOffset] | None = None


def _rebased(
    files: LakeFiles,
    config: Config,
    source: SourceConfig,
    resume: BinlogOffset,
    tables: list[str],
    chunks: list[ChunkState],
) -> _Rebased:
    """The stream's start on the source as it is now (`lineage.locate`), and the checkpoint's
    offsets the reader must read elsewhere: after a replaced source, the committed end and the
    end of a batch planned before the replacement (Spark replays it, and it must read the same
    transactions, found by GTID, since part of it may be applied already). A new server must
    also hold what the ledger's `chunks` read past `resume`."""
    start = locate(
        files, config, source, resume, tables, snapshot_reads(high_watermarks(chunks), resume)
    )
    if start == resume:
        return _Rebased(start)
    planned = planned_offset(files, config)
    if planned is None:
        return _Rebased(start, ((resume, start),))
    found = locate(files, config, source, planned, tables)
    if found.lineage != start.lineage:
        raise BinlogResetError(
            f"the stream planned a batch up to {planned} before the source was replaced, "
            "and that position has no GTID position to find it by on the new server: "
            f"{lost_remedy(tables, config.stream.job_name)}"
        )
    return _Rebased(start, ((resume, start), (planned, found)), (resume, planned))


def _created_while_streaming(histories: dict[str, list[SchemaEntry]]) -> set[str]:
    """The tables whose history starts at their CREATE, not at a snapshot's schema."""
    return {t for t, entries in histories.items() if entries and entries[0].statement}


def stream_spec(
    config: Config,
    source: SourceConfig,
    start: BinlogOffset,
    marks: dict[str, ChunkMarks],
    name: str | None = None,
) -> StreamSpec:
    """The stream reader's spec for this config's job (its query name unless `name`)."""
    return StreamSpec(
        name=name or f"binlake_binlog_{config.stream.job_name}",
        job=config.stream.job_name,
        source=source,
        server_id=config.stream_server_id,
        split_keys=dict(config.snapshot.split_keys),
        start=start,
        history_root=schema_root(config),
        tables_path=tables_path(config),
        marks=marks,
        max_bytes=config.stream.max_bytes_per_batch,
        max_changes=config.stream.max_changes_per_batch,
        read_ids=config.stream_read_ids,
        bytes_per_read=config.stream.bytes_per_read_task,
    )


def resolved_start(
    files: LakeFiles, config: Config, resolve: Callable[[], BinlogOffset]
) -> BinlogOffset:
    """The query's start offset, resolved once and kept beside the checkpoint.

    Spark logs no offset for a run that found nothing to read, so without this a second
    `latest-offset` (or `timestamp`) run would re-resolve "now" and skip what happened between.
    """
    saved = join(checkpoint_path(config), "binlake-start.json")
    text = files.read_text(saved)
    if text is not None:
        return BinlogOffset.from_dict(json.loads(text))
    start = resolve()
    files.write_text(saved, json.dumps(start.to_dict()))
    return start


def chunk_marks(
    tables: list[TableSchema],
    chunks: list[ChunkState],
    joined: Mapping[str, BinlogOffset | None],
    created: Collection[str] = frozenset(),
) -> dict[str, ChunkMarks]:
    """The per-table watermarks of the finished snapshots silver was built from (`joined`: the
    job's `StreamTables`); refuses an unfinished one. Tables `created` while streaming by a job
    that recorded no offset for their CREATE have no snapshot: every row came through the
    binlog."""
    marks: dict[str, ChunkMarks] = {}
    grouped = by_table(chunks)
    for table in tables:
        own = grouped.get(table.qualified, [])
        if not own and table.qualified in created:
            continue
        if _built_from_binlog(joined.get(table.qualified), own):
            continue
        unfinished = [c for c in own if not c.finished]
        if not own or unfinished:
            raise SnapshotIncompleteError(
                f"the snapshot of {table.qualified} is not finished "
                f"({len(own) - len(unfinished)}/{len(own)} chunks): run `binlake snapshot` first"
            )
        marks[table.qualified] = ChunkMarks.of(
            [c.range for c in own], [c.hw for c in own if c.hw is not None]
        )
    return marks


def _built_from_binlog(since: BinlogOffset | None, own: list[ChunkState]) -> bool:
    """Whether the job applies a table from the binlog since before its chunks were read: it
    joined at its CREATE, and a snapshot read it later (the catch-up job snapshots every time)
    or is reading it. Silver never took those chunks' rows, so their watermarks must filter
    nothing; a table that joined from its snapshot joined at or after every chunk's HW."""
    if since is None:
        return False
    return not own or any(c.hw is None or since < c.hw for c in own)


def start_offset(
    config: Config, source: SourceConfig, marks: dict[str, ChunkMarks], lineage: int
) -> BinlogOffset:
    """Where a new job starts (`stream.startup_mode`); a position the user names, or the
    source's, is one of the lake's current `lineage`."""
    mode = config.stream.startup_mode
    if mode == "initial":
        return min(BinlogOffset(f, p) for m in marks.values() for f, p in m.high_watermarks)
    if mode == "specific-offset":
        assert config.stream.startup_file is not None and config.stream.startup_pos is not None
        return BinlogOffset(config.stream.startup_file, config.stream.startup_pos).on(lineage)
    if mode == "timestamp":
        assert config.stream.startup_timestamp is not None
        return first_offset_at_or_after(
            source, config.stream_server_id, config.stream.startup_timestamp
        ).on(lineage)
    if mode == "gtid":
        assert config.stream.startup_gtid is not None
        found = offset_of_gtid(source, config.stream_server_id, config.stream.startup_gtid)
        if found is None:
            raise SourceError(
                f"the source at {source.host}:{source.port} does not hold GTID position "
                f"{config.stream.startup_gtid} in its binlog (purged, or never written there: "
                "SHOW BINARY LOGS and @@gtid_binlog_state, or MySQL's @@gtid_executed and "
                "@@gtid_purged, show what it holds)"
            )
        return found.on(lineage)
    return head_offset(source, lineage)


@dataclass(frozen=True)
class StreamSummary:
    batches: int
    changes: int
    seconds: float


def run_stream(spark: SparkSession, config: Config, available_now: bool = False) -> StreamSummary:
    """Start (or resume) the streaming query; with `available_now`, catch up and return."""
    lease = stream_lease(driver_files(spark), config)
    with (
        lease.held("binlake stream") as held,
        session_settings(spark, DETERMINISTIC_MERGE_SOURCES),
        session_settings(spark, KEY_SETS_BY_REFERENCE),  # apart: a compute may refuse them alone
    ):
        if available_now:
            return _run_stream(spark, config, held, available_now=True)
        if config.stream.trigger != "available_now":
            try:
                return _run_stream(spark, config, held, available_now=False)
            except Exception as refused:
                if config.stream.trigger == "processing_time" or not _trigger_refused(refused):
                    raise
                log.warning(
                    "this compute runs no processing-time trigger (%s): the stream runs the "
                    "catch-up every %s instead (stream.trigger: available_now)",
                    str(refused).splitlines()[0], config.stream.trigger_interval,
                )  # fmt: skip
        return _repeat_available_now(spark, config, held)


def _trigger_refused(error: Exception) -> bool:
    """Whether starting a query failed because the compute runs no processing-time trigger
    (Databricks serverless: only AvailableNow and Once)."""
    text = str(error).lower()
    return "trigger" in text and ("not supported" in text or "unsupported" in text)


def _repeat_available_now(spark: SparkSession, config: Config, lease: HeldLease) -> StreamSummary:
    """The continuous stream as a catch-up (`stream --available-now`) every `trigger_interval`,
    until one fails or the process is stopped: each run is a query of its own over the same
    checkpoint, so the guarantees are the catch-up's (a change lands once, a restart resumes);
    a change waits up to one interval plus one run."""
    while True:
        began = time.monotonic()
        _run_stream(spark, config, lease, available_now=True)
        lease.check()
        time.sleep(max(0.0, config.stream.trigger_seconds - (time.monotonic() - began)))


def _recovers_purges(stream: StreamConfig) -> bool:
    """Whether a purged binlog starts the job anew: only a job built from a snapshot can."""
    return stream.startup_mode == "initial" and stream.on_binlog_purged == "resnapshot"


def _run_stream(
    spark: SparkSession, config: Config, lease: HeldLease, available_now: bool
) -> StreamSummary:
    """Start the query and follow it. A query that lost its binlog position while running is
    started once more: its start finds out whether the source purged that binlog (and then
    starts the job anew, `stream.on_binlog_purged`) or not (and then stops)."""
    try:
        return _start_and_follow(spark, config, lease, available_now)
    except BinlogResetError:
        raise
    except SourceReplacedError as replaced:
        log.warning("stream %s: %s", config.stream.job_name, str(replaced))
        return _start_and_follow(spark, config, lease, available_now)
    except BinlogPurgedError as lost:
        if not _recovers_purges(config.stream):
            raise
        log.warning(
            "stream %s: %s; checking the source's binlog", config.stream.job_name, str(lost)
        )
        return _start_and_follow(spark, config, lease, available_now)


def _start_and_follow(
    spark: SparkSession, config: Config, lease: HeldLease, available_now: bool, anew: bool = False
) -> StreamSummary:
    if config.source.binlog_archive is not None:
        return _follow_archive(spark, config, lease, config.source.binlog_archive, available_now)
    started = time.monotonic()
    if restart_pending(spark, config):
        start_anew(spark, config, None, [])
    source = with_resolved_password(config.source)
    tables, server = _source_tables(spark, config, source)
    files = driver_files(spark)
    job = _job_tables(spark, config, files, tables)
    rebased = _start_position(files, config, source, job)
    start = rebased.start
    try:
        check_available(source, start, sorted(job.joined), config.stream.job_name)
    except BinlogResetError:
        raise
    except BinlogPurgedError:
        if anew or not _recovers_purges(config.stream):
            raise
        start_anew(spark, config, start, sorted(job.joined))
        return _start_and_follow(spark, config, lease, available_now, anew=True)
    warn_if_purge_near(config, source, start)
    _prepare_silver(spark, config, job, start)
    spec = replace(
        stream_spec(config, source, start, job.marks),
        server=server, rebase=rebased.rebase, replayed=rebased.replayed,
    )  # fmt: skip
    sink = BatchSink(config, spec, tables, checkpoint_path(config), files)
    if job.initial:
        join_ready_tables(spark, config, spec, job.by_name, start, sink.ends)
    log.info(
        "stream %s: starting at %s (%s)",
        config.stream.job_name, start, "resume" if job.resume else config.stream.startup_mode,
        extra=event("stream_start", sorted(job.joined), start),
    )  # fmt: skip
    resnapshots = Resnapshots(spark, config, list(job.by_name), job.joined)
    # Spark 4.0/4.1 run a Python source's AvailableNow as one batch (of at most
    # stream.max_bytes_per_batch, or the batch a crash left planned): the catch-up starts the
    # query again, from where it ended, until it reaches the head it began at. (Which Spark the
    # source runs on is the server's: a Spark Connect client may be newer.)
    target = head_offset(source, start.lineage) if available_now else None
    batches, changes, spec = _run_queries(spark, config, lease, sink, resnapshots, target)
    if available_now:
        batches_committed(config.stream.job_name)  # the queries ended by themselves
        end = spec.on_source(checkpoint_offset(files, config) or start)
        resnapshots.finish(spec, job.by_name, end)
    return StreamSummary(batches, changes, time.monotonic() - started)


def _follow_archive(
    spark: SparkSession, config: Config, lease: HeldLease, folder: str, available_now: bool
) -> StreamSummary:
    """The stream of a binlog archive (`source.binlog_archive`): from its oldest file, or the
    checkpoint, to its newest file's end (`available_now`) or on as files are added. No server
    is asked: a table enters silver at its first row event (`binlog_archive`), with no
    snapshot to filter against; the sink applies each batch as it applies a server's. A DDL
    silver cannot follow stops the stream (`stream.on_unfollowable_ddl: stop`)."""
    started = time.monotonic()
    archive = BinlogArchive(folder)
    # A table silver cannot follow stops the stream: an archive has no server to snapshot.
    stream = config.stream.model_copy(update={"on_unfollowable_ddl": "stop"})
    config = config.model_copy(update={"stream": stream})
    files = driver_files(spark)
    start = checkpoint_offset(files, config) or archive.first()
    if config.source.capture.database is not None:
        create_schemas(spark, config, [config.source.capture.database])
    spec = replace(
        stream_spec(config, with_hash_salt(config.source), start, {}), read_ids=(), archive=folder
    )
    sink = BatchSink(config, spec, [], checkpoint_path(config), files)
    log.info(
        "stream %s: starting at %s of the binlog archive %s (%s)",
        config.stream.job_name, start, folder, ", ".join(archive.files()),
        extra=event("stream_start", [], start),
    )  # fmt: skip
    resnapshots = Resnapshots(spark, config, [], {})
    target = archive.head() if available_now else None
    batches, changes, _ = _run_queries(spark, config, lease, sink, resnapshots, target)
    if available_now:
        batches_committed(config.stream.job_name)
    return StreamSummary(batches, changes, time.monotonic() - started)


def _source_tables(
    spark: SparkSession, config: Config, source: SourceConfig
) -> tuple[list[TableSchema], int]:
    """The configured tables as the source holds them (validated, row filters checked) and the
    source's server id."""
    with connection(source) as conn:
        tables = validate(conn, config, config.stream_server_id)
        server = server_identity(conn)
        if not logs_column_names(conn):
            log.warning(
                "the source has binlog_row_metadata other than FULL: row images carry no column "
                "names, so after a rename that keeps the column types the stream cannot tell "
                "the columns apart (set binlog_row_metadata=FULL, MariaDB 10.5+ / MySQL 8.0+)"
            )
    check_row_filters(spark, config, tables)
    return tables, server


@dataclass(frozen=True)
class _JobTables:
    """What a start knows of the job's tables before it picks its offset (see `_job_tables`)."""

    tables: list[TableSchema]  # the configured ones, as the source holds them
    initial: bool  # `stream.startup_mode: initial`: silver is built from a snapshot
    resume: BinlogOffset | None  # the checkpoint's committed end
    first_start: bool
    registry: StreamTables
    joined: dict[str, BinlogOffset | None]  # the tables the job applies, since when
    applied: list[TableSchema]
    chunks: list[ChunkState]  # the snapshot's, with `initial`
    history: SchemaHistory
    histories: dict[str, list[SchemaEntry]]  # of `applied`
    marks: dict[str, ChunkMarks]

    @property
    def by_name(self) -> dict[str, TableSchema]:
        return {t.qualified: t for t in self.tables}


def _job_tables(
    spark: SparkSession, config: Config, files: LakeFiles, tables: list[TableSchema]
) -> _JobTables:
    """The tables the job applies, their snapshot's chunks and watermarks and their schema
    history; refuses row filters changed since silver took them (`TableRules`)."""
    initial = config.stream.startup_mode == "initial"
    create_schemas(spark, config, {t.database for t in tables})
    registry = StreamTables(tables_path(config), files)
    resume = checkpoint_offset(files, config)
    # The job's first start applies every configured table; silver that exists already (a job
    # started anew after a purged binlog, over re-snapshotted bronze) is replaced from bronze.
    # The table list is recorded only once silver is replaced: a first start that fails before
    # (a snapshot not finished, a crash) is a first start again.
    first_start = resume is None and not registry.exists()
    joined = dict.fromkeys(t.qualified for t in tables) if first_start else registry.read()
    applied = [t for t in tables if t.qualified in joined]
    filters = TableRules(config, files)
    if first_start and not initial:  # no snapshot: silver holds what the stream filters
        filters.record(applied)
    filters.require_unchanged(applied)
    chunks = Ledger(spark, ledger_path(config)).chunks() if initial else []
    history = schema_history(spark, config)
    # Read once, 8 tables at once; nothing in this start-up records DDL before
    # `_prepare_silver` uses it.
    histories = history.entries_of(t.qualified for t in applied)
    created = _created_while_streaming(histories)
    marks = chunk_marks(applied, chunks, joined, created) if initial else {}
    return _JobTables(
        tables, initial, resume, first_start, registry, joined, applied, chunks, history,
        histories, marks,
    )  # fmt: skip


def _start_position(
    files: LakeFiles, config: Config, source: SourceConfig, job: _JobTables
) -> _Rebased:
    """Where the query starts: the checkpoint's end (`_rebased`), or a new job's start
    (`start_offset`, resolved once), on the source as it is now."""
    if job.resume is not None:
        return _rebased(files, config, source, job.resume, sorted(job.joined), job.chunks)
    lineage = current_lineage(files, config).number
    resolved = resolved_start(
        files, config, lambda: start_offset(config, source, job.marks, lineage)
    )
    reads = snapshot_reads(high_watermarks(job.chunks), resolved)
    return _Rebased(locate(files, config, source, resolved, sorted(job.joined), reads))


def _prepare_silver(
    spark: SparkSession, config: Config, job: _JobTables, start: BinlogOffset
) -> None:
    """Each applied table's silver there (built from bronze on a job's first start), its
    schema history started, and on a first start the job's table list recorded."""
    by_name = job.by_name
    bronze_rows = snapshot_rows(job.chunks)
    if job.first_start and job.initial:
        log.info(
            "stream %s: building silver of %s from bronze (the job's first start)",
            config.stream.job_name, counted(len(job.applied), "table"),
        )  # fmt: skip

    def prepare(name: str) -> None:
        table = by_name[name]
        if not job.first_start:
            require_silver(spark, config, table)
        # Silver from bronze starts in bronze's schema, the one in force at the stream's start,
        # not the server's of now: DDL since then is the stream's to apply, in order.
        entry = entry_at(job.histories[name], start) if job.initial else None
        ensure_silver(
            spark, config, entry.schema if entry and entry.schema else table,
            from_bronze=job.initial, replace=job.first_start and job.initial,
            bronze_rows=bronze_rows.get(name),
        )  # fmt: skip
        if not job.histories[name]:  # a lake from before the schema history
            job.history.reset(name, SchemaEntry(start, table))

    side_by_side(prepare, [t.qualified for t in job.applied], config)
    if job.first_start:
        joined = job.joined
        job.registry.update(lambda recorded: {**joined, **recorded})


def _run_queries(
    spark: SparkSession,
    config: Config,
    lease: HeldLease,
    sink: BatchSink,
    resnapshots: Resnapshots,
    target: BinlogOffset | None,
) -> tuple[int, int, StreamSpec]:
    """Run the query into `sink` until it ends, again from where it ended while that is short
    of `target` (an available-now catch-up's head); (batches, changes, the last query's spec)."""
    spec = sink.spec
    available_now = target is not None
    batches = changes = 0
    while True:
        spark.dataSource.register(binlog_source(spec))
        query = _query(spark, config, spec, sink, available_now).start()
        try:
            ran = _follow(query, config.stream, lease, resnapshots)
        except StreamingQueryException as failure:
            raise sink.failure or carried_by(failure) or failure from None
        batches, changes = batches + ran[0], changes + ran[1]
        reached = spec.on_source(checkpoint_offset(sink.files, config) or spec.start)
        if target is None or reached >= target or reached <= spec.start:
            return batches, changes, spec
        spec = replace(spec, start=reached)


def _query(
    spark: SparkSession, config: Config, spec: StreamSpec, sink: BatchSink, available_now: bool
) -> DataStreamWriter:
    """The stream query of `spec`'s registered source into `sink`, not started yet."""
    writer = (
        spark.readStream.format(spec.name)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint_path(config))
        .queryName(config.stream.job_name)
    )
    if available_now:
        return writer.trigger(availableNow=True)
    # Spark parses "N milliseconds", not the config's "5s" shorthand.
    interval = round(config.stream.trigger_seconds * 1000)
    return writer.trigger(processingTime=f"{interval} milliseconds")


def _follow(
    query: StreamingQuery, stream: StreamConfig, lease: HeldLease, resnapshots: Resnapshots
) -> tuple[int, int]:
    """Wait for the query, logging each batch's progress and snapshotting again the tables it
    sent back; (batches, changes) when it ends. A lease taken over by another process, or a
    failed snapshot, stops the query."""
    totals = [0, 0]
    seen: set[int] = set()
    running = RunningBatch(stream.job_name)
    try:
        while query.isActive:
            _await(query, min(max(stream.trigger_seconds, 1.0), 10.0))
            _log_progress(query, seen, totals)
            running.report_if_long(query)
            lease.check()
            resnapshots.poll()
    except BaseException:  # KeyboardInterrupt too: a query left running outlives its process
        with contextlib.suppress(Exception):
            query.stop()
        raise
    _log_progress(query, seen, totals)
    failure = query.exception()
    if failure is not None:
        raise failure
    return totals[0], totals[1]


#: The longest a batch runs without a line (the snapshot's quiet lines keep the same pace).
QUIET_AT_MOST_S = 30.0


class RunningBatch:
    """A line every `QUIET_AT_MOST_S` while one batch runs: a large backlog's batch, or the
    first MERGE into a large silver, can take minutes, and the batch's own line comes only
    once it is done. The batch running is the one after the query's last progress, while
    Spark says a trigger is active with data to process; `clock` is `time.monotonic` but for
    tests."""

    def __init__(self, job: str, clock: Callable[[], float] = time.monotonic) -> None:
        self.job = job
        self._clock = clock
        self._batch: int | None = None  # the batch seen running at the last poll
        self._since = self._said = 0.0

    def report_if_long(self, query: StreamingQuery) -> None:
        status, last = query.status, query.lastProgress
        if not (status.get("isTriggerActive") and status.get("isDataAvailable")):
            self._batch = None
            return
        batch = 0 if not last else int(last["batchId"]) + 1
        now = self._clock()
        if batch != self._batch:
            self._batch, self._since, self._said = batch, now, now
        elif now - self._said >= QUIET_AT_MOST_S:
            log.info(
                "stream %s: batch %d running, %.0f s so far (%s)",
                self.job, batch, now - self._since, str(status.get("message", "")).lower(),
            )  # fmt: skip
            self._said = now


def _await(query: StreamingQuery, seconds: float) -> None:
    """Wait up to `seconds` for `query` to end, in Python between short polls rather than in
    one gateway call, so that a Ctrl-C lands where `runtime.interrupts` can cancel Spark's
    jobs at once."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and query.isActive:
        raise_if_interrupted()
        time.sleep(0.2)


def _input_rows(progress: dict[str, Any]) -> int:
    """A batch's input rows: a Spark Connect client's progress may leave out the query's total,
    never the sources' own."""
    total = progress.get("numInputRows")
    if total is None:
        total = sum(source.get("numInputRows") or 0 for source in progress["sources"])
    return int(total)


def _rate(progress: dict[str, Any], rows: int) -> float:
    """A batch's changes per second of its own run time: a Spark Connect client's progress may
    leave out `processedRowsPerSecond` (or give 0), never `durationMs`."""
    rate = progress.get("processedRowsPerSecond")
    if rate:
        return float(rate)
    millis = (progress.get("durationMs") or {}).get("triggerExecution") or 0
    return rows * 1000.0 / millis if millis else 0.0


def offset_text(offset: str | dict[str, Any] | None) -> str:
    """A stream offset as binlake's lines spell binlog positions (`file:pos`), whether Spark's
    progress holds it as its JSON text or parsed; "-" when the progress has none: nothing,
    JSON `null`, or an empty text (Spark 4.0 and 4.1 report no latest offset of a Python
    source). A log line never fails its batch: text that is not an offset is shown as it is."""
    if offset is None or (isinstance(offset, str) and not offset.strip()):
        return "-"
    try:
        data = json.loads(offset) if isinstance(offset, str) else offset
        return "-" if data is None else str(BinlogOffset.from_dict(data))
    except (ValueError, TypeError, KeyError):
        return str(offset)


def _log_progress(query: StreamingQuery, seen: set[int], totals: list[int]) -> None:
    """Log each batch not seen yet; add it to `totals` ([batches, changes])."""
    for progress in query.recentProgress:
        if progress["batchId"] in seen:
            continue
        seen.add(progress["batchId"])
        rows = _input_rows(progress)
        if rows:
            totals[0] += 1
            totals[1] += rows
            source = progress["sources"][0]
            log.info(
                "stream batch %d: %d binlog records (row changes and DDL), %.0f records/s, "
                "read to %s, binlog head at %s",
                progress["batchId"], rows, _rate(progress, rows),
                offset_text(source.get("endOffset")), offset_text(source.get("latestOffset")),
            )  # fmt: skip
