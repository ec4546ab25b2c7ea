"""One table's part of a stream batch (or of a joining table's catch-up), applied in binlog order:
the rows before each of its DDL statements (`silver.merge.TableApply`), then silver and the schema
history follow the DDL (`silver.schema_follow`), then the rows after it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from binlake.config.settings import Config
from binlake.errors import UnfollowableChange
from binlake.lake.event_log import event
from binlake.lake.files import driver_files
from binlake.lake.stream_tables import StreamTables
from binlake.model.offsets import position_token
from binlake.model.schema import TableSchema
from binlake.mysql.schema_history import SchemaChange, SchemaHistory
from binlake.silver.change_record import DDL
from binlake.silver.merge import (
    ChangelogEnds,
    TableApply,
    data_columns,
    require_silver,
    silver_table,
)
from binlake.silver.schema_follow import applied_through, apply_schema_change
from binlake.silver.spread import Spread
from binlake.snapshot.resets import send_back
from binlake.stream.batch_summary import BatchSummary

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class StreamWrites:
    """What each table of a batch is applied with: the session, the config, and the job's stores
    a DDL is recorded in (its schema history, the tables it applies). `ends` and
    `applied_before` are the changelog ends this run knows and the offsets a replayed batch had
    (see `TableApply`)."""

    spark: SparkSession
    config: Config
    history: SchemaHistory
    joined: StreamTables
    ends: ChangelogEnds | None = None
    applied_before: tuple[str, str] | None = None

    def table(self, batch: DataFrame, summary: BatchSummary, name: str) -> TableBatch:
        """Table `name`'s part of `batch`, which `summary` summarises."""
        own = [d for d in summary.ddl if d.table == name]
        return TableBatch(self, batch, name, own, summary.spread(name), summary.records_of(name))


@dataclass(frozen=True)
class TableBatch:
    """One table's part of a batch: its rows (those of `name` in `batch`), its DDL in binlog
    order, and what the batch's summary knows of its rows (how its reads hold them, and their
    records where it collected them); `writes`: what it is applied with."""

    writes: StreamWrites
    batch: DataFrame
    name: str
    ddl: list[SchemaChange]
    spread: Spread | None = None
    records: list[Row] | None = None

    def segments(self) -> Iterator[tuple[DataFrame, list[Row] | None]]:
        """The table's row changes (and records, where known) before its first DDL, between
        each two, and after its last: one segment more than its DDL."""
        rows = self.batch.where((F.col("_table") == self.name) & (F.col("_op") != DDL))
        bounds = [d.offset for d in self.ddl]
        for low, high in zip([None, *bounds], [*bounds, None], strict=True):
            segment, own = rows, self.records
            if low is not None:
                segment = segment.where(F.col("_offset") > position_token(low, 0))
                own = own and [r for r in own if r["_offset"] > position_token(low, 0)]
            if high is not None:
                segment = segment.where(F.col("_offset") < position_token(high, 0))
                own = own and [r for r in own if r["_offset"] < position_token(high, 0)]
            yield segment, own

    def schema_before(self, index: int) -> TableSchema | None:
        """The table's schema between its DDL `index - 1` and `index` of the batch."""
        return _segment_schema(self.writes.history, self.name, self.ddl, index)


def apply_table_changes(table: TableBatch) -> None:
    """One table's rows and DDL of a batch, segment by segment in binlog order.

    A replayed batch (a crash after some of its DDL was applied, before its checkpoint) skips
    the segments that end at a DDL silver took already: their rows were merged before it, and
    merging them again after it would undo it (rows a TRUNCATE or a re-created table removed
    would come back)."""
    writes = table.writes
    spark, config = writes.spark, writes.config
    applied: str | None = None
    for index, (segment, own) in enumerate(table.segments()):
        schema = table.schema_before(index)
        if schema is not None:
            silver = silver_table(config, schema)
            if index == 0 and table.ddl and silver.exists(spark):
                applied = applied_through(spark, config, silver, table.name)
            columns = data_columns(spark, silver, config, schema.qualified)
            if columns is None:
                require_silver(spark, config, schema)
            elif _taken_before(table, index, applied):
                log.info(
                    "%s: rows before %s are in silver already (a replayed batch)",
                    table.name, table.ddl[index].where(),
                )  # fmt: skip
            else:
                apply = TableApply(
                    config, schema, columns, writes.applied_before, writes.ends, table.spread, own
                )
                apply(segment)
        if index < len(table.ddl) and not _apply_ddl(writes, table.ddl[index]):
            return  # the table went back to its snapshot, which holds its later rows


def _taken_before(table: TableBatch, index: int, applied: str | None) -> bool:
    """Whether segment `index` ends at a DDL at or before `applied`, the last DDL silver took."""
    if applied is None or index >= len(table.ddl):
        return False
    return applied >= position_token(table.ddl[index].offset, 0)


def _segment_schema(
    history: SchemaHistory, name: str, ddl: list[SchemaChange], index: int
) -> TableSchema | None:
    """The table's schema between its DDL `index - 1` and `index` of the batch."""
    if index > 0:
        return ddl[index - 1].after
    if ddl and ddl[0].before is not None:
        return ddl[0].before
    # No DDL, or the first brings in another table under the name (CREATE OR REPLACE, a table
    # renamed onto it): the rows before it are the old table's, in the schema in force then.
    earlier = [e for e in history.entries(name) if not ddl or e.offset < ddl[0].offset]
    return next((e.schema for e in reversed(earlier) if e.schema), None)


def _apply_ddl(writes: StreamWrites, change: SchemaChange) -> bool:
    """Silver and the schema history follow `change`; False if silver cannot and the table was
    sent back to its snapshot (`stream.on_unfollowable_ddl: resnapshot`)."""
    spark, config, history, joined = writes.spark, writes.config, writes.history, writes.joined
    try:
        apply_schema_change(spark, config, change)
    except UnfollowableChange:
        if config.stream.on_unfollowable_ddl == "stop":
            raise
        send_back(driver_files(spark), config, change.table)
        log.warning(
            "%s changed %s in a way silver cannot follow from the binlog: the table is "
            "snapshotted again by itself and then rejoins the stream; the other tables go on",
            change.table, change.where(),
            extra=event("table_sent_back", [change.table], change.offset),
        )  # fmt: skip
        return False
    if change.kind != "truncate":
        history.record(change.table, change.entry())
    if change.before is None and change.after is not None:
        joined.update(lambda tables: {change.table: change.offset, **tables})
    log.info(
        "%s: silver follows the %s %s", change.table, change.kind, change.where(),
        extra=event("ddl_applied", [change.table], change.offset),
    )  # fmt: skip
    return True
