"""Chunk planning against the source: the queries behind the even and uneven split."""

from __future__ import annotations

import logging
from typing import Any

import pymysql

from binlake.chunks import ChunkRange, distribution_factor, plan_even, plan_uneven
from binlake.collation import CollationOrder, needs_collation
from binlake.config import SnapshotConfig
from binlake.source import TableSchema, query, quote
from binlake.typemap import map_column

log = logging.getLogger(__name__)

_INTEGRAL = {"tinyint", "smallint", "mediumint", "int", "integer", "bigint"}


def key_order(conn: pymysql.Connection, table: TableSchema) -> CollationOrder | None:
    """The sort key for the split column: the collation's for strings, natural otherwise."""
    column = table.column(table.split_column)
    return CollationOrder(conn, column) if needs_collation(column) else None


def plan_table(
    conn: pymysql.Connection, table: TableSchema, options: SnapshotConfig
) -> list[ChunkRange]:
    """Split `table` into chunks of about `options.chunk_size` rows by its split column."""
    column = table.column(table.split_column)
    normalize = map_column(column).normalize
    k, t = quote(table.split_column), table.sql_name
    low, high, rows = query(conn, f"SELECT MIN({k}), MAX({k}), COUNT(*) FROM {t}")[0]
    low, high = normalize(low), normalize(high)
    if rows == 0:
        return [ChunkRange.all()]
    if column.data_type in _INTEGRAL:
        factor = distribution_factor(int(low), int(high), int(rows))
        if options.distribution_factor_lower <= factor <= options.distribution_factor_upper:
            ranges = plan_even(int(low), int(high), options.chunk_size, factor)
            log.info(
                "planned %s: %d chunks, even split (factor %.2f, %d rows)",
                table.qualified, len(ranges), factor, rows,
            )  # fmt: skip
            return ranges

    def next_chunk_max(start: Any) -> Any:
        sql = (
            f"SELECT MAX({k}) FROM (SELECT {k} FROM {t} WHERE {k} >= %s "
            f"ORDER BY {k} LIMIT %s) AS next_chunk"
        )
        return normalize(query(conn, sql, (start, options.chunk_size))[0][0])

    def next_key_above(key: Any) -> Any:
        return normalize(query(conn, f"SELECT MIN({k}) FROM {t} WHERE {k} > %s", (key,))[0][0])

    ranges = plan_uneven(low, next_chunk_max, next_key_above, key_order(conn, table))
    log.info("planned %s: %d chunks, uneven split (%d rows)", table.qualified, len(ranges), rows)
    return ranges
