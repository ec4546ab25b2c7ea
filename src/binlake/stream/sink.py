"""The stream's `foreachBatch` sink: each table's rows and DDL in binlog order
(`table_changes`), with the Spark settings its silver sizes call for (`batch_settings`), then the
tables that are ready to join (`joining`).

Per table, the batch's DDL split its rows into segments: the rows before a DDL are applied
(changelog + MERGE, `silver.merge.TableApply`), then silver follows the DDL (`silver.schema_follow`)
and the schema history records it, then the rows after it. Tables are applied side by side. A table
joins the stream when its snapshot has finished (added to `source.tables`, or re-snapshotted with
`--reset`): its own changes from its chunks' high watermarks up to the stream's position are read
and applied first (Flink CDC's newly-added-table protocol, without pausing the other tables), then
the job's table list records it from that offset on, so each change is applied once.
"""

from __future__ import annotations

import json
import logging
import time

import pymysql
from pyspark.sql import DataFrame

from binlake.config.settings import Config
from binlake.errors import BinlakeError
from binlake.lake.event_log import attach, event
from binlake.lake.files import LakeFiles, join
from binlake.lake.stream_tables import StreamTables
from binlake.model.offsets import MAX_ROW, BinlogOffset, bytes_behind, position_token
from binlake.model.schema import TableSchema
from binlake.mysql.binlog_archive import BinlogArchive
from binlake.mysql.connection import connection
from binlake.mysql.retention import warn_if_purge_near
from binlake.mysql.schema_history import SchemaHistory
from binlake.mysql.server import binlog_sizes, current_offset
from binlake.runtime.spark import (
    is_connect,
)
from binlake.silver.merge import (
    ChangelogEnds,
    timed,
)
from binlake.stream.batch_settings import SilverSizes, settings_for
from binlake.stream.batch_summary import BatchSummary, batch_summary, collectable
from binlake.stream.binlog_source import StreamSpec
from binlake.stream.joining import join_ready_tables, left_to_snapshot
from binlake.stream.side_by_side import side_by_side
from binlake.stream.table_changes import StreamWrites, apply_table_changes

log = logging.getLogger(__name__)

#: How often a stream that is behind compares its oldest unapplied change with the source's
#: binlog expiry (it always does at its start).
RETENTION_CHECK_S = 300.0


