"""Tables a stream sent back to their snapshot, snapshotted again while the stream runs.

A DDL silver cannot follow from the binlog (a partition dropped or exchanged, a table renamed
onto a captured name, a change silver's columns cannot take) sends its table back from inside
the stream's batch (`snapshot.send_back`): its reset is pending and no job applies it. With
`stream.on_unfollowable_ddl: resnapshot` the stream's driver then snapshots that table by
itself, in a thread beside the running query, so every other table keeps streaming; the first
batch after the snapshot finishes joins the table again (`joining.join_ready_tables`): silver
replaced from the new bronze (its Change Data Feed shows the rows that went), caught up from
the new high watermarks. A catch-up (`--available-now`) snapshots and joins such tables once its
query ends, so each run ends exact. A snapshot of the lake running elsewhere holds the lease and
finishes the reset itself; a crash leaves the reset pending, and the next stream or snapshot
finishes it.

A stream whose binlog position the source purged cannot go on at all: with
`stream.on_binlog_purged: resnapshot` it starts anew (`start_anew`) instead of stopping.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Collection, Mapping

from pyspark.sql import SparkSession

from binlake.config.settings import Config
from binlake.errors import LeaseError
from binlake.lake.event_log import event
from binlake.lake.files import driver_files
from binlake.lake.lease import snapshot_lease
from binlake.lake.paths import checkpoint_path, ledger_path, restart_path
from binlake.model.capture import split_qualified
from binlake.model.offsets import BinlogOffset
from binlake.model.schema import TableSchema
from binlake.snapshot.ledger import Ledger
from binlake.snapshot.resets import PendingResets
from binlake.snapshot.task import run_snapshot
from binlake.stream.binlog_source import StreamSpec
from binlake.stream.joining import join_ready_tables

log = logging.getLogger(__name__)


class Resnapshots:
    """The snapshots of a stream job's tables sent back to their snapshot."""

    def __init__(
        self,
        spark: SparkSession,
        config: Config,
        tables: list[str],
        joined: Collection[str] = (),
    ) -> None:
        """`tables`: the job's ("db.table"); `joined`: those the stream applies as it starts."""
        self.spark, self.config, self.tables = spark, config, tables
        self.files = driver_files(spark)
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self._unfinished = self._unfinished_snapshots(set(joined))

    def pending(self) -> list[str]:
        """The job's tables to snapshot again ("db.table"): those whose reset is pending, and
        those out of the stream whose snapshot stopped after its plan was recorded."""
        if self.config.stream.on_unfollowable_ddl != "resnapshot":
            return []
        resets = PendingResets(self.files, self.config)
        pending = {
            t for d in {split_qualified(t)[0] for t in self.tables} for t in resets.of_database(d)
        }
        return [t for t in self.tables if t in pending or t in self._unfinished]

    def _unfinished_snapshots(self, joined: set[str]) -> set[str]:
        """The job's tables out of the stream (`joined` lacks them) whose plan in the ledger has
        chunks not finished. A snapshot ends its table's pending reset once the new plan is
        recorded, before reading a chunk: a crash after that leaves no pending reset, and
        without this nothing would resume the snapshot, so the table would never rejoin. Read
        once, at the stream's start; a table out of the stream is rare, so the ledger is read
        only then."""
        if self.config.stream.on_unfollowable_ddl != "resnapshot":
            return set()
        out = {t for t in self.tables if t not in joined}
        if not out:
            return set()
        chunks = Ledger(self.spark, ledger_path(self.config)).chunks()
        return {c.table for c in chunks if c.table in out and not c.finished}

    def poll(self) -> None:
        """Start the snapshot of the tables sent back, unless a snapshot runs (here, or
        elsewhere: it holds the lease); raise what stopped the last one."""
        if self._failure is not None:
            raise self._failure
        if self._thread is not None and self._thread.is_alive():
            return
        pending = self.pending()
        if not pending or snapshot_lease(self.files, self.config).holder() is not None:
            return
        self._thread = threading.Thread(
            target=self._snapshot, args=(pending,), name="binlake-resnapshot", daemon=True
        )
        self._thread.start()

    def _snapshot(self, tables: list[str]) -> None:
        try:
            self._run(tables)
        except LeaseError:
            log.info("resnapshot of %s: another snapshot took the lease first", ", ".join(tables))
        except BaseException as exc:  # raised in the driver's thread by the next `poll`
            self._failure = exc

    def _run(self, tables: list[str]) -> None:
        log.info("resnapshot of %s: started beside the stream", ", ".join(tables))
        run_snapshot(self.spark, self.config, [t.split(".", 1)[1] for t in tables])
        self._unfinished.difference_update(tables)

    def finish(
        self, spec: StreamSpec, by_name: Mapping[str, TableSchema], position: BinlogOffset
    ) -> list[str]:
        """At the end of a catch-up: wait for a running snapshot, run the one still pending,
        and join every table whose snapshot finished at `position` (the last batch's end)."""
        if self._thread is not None:
            self._thread.join()
        if self._failure is not None:
            raise self._failure
        pending = self.pending()
        if pending:
            self._run(pending)
        return join_ready_tables(self.spark, self.config, spec, dict(by_name), position)


def start_anew(
    spark: SparkSession, config: Config, lost_at: BinlogOffset | None, tables: list[str]
) -> None:
    """Start the stream job anew after the source purged binlog it had not read
    (`stream.on_binlog_purged: resnapshot`): its tables are snapshotted again, and its
    checkpoint goes, so its next start is a first start under the same name: silver replaced
    from the new bronze (its Change Data Feed shows what changed meanwhile), streamed from the
    new high watermarks. The changes in the purged binlog are gone: silver is exact again, the
    changelog has a gap there.

    The decision is recorded first (`layout.restart_path`, with `lost_at`; None: finish one a
    crash interrupted), so a crash at any step makes the next start finish it, never resume
    from an old checkpoint or an old snapshot."""
    files = driver_files(spark)
    marker = restart_path(config)
    if lost_at is not None:
        files.write_text(marker, json.dumps({"lost_at": lost_at.to_dict(), "tables": tables}))
        log.warning(
            "stream %s: the source purged its binlog at %s before the stream read it, so the "
            "changes there to %s are gone: the tables are snapshotted again and the job starts "
            "anew from that snapshot (stream.on_binlog_purged: resnapshot)",
            config.stream.job_name, lost_at, ", ".join(tables),
            extra=event("binlog_purged", tables, lost_at),
        )  # fmt: skip
    else:
        log.info("stream %s: finishing its new start after a purged binlog", config.stream.job_name)
    files.delete_tree(checkpoint_path(config))
    run_snapshot(spark, config, None, reset=True)
    files.delete(marker)


def restart_pending(spark: SparkSession, config: Config) -> bool:
    """Whether a new start after a purged binlog was decided and not finished."""
    return driver_files(spark).exists(restart_path(config))
