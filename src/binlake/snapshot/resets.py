"""Table resets: a table's snapshot forgotten so that it is read again from scratch.

A reset runs in steps that each survive a crash: it marks the table's reset pending
(`PendingResets`), takes the table out of every stream job's table list (`send_back`), waits for
a running stream's batch that may still write the table (`_await_batch_in_flight`), then drops
the table's ledger rows and empties its bronze table (`reset_table`). The next snapshot finishes
a reset that stopped at any step, and ends it once the table's new plan is in the ledger.
"""

from __future__ import annotations

import logging
import time

from pyspark.sql import SparkSession

from binlake.config.settings import Config
from binlake.errors import SourceError
from binlake.lake.event_log import event
from binlake.lake.files import LakeFiles, batch_ids, driver_files, join
from binlake.lake.lease import stream_lease
from binlake.lake.paths import checkpoints_root, resets_root, tables_path
from binlake.lake.stream_tables import StreamTables
from binlake.lake.tables import bronze_schema, bronze_table, local_frame
from binlake.model.schema import TableSchema
from binlake.mysql.column_rules import lake_view
from binlake.snapshot.ledger import Ledger

log = logging.getLogger(__name__)

#: How long a reset waits for a running stream's batch that may still write the table.
IN_FLIGHT_WAIT_S = 300.0


class PendingResets:
    """Tables whose reset began and whose new plan is not in the ledger yet: one file each under
    `_system/resets`, created as a reset's first step and removed once the new plan is in the
    ledger. While it exists no stream joins the table (its old plan and bronze are going), and
    every snapshot finishes the reset before planning, so a reset that stopped at any point is
    completed by the next run, `--reset` or not."""

    def __init__(self, files: LakeFiles, config: Config) -> None:
        self.files = files
        self.root = resets_root(config)

    def _file(self, table: str) -> str:
        database, name = table.split(".", 1)
        return join(self.root, database, f"{name}.json")

    def begin(self, table: str) -> None:
        """Mark the reset of `table` ("db.table") pending."""
        self.files.write_text(self._file(table), "{}")

    def end(self, table: str) -> None:
        """The reset of `table` is done: its new plan is in the ledger."""
        self.files.delete(self._file(table))

    def pending(self, table: str) -> bool:
        """Whether the reset of `table` ("db.table") began and has not ended."""
        return self.files.exists(self._file(table))

    def of_database(self, database: str) -> set[str]:
        """The database's tables ("db.table") whose reset is pending: one listing."""
        names = self.files.names(join(self.root, database))
        return {f"{database}.{n.removesuffix('.json')}" for n in names if n.endswith(".json")}


def reset_table(spark: SparkSession, config: Config, ledger: Ledger, table: TableSchema) -> None:
    """Forget a table's snapshot so it is read again: its ledger rows and bronze rows go, and
    every stream job stops applying it until the new snapshot finishes; then the stream replaces
    its silver from the new bronze and catches it up from the new high watermarks (see
    `sink.join_ready_tables`). The changelog keeps the changes applied before the reset.

    The first step marks the reset pending (`PendingResets`), which keeps a stream from joining
    the table from its old plan and bronze while they go, and makes the next snapshot finish a
    reset that stopped halfway."""
    files = driver_files(spark)
    for checkpoint in send_back(files, config, table.qualified):
        _await_batch_in_flight(files, checkpoint)
    ledger.forget(table.qualified)
    # Emptied in place (a new version of the same table; a catalog's CREATE OR REPLACE), never
    # dropped: Delta keeps a view of each table per session, which a dropped and re-created
    # table would contradict.
    bronze_table(config, table).save(
        local_frame(spark, [], bronze_schema(lake_view(config.source, table)))
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
    )
    log.info(
        "snapshot: %s reset; its snapshot starts again", table.qualified,
        extra=event("table_reset", [table.qualified]),
    )  # fmt: skip


def send_back(files: LakeFiles, config: Config, name: str) -> list[str]:
    """A reset's first steps: mark the table's reset pending, then take it out of every stream
    job's table list. Returns the checkpoints of the running jobs that applied it (a batch of
    theirs planned before may still write it). A stream meeting a DDL it cannot follow sends
    the table back this way from inside its batch; its next snapshot does the rest."""
    checkpoints = checkpoints_root(config)
    PendingResets(files, config).begin(name)
    running = []
    for job in files.names(checkpoints):
        joined = StreamTables(tables_path(config, job), files)
        before = joined.update(lambda tables: {t: o for t, o in tables.items() if t != name})
        if name in before and stream_lease(files, config, job).holder() is not None:
            running.append(join(checkpoints, job))
    return running


def _await_batch_in_flight(files: LakeFiles, checkpoint: str) -> None:
    """Wait until the running stream's batch planned before the table left its list has
    committed: batches planned after it skip the table, so its lake tables can go. Raises
    `SourceError` after `IN_FLIGHT_WAIT_S`."""
    logged = batch_ids(files, join(checkpoint, "offsets"))
    if not logged:
        return
    newest = max(logged)
    deadline = time.monotonic() + IN_FLIGHT_WAIT_S
    while not files.exists(join(checkpoint, "commits", str(newest))):
        if time.monotonic() > deadline:
            raise SourceError(
                f"the stream under {checkpoint} has not finished batch {newest} in "
                f"{IN_FLIGHT_WAIT_S:.0f} s, and it still holds its lease: stop it (it applies the "
                "batch again when it starts), then reset again"
            )
        time.sleep(0.5)
