"""`binlake plan`: what a snapshot would read, shown without reading it and without Spark.

Per captured table: its key and split column, the server's row estimate, and its chunks, the
ledger's recorded plan where there is one (the snapshot reuses it and skips its finished chunks),
else the snapshot's own planner's (`snapshot.planner.plan_table`: MIN/MAX/COUNT, and one query per
chunk for a key that does not split evenly). Then the chunk reads the source would see at once
and the server ids the job would take. Tables and keys are found by the snapshot's discovery, so a
table the snapshot would refuse is refused here in the same words; the server's settings, which
the job also refuses, are a warning line. Nothing here imports pyspark (a test holds `plan` to
that): the ledger is read with delta-rs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pymysql
from deltalake.exceptions import DeltaError

from binlake.config.settings import Config
from binlake.errors import SourceError
from binlake.lake.paths import ledger_path
from binlake.model.counts import counted
from binlake.model.schema import TableSchema
from binlake.mysql.connection import connection
from binlake.mysql.discovery import discover, estimated_rows
from binlake.mysql.prerequisites import check_server_settings
from binlake.snapshot.chunk_states import ChunkState, by_table, read_chunks
from binlake.snapshot.planner import plan_table


@dataclass(frozen=True)
class TablePlan:
    """One table's part of the snapshot."""

    table: str  # db.table
    key: tuple[str, ...]  # the row key: the primary key, or the split key standing for one
    split_column: str
    estimated_rows: int
    chunks: int
    finished: int | None  # chunks the ledger records as finished; None: no plan recorded yet

    @property
    def pending(self) -> int:
        return self.chunks - (self.finished or 0)


@dataclass(frozen=True)
class Plan:
    """What a snapshot with this config would do, as `render_plan` prints it."""

    tables: list[TablePlan]
    chunk_size: int
    parallelism: int
    table_slots: int  # tables read at once at most (`Config.table_slots`)
    server_id_low: int
    stream_ids: tuple[int, ...]
    ledger: str  # where the ledger was looked for
    resume_note: str | None  # why the ledger was not read; None when it was
    warning: str | None  # why the job would refuse to start (the server's settings)

    @property
    def tables_at_once(self) -> int:
        return min(self.table_slots, sum(1 for t in self.tables if t.pending))

    @property
    def reads_at_once(self) -> int:
        """The most chunk SELECTs the source sees at once: the tables read side by side, each
        with up to `parallelism` of its pending chunks."""
        reads = sorted((min(self.parallelism, t.pending) for t in self.tables), reverse=True)
        return sum(reads[: self.tables_at_once])

    @property
    def snapshot_ids(self) -> tuple[int, ...]:
        """The server ids of the snapshot's readers: `parallelism` per table slot in use."""
        low = self.server_id_low
        return tuple(range(low, low + self.tables_at_once * self.parallelism))


def gather_plan(config: Config) -> Plan:
    """The plan of a snapshot of every captured table; raises what the snapshot's checks raise
    for a source it cannot reach or a table it would refuse."""
    ledger = ledger_path(config)
    recorded, resume_note = _recorded_chunks(ledger)
    # No waiting for a source that was never reached: that is a wrong host, port or password.
    with connection(config.source, wait=False) as conn:
        warning = _settings_warning(conn)
        schemas = discover(conn, config)
        estimates = estimated_rows(conn, [(t.database, t.name) for t in schemas])
        tables = [
            _table_plan(conn, t, config, estimates[t.qualified], recorded.get(t.qualified))
            for t in schemas
        ]
    return Plan(
        tables,
        config.snapshot.chunk_size,
        config.snapshot.parallelism,
        config.table_slots,
        config.snapshot_server_id(0),
        config.stream_read_ids,
        ledger,
        resume_note,
        warning,
    )


def _table_plan(
    conn: pymysql.Connection,
    table: TableSchema,
    config: Config,
    rows: int,
    recorded: list[ChunkState] | None,
) -> TablePlan:
    """A table's chunks: the ledger's recorded plan, which the snapshot reuses, or the
    planner's."""
    if recorded:
        chunks, finished = len(recorded), sum(1 for c in recorded if c.finished)
        return TablePlan(table.qualified, table.key, table.split_column, rows, chunks, finished)
    planned = len(plan_table(conn, table, config.snapshot))
    return TablePlan(table.qualified, table.key, table.split_column, rows, planned, None)


