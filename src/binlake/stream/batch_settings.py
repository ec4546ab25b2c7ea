"""The Spark settings a batch is applied with, chosen by the size of the silver tables it touches:
interpreted queries for small silver, MERGEs that rewrite the files they touch where they touch
little; else the session's own. Only the speed depends on the choice, never what lands.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from pyspark.sql import SparkSession

from binlake.config.settings import Config
from binlake.lake.tables import TableSize
from binlake.model.schema import TableSchema
from binlake.runtime.spark import (
    COPY_ON_WRITE_MERGES,
    INTERPRETED_QUERIES,
    session_settings,
)
from binlake.silver.file_sizes import silver_file_settings
from binlake.silver.merge import (
    silver_table,
)
from binlake.silver.routes import group_by_silver
from binlake.stream.side_by_side import APPLY_THREADS

#: A batch whose tables' silver tables hold at most this many bytes of files together is applied
#: with interpreted queries (`spark.INTERPRETED_QUERIES`): compiling the code of a small batch's
#: new plans costs more than the work on so few rows, and what interpreted code costs grows with
#: the rows a query reads, not with the batch's changes. The bound sits below the break-even the
#: bench found (`BENCH_ONLY=small_merges`, `bench/results/small-merges-2026-12-04-codegen-*.md`,
#: docs/performance.md), with room: a table's rows differ in width.
SMALL_SILVER_BYTES = 4 * 2**20

#: A batch whose MERGEs rewrite about this many bytes of silver files at most
#: (`TableSize.rewritten`) rewrites the files it touches (`spark.COPY_ON_WRITE_MERGES`) instead
#: of writing deletion vectors, whose own steps cost more than rewriting a few files. The bound
#: sits below the break-even the bench found (`BENCH_ONLY=small_merges`,
#: `bench/results/small-merges-2026-12-05-rewrites-1m*.md`, docs/performance.md).
REWRITE_BYTES = 8 * 2**20


#: How long a silver table's size read from Delta is taken as known (`SilverSizes`)...
SIZE_KNOWN_S = 300.0
#: ...and how many of its changes may be applied after the read before it is read again.
SIZE_KNOWN_CHANGES = 1000


class SilverSizes:
    """Each silver table's files as Delta last reported them (`LakeTable.size`), kept for one
    run of the stream: read again once `SIZE_KNOWN_S` have passed or more than
    `SIZE_KNOWN_CHANGES` of its changes (or a DDL) were applied since, so a table that grows
    past `SMALL_SILVER_BYTES` is seen within a few batches. Only the choice of settings
    reads them, which a stale size makes slower, never wrong; a stream of small batches is
    spared the read on each (a fixed cost of its latency)."""

    def __init__(self) -> None:
        #: table: its size, when it was read, the changes applied since
        self._known: dict[str, tuple[TableSize | None, float, int]] = {}

    def of(self, spark: SparkSession, config: Config, table: TableSchema) -> TableSize | None:
        """The files of `table`'s silver; None if it has none yet."""
        silver = silver_table(config, table)
        size, read_at, changes = self._known.get(silver.sql, (None, 0.0, 0))
        stale = changes > SIZE_KNOWN_CHANGES or time.monotonic() - read_at > SIZE_KNOWN_S
        if size is None or stale:
            size = silver.size(spark)
            self._known[silver.sql] = (size, time.monotonic(), 0)
        return size

    def applied(self, config: Config, table: TableSchema, changes: int, ddl: bool) -> None:
        """`changes` of `table` were applied to its silver (and a DDL, if `ddl`)."""
        key = silver_table(config, table).sql
        if key in self._known:
            size, read_at, before = self._known[key]
            if ddl:
                del self._known[key]
            else:
                self._known[key] = (size, read_at, before + changes)


@contextlib.contextmanager
def settings_for(
    spark: SparkSession,
    config: Config,
    tables: dict[str, TableSchema],
    changes: dict[str, int],
    sizes: SilverSizes | None = None,
) -> Iterator[None]:
    """The settings a batch of `changes` (each table's row changes; a table of DDL alone with
    none) is applied with, where each silver table it touches exists (`silver_sizes`):
    interpreted queries where they hold `SMALL_SILVER_BYTES` at most together, MERGEs that
    rewrite the files they touch, in files of `SILVER_FILE_ROWS` rows at most, where they
    rewrite `REWRITE_BYTES` at most; each group kept or refused whole by the compute
    (`session_settings`); else the session's own."""
    with contextlib.ExitStack() as settings:
        found = silver_sizes(spark, config, tables, changes, sizes)
        if found:
            if sum(size.bytes for size, _ in found) <= SMALL_SILVER_BYTES:
                settings.enter_context(session_settings(spark, INTERPRETED_QUERIES))
            if sum(size.rewritten(n) for size, n in found) <= REWRITE_BYTES:
                rewrites = {**COPY_ON_WRITE_MERGES, **silver_file_settings()}
                settings.enter_context(session_settings(spark, rewrites))
        yield


def silver_sizes(
    spark: SparkSession,
    config: Config,
    tables: dict[str, TableSchema],
    changes: dict[str, int],
    sizes: SilverSizes | None = None,
) -> list[tuple[TableSize, int]] | None:
    """The size of each silver table of `changes`'s tables (Delta's own, read side by side, or
    known to `sizes`) and the row changes a batch of `changes` applies to it (a route's members
    together); None if one of them has no silver yet."""
    groups = group_by_silver(config, list(changes))
    if not groups or any(group[0] not in tables for group in groups):
        return None
    known_sizes = sizes if sizes is not None else SilverSizes()

    def size(group: list[str]) -> TableSize | None:
        return known_sizes.of(spark, config, tables[group[0]])

    with ThreadPoolExecutor(max_workers=min(len(groups), APPLY_THREADS)) as pool:
        found = list(pool.map(size, groups))
    if any(s is None for s in found):
        return None
    return [
        (size, sum(changes.get(name, 0) for name in group))
        for size, group in zip(found, groups, strict=True)
        if size is not None
    ]
