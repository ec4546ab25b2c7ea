"""One commit batch's chunk reads as a Spark job, and the reports they send back.

A batch of chunks is read by at most `snapshot.parallelism` tasks (`mapInArrow` over the
batch's chunk indexes), each with its own replica `server_id`: every task reads its chunks
lock-free (`chunk_reader.ChunkReader`) and returns Arrow batches of rows at the chunk's high
watermark. Each chunk's LW, HW, row count and the range it read travel back as one report row
beside its rows, in a column of its own (`REPORT`), gathered by an observation
(`DataFrame.observe`) and dropped before the write: Spark merges observed metrics only from
the task attempts that succeeded, exactly the reads whose rows a write committed, and
observations work on Spark Connect, where accumulators do not exist.

The snapshot (`task.read_and_commit`) reads the open-ended last chunk in bounded reads
(`TailReads`) and turns the reports into ledger entries (`chunk_results`); `verify` reads the
ledger's chunks whole.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark import TaskContext
from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import from_arrow_type

from binlake.config.settings import Config, SourceConfig
from binlake.lake.files import driver_files
from binlake.lake.tables import BRONZE_COLUMNS, bronze_schema
from binlake.model.offsets import BinlogOffset
from binlake.model.schema import TableSchema
from binlake.mysql.column_rules import lake_view, projection
from binlake.mysql.lineage import source_lineage
from binlake.snapshot.chunk_reader import ChunkRead, ChunkReader
from binlake.snapshot.chunks import ChunkRange, decode_key, encode_key
from binlake.snapshot.ledger import ChunkResult, ChunkState
from binlake.snapshot.pacing import RowBudget
from binlake.snapshot.row_filters import filtered_rows

#: What a task reports per chunk it read: (chunk_id, lw_file, lw_pos, hw_file, hw_pos, rows,
#: hw_gtid: the GTID position at the HW, "" where unknown, start, end: the range read, as the
#: ledger encodes keys).
ChunkReport = tuple[int, str, int, str, int, int, str, str | None, str | None]
#: The column a chunk's report travels in: one row per chunk read, whose other columns are null.
REPORT = "_report"
REPORT_TYPE = pa.struct(
    [
        ("chunk_id", pa.int32()),
        ("lw_file", pa.string()),
        ("lw_pos", pa.int64()),
        ("hw_file", pa.string()),
        ("hw_pos", pa.int64()),
        ("rows", pa.int64()),
        ("hw_gtid", pa.string()),
        ("start", pa.string()),
        ("end", pa.string()),
    ]
)


def read_chunks(
    spark: SparkSession,
    config: Config,
    source: SourceConfig,
    table: TableSchema,
    chunks: list[ChunkState],
    slot: int = 0,
    reader_rate: float = 0.0,
    tail: TailReads | None = None,
) -> tuple[DataFrame, Observation]:
    """One Spark job's worth of chunk reads (at most `snapshot.parallelism` tasks), lazily; its
    tasks use the server ids of `slot` (see `ChunkScheduler`), each reading at most
    `reader_rate` rows a second (0: no cap). With `tail`, the open-ended chunk is read in
    bounded reads that go on past it as new chunk ids (`ChunkBatchReader`: the snapshot);
    without, every chunk is read whole under its own id (`verify`, whose chunks are the
    ledger's).

    The rows carry the bronze columns, without the rows `source.row_filters` drops (judged at
    each chunk's HW); the observation holds the chunks' reports once the frame has run
    (`chunk_reports`). Run the frame exactly once: each run reads the chunks again, at new high
    watermarks.
    """
    slices = min(config.snapshot.parallelism, len(chunks))
    descriptors = [(c.chunk_id, encode_key(c.range.start), encode_key(c.range.end)) for c in chunks]
    indexes = spark.range(0, len(descriptors), 1, slices)  # no SparkContext on Spark Connect
    server_id_base = config.snapshot_server_id(slot * config.snapshot.parallelism)
    lineage = source_lineage(driver_files(spark), config, source)
    reader = ChunkBatchReader(source, table, server_id_base, descriptors, lineage, tail,
                              reader_rate)  # fmt: skip
    schema = T.StructType(
        [
            *bronze_schema(lake_view(source, table)).fields,
            T.StructField(REPORT, from_arrow_type(REPORT_TYPE)),
        ]
    )
    reports = Observation()
    rows = (
        indexes.mapInArrow(reader, schema)
        # As JSON text: Spark 4.0 hands an observed array back as a py4j object, not a list.
        .observe(reports, F.to_json(F.collect_list(REPORT)).alias("reports"))
        .where(F.col(REPORT).isNull())
        .drop(REPORT)
    )
    return filtered_rows(rows, config, table.qualified), reports


def chunk_reports(observation: Observation) -> list[ChunkReport]:
    """The reports of a chunk read frame that ran (see `read_chunks`)."""
    return [
        (
            r["chunk_id"],
            r["lw_file"],
            r["lw_pos"],
            r["hw_file"],
            r["hw_pos"],
            r["rows"],
            r.get("hw_gtid") or "",
            r.get("start"),  # JSON leaves an open side's null out
            r.get("end"),
        )
        # none: `chunk_results` refuses the batch
        for r in json.loads(observation.get.get("reports") or "[]")
    ]


def chunk_results(
    table: TableSchema, batch: list[ChunkState], reports: list[ChunkReport]
) -> list[ChunkResult]:
    """The ledger entries of a committed batch: one report per chunk of the batch, and one per
    chunk the read of its open-ended chunk went on to (the ids straight after it); anything
    else is refused. An open-ended chunk cut short, and each chunk read on to, carries the range
    read (`ChunkResult.range`)."""
    planned = {c.chunk_id: c.range for c in batch}
    expected = sorted(planned)
    reported = sorted(r[0] for r in reports)
    tail = next((i for i, r in planned.items() if r.end is None), None)
    went_on = reported[len(expected) :]
    if reported[: len(expected)] != expected or (
        went_on and (tail is None or went_on != list(range(tail + 1, tail + 1 + len(went_on))))
    ):
        raise RuntimeError(
            f"{table.qualified}: chunk reports {reported} do not match the batch {expected}; "
            "the batch is not marked finished and will be read again"
        )

    def read_over(chunk_id: int, start: str | None, end: str | None) -> ChunkRange | None:
        cut = chunk_id not in planned or (planned[chunk_id].end is None and end is not None)
        return ChunkRange(decode_key(start), decode_key(end)) if cut else None

    return [
        ChunkResult(table.qualified, chunk_id, BinlogOffset(lw_file, lw_pos),
                    BinlogOffset(hw_file, hw_pos, hw_gtid), rows, read_over(chunk_id, start, end))
        for chunk_id, lw_file, lw_pos, hw_file, hw_pos, rows, hw_gtid, start, end in reports
    ]  # fmt: skip


@dataclass(frozen=True)
class TailReads:
    """How a task reads the open-ended chunk: `rows` keys a read (`chunk_reader.TailCut`), and
    at most `chunks` reads in a row before the rest is left to the next batch (a table appended
    to faster than it is read never holds one task, nor its commit, forever)."""

    rows: int
    chunks: int


class ChunkBatchReader:
    """The `mapInArrow` function: reads the chunks of its partition one after another, each as
    its rows, then its report; waits after each read as its `rows_per_second` asks.

    With `tail`, the open-ended chunk is read `tail.rows` keys at a time: a read that cut it
    short goes on with the rest as the next chunk id (`reads_of`); without, it is read whole.

    Partition `i` of the batch uses replica server id `base + i`, so concurrent binlog replays
    never evict each other.
    """

    def __init__(
        self,
        source: SourceConfig,
        table: TableSchema,
        server_id_base: int,
        descriptors: list[tuple[int, str | None, str | None]],
        lineage: int,
        tail: TailReads | None,
        rows_per_second: float = 0.0,
    ) -> None:
        self.source = source
        self.table = table
        self.server_id_base = server_id_base
        self.descriptors = descriptors  # (chunk_id, start, end) by the index the task receives
        self.lineage = lineage  # whose coordinates the watermarks are (`lineage`)
        self.tail = tail
        self.rows_per_second = rows_per_second

    def __call__(self, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        # A terminal's Ctrl-C reaches Spark's Python workers too (PySpark's daemon gives them
        # Python's default handler): the driver decides whether the reads in flight finish.
        with contextlib.suppress(ValueError):  # not the worker's main thread: nothing to do
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        context = TaskContext.get()
        server_id = self.server_id_base + (context.partitionId() if context else 0)
        view = lake_view(self.source, self.table)
        names = [*view.column_names, *BRONZE_COLUMNS.fieldNames(), REPORT]
        project = projection(self.source, self.table)
        budget = RowBudget(self.rows_per_second)
        tail_rows, most_reads = (self.tail.rows, self.tail.chunks) if self.tail else (None, 1)
        with ChunkReader(self.source, self.table, server_id, lineage=self.lineage,
                         tail_rows=tail_rows) as reader:  # fmt: skip
            for batch in batches:
                for index in batch.column(0).to_pylist():
                    chunk_id, start, end = self.descriptors[index]
                    chunk = ChunkRange(decode_key(start), decode_key(end))
                    for read in reads_of(reader, chunk_id, chunk, most_reads):
                        landed = project.arrays(read.columns)
                        rows = [*_rows_at_hw(read, landed), pa.nulls(read.rows, REPORT_TYPE)]
                        yield pa.RecordBatch.from_arrays(rows, names=names)
                        yield pa.RecordBatch.from_arrays(_report(read, rows), names=names)
                        time.sleep(budget.spend(read.rows))


def reads_of(
    reader: ChunkReader, chunk_id: int, chunk: ChunkRange, most: int
) -> Iterator[ChunkRead]:
    """The chunk's read and, where that cut the open-ended chunk short, the reads of the rest as
    chunks `chunk_id + 1, ...` (the open-ended chunk has its table's largest id), until one is
    not cut short or `most` reads are done."""
    for n in range(most):
        read = reader.read(chunk_id + n, chunk)
        yield read
        if chunk.end is not None or read.range.end is None:
            return
        chunk = ChunkRange(read.range.end, None)


def _report(read: ChunkRead, rows: list[pa.Array]) -> list[pa.Array]:
    """The chunk's report row: every column of `rows` null but the report."""
    report = {
        "chunk_id": read.chunk_id,
        "lw_file": read.lw.file,
        "lw_pos": read.lw.pos,
        "hw_file": read.hw.file,
        "hw_pos": read.hw.pos,
        "rows": read.rows,
        "hw_gtid": read.hw.gtid or None,
        "start": encode_key(read.range.start),
        "end": encode_key(read.range.end),
    }
    return [*(pa.nulls(1, column.type) for column in rows[:-1]), pa.array([report], REPORT_TYPE)]


def _rows_at_hw(read: ChunkRead, landed: list[pa.Array]) -> list[pa.Array]:
    """The chunk's data columns as they land plus `_chunk_id`, `_hw_file`, `_hw_pos`."""
    n = read.rows
    return [
        *landed,
        pa.repeat(pa.scalar(read.chunk_id, pa.int32()), n),
        pa.repeat(pa.scalar(read.hw.file, pa.string()), n),
        pa.repeat(pa.scalar(read.hw.pos, pa.int64()), n),
    ]