def _recorded_chunks(path: str) -> tuple[dict[str, list[ChunkState]], str | None]:
    """The ledger's chunks by table, and why they are missing when the ledger cannot be read
    without Spark (a lake only the cluster's credentials reach)."""
    try:
        chunks = read_chunks(path)
    except (DeltaError, OSError) as exc:
        return {}, f"the ledger at {path} cannot be read here ({type(exc).__name__})"
    return by_table(chunks), None


def _settings_warning(conn: pymysql.Connection) -> str | None:
    """Why the job would refuse the server's settings (`check_server_settings`), if it would."""
    try:
        check_server_settings(conn)
    except SourceError as exc:
        return str(exc)
    return None


def id_range(ids: Sequence[int]) -> str:
    """Consecutive server ids as `low-high` (one as itself)."""
    low, high = min(ids), max(ids)
    return str(low) if low == high else f"{low}-{high}"


def render_plan(plan: Plan) -> str:
    """The plan as aligned text lines: a row per table, then the totals, the reads and server
    ids the job would take, and what the ledger already holds."""
    header = ("table", "key", "split by", "est. rows", "chunks", "rows/chunk", "ledger")
    rows = [header, *(_table_row(t) for t in plan.tables)]
    return "\n".join([*aligned(rows, right={3, 5}), "", *_summary(plan)])


def aligned(rows: Sequence[Sequence[str]], right: set[int]) -> list[str]:
    """Rows of cells as lines of columns two spaces apart, each as wide as its widest cell;
    the columns in `right` (numbers) aligned right."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]


def _table_row(table: TablePlan) -> tuple[str, ...]:
    if table.finished is None:
        ledger = "planned now"
    elif table.pending:
        ledger = f"recorded, {table.finished:,}/{table.chunks:,} finished"
    else:
        ledger = "finished: skipped"
    return (
        table.table,
        ", ".join(table.key),
        table.split_column,
        f"~{table.estimated_rows:,}",
        counted(table.chunks, "chunk"),
        f"~{round(table.estimated_rows / max(table.chunks, 1)):,}",
        ledger,
    )


def _summary(plan: Plan) -> list[str]:
    chunks = sum(t.chunks for t in plan.tables)
    pending = sum(t.pending for t in plan.tables)
    lines = [
        f"{counted(len(plan.tables), 'table')}, {counted(chunks, 'chunk')} "
        f"(snapshot.chunk_size: {counted(plan.chunk_size, 'row')}, more where one key value "
        f"holds more); {counted(pending, 'chunk')} to read"
    ]
    if pending:
        lines.append(
            f"source reads at once: up to {counted(plan.reads_at_once, 'chunk SELECT')} "
            f"({counted(plan.tables_at_once, 'table')} at once, each up to "
            f"snapshot.parallelism={plan.parallelism} chunks)"
        )
        lines.append(
            f"server ids: snapshot readers {id_range(plan.snapshot_ids)}, "
            f"stream {id_range(plan.stream_ids)}"
        )
    else:
        lines.append(f"server ids: stream {id_range(plan.stream_ids)}")
    if plan.resume_note is not None:
        lines.append(f"plan ignores resume state: {plan.resume_note}")
    else:
        lines.append(f"ledger: {plan.ledger} ({_ledger_state(plan.tables)})")
    if plan.warning is not None:
        lines.append(f"warning: the job would refuse to start: {plan.warning}")
    return lines


def _ledger_state(tables: list[TablePlan]) -> str:
    recorded = [t for t in tables if t.finished is not None]
    if not recorded:
        return "no plan recorded: every table is planned anew"
    finished = sum(t.finished or 0 for t in recorded)
    total = sum(t.chunks for t in recorded)
    return (
        f"{counted(len(recorded), 'table')} planned, {finished:,} of "
        f"{counted(total, 'chunk')} finished"
    )
