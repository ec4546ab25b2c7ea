"""The chunk ledger: a Delta table of every chunk's plan and, once finished, its watermarks.

It is Flink CDC's checkpointed split state. The plans of all tables are written in one commit
before any of their chunks is read, and reused on restart (re-splitting would misalign the chunks
that already finished). A chunk becomes `finished` only after its rows are committed to bronze, so
a crash between the two re-reads the chunk, and the idempotent bronze commit replaces its rows.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.chunks import ChunkRange, decode_key, encode_key
from binlake.errors import LedgerError
from binlake.lake import PathTable, source_prefix
from binlake.offsets import BinlogOffset

PENDING = "pending"
FINISHED = "finished"

SCHEMA = T.StructType(
    [
        T.StructField("table", T.StringType(), False),
        T.StructField("chunk_id", T.IntegerType(), False),
        T.StructField("split_column", T.StringType(), False),
        T.StructField("start", T.StringType(), True),
        T.StructField("end", T.StringType(), True),
        T.StructField("status", T.StringType(), False),
        T.StructField("lw_file", T.StringType(), True),
        T.StructField("lw_pos", T.LongType(), True),
        T.StructField("hw_file", T.StringType(), True),
        T.StructField("hw_pos", T.LongType(), True),
        T.StructField("rows", T.LongType(), True),
        T.StructField("updated_at", T.TimestampType(), False),
    ]
)


@dataclass(frozen=True, slots=True)
class ChunkState:
    """One ledger row."""

    table: str
    chunk_id: int
    split_column: str
    range: ChunkRange
    status: str = PENDING
    lw: BinlogOffset | None = None
    hw: BinlogOffset | None = None
    rows: int | None = None

    @property
    def finished(self) -> bool:
        return self.status == FINISHED


@dataclass(frozen=True, slots=True)
class ChunkResult:
    """What a chunk read reports back for the ledger."""

    table: str
    chunk_id: int
    lw: BinlogOffset
    hw: BinlogOffset
    rows: int


class Ledger:
    def __init__(self, spark: SparkSession, path: str) -> None:
        self._spark = spark
        self.path = path
        self._lake_table = PathTable(path)  # under lake.root, with or without lake.catalog

    def _create(self) -> None:
        """The ledger, created empty unless it exists. Not `CREATE TABLE IF NOT EXISTS ...
        LOCATION`: it names the table as SQL text, and finds a `file:///x` root and the
        `file:/x` Delta records for it to be two locations."""
        empty = self._spark.createDataFrame([], SCHEMA).write.format("delta").mode("ignore")
        self._lake_table.save(empty)

    def exists(self) -> bool:
        return self._lake_table.exists(self._spark)

    def chunks(self, table: str | None = None) -> list[ChunkState]:
        """All ledger rows (of one table), ordered by table and chunk id."""
        if not self.exists():
            return []
        frame = self._lake_table.read(self._spark)
        if table is not None:
            frame = frame.where(frame["table"] == table)
        states = [chunk_state(row.asDict()) for row in frame.collect()]
        return sorted(states, key=lambda s: (s.table, s.chunk_id))

    def record_plans(
        self, plans: Mapping[str, tuple[str, Callable[[], list[ChunkRange]]]]
    ) -> dict[str, list[ChunkState]]:
        """Per table (`name: (split column, planner)`), the plan already recorded, or its
        planner's chunks; every new plan is persisted in one commit, whatever the number of
        tables (a table's plan is never split across commits)."""
        recorded: dict[str, list[ChunkState]] = {}
        for state in self.chunks():
            recorded.setdefault(state.table, []).append(state)
        states: dict[str, list[ChunkState]] = {}
        new: list[ChunkState] = []
        for table, (split_column, plan) in plans.items():
            existing = recorded.get(table)
            if existing:
                _check_split_column(table, existing[0].split_column, split_column)
                states[table] = existing
            else:
                states[table] = [
                    ChunkState(table, i, split_column, r) for i, r in enumerate(plan())
                ]
                new.extend(states[table])
        if new:
            self._create()
            self._lake_table.save(
                self._spark.createDataFrame([_row(s) for s in new], SCHEMA)
                .write.format("delta")
                .mode("append")
            )
        return states

    def forget(self, table: str) -> None:
        """Remove a table's plan (it is planned and read again)."""
        if self.exists():
            self._lake_table.delete(self._spark, F.col("table") == table)

    def mark_finished(self, results: Iterable[ChunkResult]) -> None:
        """One MERGE that marks the chunks finished with their watermarks and row counts."""
        now = datetime.now(UTC)
        updates = [
            (r.table, r.chunk_id, r.lw.file, r.lw.pos, r.hw.file, r.hw.pos, r.rows, now)
            for r in results
        ]
        if not updates:
            return
        s = source_prefix(SCHEMA.fieldNames())
        reported = ("lw_file", "lw_pos", "hw_file", "hw_pos", "rows", "updated_at")
        source = self._spark.createDataFrame(
            updates,
            f"{s}table string, {s}chunk_id int, {s}lw_file string, {s}lw_pos long, "
            f"{s}hw_file string, {s}hw_pos long, {s}rows long, {s}updated_at timestamp",
        )
        self._create()
        on = (F.col("table") == F.col(f"{s}table")) & (F.col("chunk_id") == F.col(f"{s}chunk_id"))
        (
            self._lake_table.merge(source, on)
            .whenMatched()
            .update({"status": F.lit(FINISHED), **{c: F.col(f"{s}{c}") for c in reported}})
            .merge()
        )


def snapshot_rows(chunks: Iterable[ChunkState], table: str) -> int | None:
    """The rows `table`'s finished snapshot landed in bronze (None if a chunk has no count)."""
    counts = [c.rows for c in chunks if c.table == table]
    if not counts or any(n is None for n in counts):
        return None
    return sum(n for n in counts if n is not None)


def _check_split_column(table: str, planned: str, configured: str) -> None:
    if planned != configured:
        raise LedgerError(
            f"the ledger planned {table} by column {planned!r}, the config now splits it by "
            f"{configured!r}: restore the split key, or re-snapshot it: "
            f"`binlake snapshot --tables {table.split('.', 1)[1]} --reset`"
        )


def _row(state: ChunkState) -> tuple[object, ...]:
    return (
        state.table,
        state.chunk_id,
        state.split_column,
        encode_key(state.range.start),
        encode_key(state.range.end),
        state.status,
        state.lw.file if state.lw else None,
        state.lw.pos if state.lw else None,
        state.hw.file if state.hw else None,
        state.hw.pos if state.hw else None,
        state.rows,
        datetime.now(UTC),
    )


def chunk_state(row: dict[str, object]) -> ChunkState:
    """A ledger row (as a dict) as the chunk it records."""

    def offset(prefix: str) -> BinlogOffset | None:
        file, pos = row[f"{prefix}_file"], row[f"{prefix}_pos"]
        return BinlogOffset(str(file), int(pos)) if file is not None and pos is not None else None  # type: ignore[call-overload]

    return ChunkState(
        table=str(row["table"]),
        chunk_id=int(row["chunk_id"]),  # type: ignore[call-overload]
        split_column=str(row["split_column"]),
        range=ChunkRange(decode_key(row["start"]), decode_key(row["end"])),  # type: ignore[arg-type]
        status=str(row["status"]),
        lw=offset("lw"),
        hw=offset("hw"),
        rows=int(row["rows"]) if row["rows"] is not None else None,  # type: ignore[call-overload]
    )