class BatchSink:
    """The `foreachBatch` function of the stream query `spec.name`."""

    def __init__(
        self,
        config: Config,
        spec: StreamSpec,
        tables: list[TableSchema],
        checkpoint: str,
        files: LakeFiles,
    ) -> None:
        self.config = config
        self.spec = spec
        self.tables = {t.qualified: t for t in tables}  # the config's tables
        self.checkpoint = checkpoint
        self.files = files
        self.history = SchemaHistory(spec.history_root, files)
        self.joined = StreamTables(spec.tables_path, files)
        self.failure: BinlakeError | None = None  # what stopped the query, for a clean message
        self.ends = ChangelogEnds()  # this run's appends, the joins' included
        self.sizes = SilverSizes()  # for the choice of settings, see `settings_for`
        self._query_id: str | None = None
        self._last: tuple[int, BinlogOffset | None] | None = None  # the last batch's id and end
        self._retention_due = time.monotonic() + RETENTION_CHECK_S  # the start checked already
        #: `source.binlog_archive`'s files, whose head each batch's lag is measured against.
        self.archive = BinlogArchive(spec.archive) if spec.archive is not None else None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if is_connect(batch.sparkSession):  # a Spark Connect server's worker, not the job's process
            attach(batch.sparkSession, self.config, self.spec.job, in_batch_worker=True)
        try:
            self.apply_batch(batch, batch_id)
        except BinlakeError as exc:
            self.failure = exc
            raise

    def apply_batch(self, batch: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        logged = batch_end(self.files, self.checkpoint, batch_id)
        batch = batch.persist()
        try:
            summary = batch_summary(batch, collectable(self._start_of(batch_id), logged))
            counts, ddl = summary.counts, summary.ddl
            # Skipped: a table taken out of the job (`snapshot --reset`) after this batch was
            # planned. A table the batch creates joins by its CREATE, unless a snapshot holds it.
            joined = self.joined.read()
            created = {d.table for d in ddl if d.before is None and d.after is not None}
            created -= left_to_snapshot(batch.sparkSession, self.config, created - joined.keys())
            names = sorted(
                t for t in {*counts, *(d.table for d in ddl)}
                if t in joined or t in created or t not in self.tables
            )  # fmt: skip
            changed = {name: counts.get(name, 0) for name in names}
            with settings_for(batch.sparkSession, self.config, self.tables, changed, self.sizes):
                steps = self._apply_tables(batch, names, summary, self._applied_before(logged))
            for name in names:
                if name in self.tables:
                    own_ddl = any(d.table == name for d in ddl)
                    self.sizes.applied(self.config, self.tables[name], counts.get(name, 0), own_ddl)
        finally:
            batch.unpersist()
        self._last = (batch_id, logged)
        end = None if logged is None else self.spec.on_source(logged)
        if end is not None:
            join_ready_tables(
                batch.sparkSession, self.config, self.spec, self.tables, end, self.ends
            )
        lag_bytes, lag_seconds = self.batch_lag(end, summary.newest)
        if end is not None and lag_bytes and time.monotonic() >= self._retention_due:
            # The stream's binlog reader is idle while its batch is applied: its server id is
            # free for the scan.
            warn_if_purge_near(self.config, self.spec.source, end)
            self._retention_due = time.monotonic() + RETENTION_CHECK_S
        log.info(
            "batch %d applied in %.1f s: %s; %s",
            batch_id, time.monotonic() - started,
            ", ".join(f"{t} {counts.get(t, 0)} changes {s:.1f} s" for t, s in steps) or "nothing",
            lag_text(lag_bytes, lag_seconds),
            extra=event(
                "stream_batch", names, end, sum(counts.values()), time.monotonic() - started,
                lag_bytes, lag_seconds, (self._events_id(), batch_id),
            ),
        )  # fmt: skip

    def _start_of(self, batch_id: int) -> BinlogOffset | None:
        """Where micro-batch `batch_id` starts: the end of the batch before it (this run's last,
        or read from the offset log); None for the query's first."""
        if self._last is not None and self._last[0] == batch_id - 1:
            return self._last[1]
        return batch_end(self.files, self.checkpoint, batch_id - 1) if batch_id > 0 else None

    def batch_lag(
        self, end: BinlogOffset | None, newest: int | None
    ) -> tuple[int | None, float | None]:
        """How far the source's binlog head is past the batch's end, in bytes, and in seconds
        since the batch's newest change was committed (0 once caught up); None if unknown."""
        if end is None:
            return None, None
        if self.archive is not None:
            behind = bytes_behind(end, self.archive.head(), self.archive.sizes())
            return behind, None if behind else 0.0
        try:
            with connection(self.spec.source) as conn:
                head = current_offset(conn).on(end.lineage)
                behind = bytes_behind(end, head, binlog_sizes(conn))
        except (BinlakeError, pymysql.MySQLError) as exc:
            log.debug("batch lag unknown: %s", exc)
            return None, None
        if behind == 0 or newest is None:
            return behind, 0.0
        return behind, max(time.time() - newest, 0.0)

    def _events_id(self) -> str:
        """The id of this query's event appends: its checkpoint's own id, so a job started anew
        under the same name (batch ids from 0 again) is not taken for a replay."""
        if self._query_id is None:
            text = self.files.read_text(join(self.checkpoint, "metadata")) or "{}"
            self._query_id = str(json.loads(text).get("id", self.spec.job))
        return f"binlake-stream-{self._query_id}"

    def _applied_before(self, logged: BinlogOffset | None) -> tuple[str, str] | None:
        """The offset tokens this batch's changes had when it was planned on a source replaced
        since (`StreamSpec.replayed`): what it applied then is not applied again."""
        replayed = self.spec.replayed
        if replayed is None or logged != replayed[1]:
            return None
        return position_token(replayed[0], 0), position_token(replayed[1], MAX_ROW)

    def _apply_tables(
        self,
        batch: DataFrame,
        names: list[str],
        summary: BatchSummary,
        applied_before: tuple[str, str] | None,
    ) -> list[tuple[str, float]]:
        writes = StreamWrites(
            batch.sparkSession, self.config, self.history, self.joined, self.ends, applied_before
        )

        def one(name: str) -> tuple[str, float]:
            _, seconds = timed(apply_table_changes, writes.table(batch, summary, name))
            return name, seconds

        return side_by_side(one, names, self.config)


def batch_end(files: LakeFiles, checkpoint: str, batch_id: int) -> BinlogOffset | None:
    """The end offset of micro-batch `batch_id`, from the query's offset log (written before
    the batch runs)."""
    logged = files.read_text(join(checkpoint, "offsets", str(batch_id)))
    if logged is None:
        return None
    return BinlogOffset.from_dict(json.loads(logged.strip().splitlines()[-1]))


def lag_text(lag_bytes: int | None, lag_seconds: float | None) -> str:
    """How far the source is past a batch, for its line: "caught up", or the binlog bytes and
    seconds since the batch's newest change committed."""
    if lag_bytes is None or lag_seconds is None:
        return "lag unknown"
    if lag_bytes == 0:
        return "caught up"
    return f"{lag_bytes:,} binlog bytes, {lag_seconds:.0f} s behind the source"
