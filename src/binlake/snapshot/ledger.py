"""The chunk ledger: a Delta table of every chunk's plan and, once finished, its watermarks.

It is Flink CDC's checkpointed split state. The plans of all tables are written in one commit
before any of their chunks is read, and reused on restart (re-splitting would misalign the chunks
that already finished). A chunk becomes `finished` only after its rows are committed to bronze, so
a crash between the two re-reads the chunk, and the idempotent bronze commit replaces its rows.

The ledger only grows by appends, since each commit lies on the snapshot's critical path and an
append costs Delta far less than a MERGE (docs/performance.md#what-bounds-each-figure): a plan
row per chunk, and once chunks finish, a mark row each (no split column; its watermarks and row
count).
A chunk's state is its plan row with its newest mark applied (`chunk_states`); a chunk read
twice (a crash between bronze and ledger) is marked twice, and the newer mark holds the
watermarks of the read bronze kept. Plan rows finished in place (ledgers written by a MERGE)
read the same.

The plan grows where a table grows during its snapshot: the read of the open-ended last chunk
stops after about `chunk_size` keys (`chunk_reader.TailCut`), and the commit that marks it also
appends a newer plan row for it with the range it read, plan rows for the chunks the same task
read on from there, and the rest of the key space as the table's new open-ended chunk
(`replanned`). The newest plan row of a chunk is its range, so a resumed snapshot reads on from
the last recorded cut, and the ranges stay contiguous for the stream's high-watermark filter.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.errors import LedgerError
from binlake.lake.tables import PathTable, local_frame
from binlake.model.offsets import BinlogOffset
from binlake.snapshot.chunk_states import FINISHED, MARK, ChunkState, by_table, current_chunks
from binlake.snapshot.chunks import ChunkRange, encode_key

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
        # The source's GTID position at the HW (MariaDB; NULL on MySQL, in ledgers written
        # before it was recorded, and where the position moved while it was read): whether a
        # promoted replica holds what the chunk read (`lineage.locate`).
        T.StructField("hw_gtid", T.StringType(), True),
    ]
)


@dataclass(frozen=True, slots=True)
class ChunkResult:
    """What a chunk read reports back for the ledger."""

    table: str
    chunk_id: int
    lw: BinlogOffset
    hw: BinlogOffset
    rows: int
    #: The range the read held where that is not the plan's: an open-ended chunk cut short, or
    #: a chunk the read of one went on to (`replanned`); None: as planned.
    range: ChunkRange | None = None


class Ledger:
    def __init__(self, spark: SparkSession, path: str) -> None:
        self._spark = spark
        self.path = path
        self._lake_table = PathTable(path)  # under lake.root, with or without lake.catalog

    def _append(self, rows: Sequence[tuple[object, ...]]) -> None:
        """One commit of ledger rows, in one file; the first creates the ledger (a path table,
        not `CREATE TABLE ... LOCATION`, which names it as SQL text and takes a `file:///x` root
        and the `file:/x` Delta records for it for two locations).

        The ledger is created without column statistics (Delta keeps only row counts): it is
        read whole, never filtered by a file's bounds, so collecting them would only add work to
        each append, on a snapshot's critical path."""
        frame = local_frame(self._spark, rows, SCHEMA).coalesce(1)
        # A ledger written before a column was added gains it (NULL in its older rows).
        writer = frame.write.format("delta").mode("append").option("mergeSchema", "true")
        self._lake_table.save(writer.option("delta.dataSkippingNumIndexedCols", "0"))

    def exists(self) -> bool:
        return self._lake_table.exists(self._spark)

    def chunks(self, table: str | None = None) -> list[ChunkState]:
        """All ledger rows (of one table), ordered by table and chunk id."""
        if not self.exists():
            return []
        frame = self._lake_table.read(self._spark)
        if table is not None:
            frame = frame.where(frame["table"] == table)
        return current_chunks(row.asDict() for row in frame.collect())

    def record_plans(
        self,
        plans: Mapping[str, tuple[str, Callable[[], list[ChunkRange]]]],
        recorded: Mapping[str, list[ChunkState]] | None = None,
    ) -> dict[str, list[ChunkState]]:
        """Per table (`name: (split column, planner)`), the plan already recorded, or its
        planner's chunks; every new plan is persisted in one commit, whatever the number of
        tables (a table's plan is never split across commits). `recorded`: the ledger's chunks
        by table, when the caller has just read them (read here otherwise)."""
        if recorded is None:
            recorded = by_table(self.chunks())
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
            self._append([_row(s) for s in new])
        return states

    def forget(self, table: str) -> None:
        """Remove a table's plan (it is planned and read again)."""
        if self.exists():
            self._lake_table.delete(self._spark, F.col("table") == table)

    def mark_finished(
        self, results: Iterable[ChunkResult], planned: Sequence[ChunkState] = ()
    ) -> None:
        """One commit appending a mark per chunk (finished, with its watermarks and row count)
        and the plan rows its reads added (`replanned`): a chunk is never marked read over a
        range the ledger does not hold."""
        now = datetime.now(UTC)
        marks = [
            (r.table, r.chunk_id, MARK, None, None, FINISHED, r.lw.file, r.lw.pos, r.hw.file,
             r.hw.pos, r.rows, now, r.hw.gtid or None)
            for r in results
        ]  # fmt: skip
        if marks or planned:
            self._append([*(_row(s) for s in planned), *marks])


def replanned(split_column: str, results: Iterable[ChunkResult]) -> list[ChunkState]:
    """The plan rows one table's batch of reads adds to its plan (pending: the batch's marks
    finish those it read): each chunk read over a range its plan did not fix (`ChunkResult.range`:
    the open-ended chunk cut short, the chunks its task read on to), and where the last of those
    was cut short too, the rest of the key space above it as the table's new open-ended chunk.

    The open-ended chunk always has its table's largest id (`plan_even`, `plan_uneven` put it
    last, and this keeps it so), so the chunks its reads go on to take the ids after it."""
    states = sorted(
        (
            ChunkState(r.table, r.chunk_id, split_column, r.range)
            for r in results
            if r.range is not None
        ),
        key=lambda s: s.chunk_id,
    )
    if states and (last := states[-1]).range.end is not None:
        rest = ChunkRange(last.range.end, None)
        states.append(ChunkState(last.table, last.chunk_id + 1, split_column, rest))
    return states


def snapshot_rows(chunks: Iterable[ChunkState]) -> dict[str, int | None]:
    """Per table, the rows its finished snapshot landed in bronze (None if a chunk has no
    count), in one walk over the ledger's chunks."""
    rows: dict[str, int | None] = {}
    for table, own in by_table(chunks).items():
        counts = [c.rows for c in own]
        rows[table] = None if any(n is None for n in counts) else sum(n or 0 for n in counts)
    return rows


def high_watermarks(chunks: Iterable[ChunkState]) -> list[tuple[str, BinlogOffset]]:
    """Each finished chunk's table and high watermark."""
    return [(c.table, c.hw) for c in chunks if c.hw is not None]


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
        (state.hw.gtid or None) if state.hw else None,
    )
