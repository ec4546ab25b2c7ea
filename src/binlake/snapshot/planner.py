"""Chunk planning against the source: the queries behind the even and uneven split."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import pymysql

from binlake.config.settings import SnapshotConfig
from binlake.model.schema import TableSchema
from binlake.model.typemap import enum_values, split_key
from binlake.mysql.collation import CollationOrder, needs_collation
from binlake.mysql.connection import query
from binlake.snapshot.chunks import ChunkRange, distribution_factor, plan_even, plan_uneven

log = logging.getLogger(__name__)


class MemberOrder:
    """ENUM split keys: a member's text (a row's value) or index (a chunk bound) → its index,
    the order MySQL sorts ENUM values in (`typemap.split_key`)."""

    def __init__(self, members: list[str]) -> None:
        self._index = {m: i for i, m in enumerate(["", *members])}  # '' is the error value 0

    def prime(self, values: Iterable[Any]) -> None:
        """Nothing to fetch: the members are known."""

    def __call__(self, value: Any) -> int:
        return value if isinstance(value, int) else self._index[value]


def key_order(conn: pymysql.Connection, table: TableSchema) -> CollationOrder | MemberOrder | None:
    """The sort key for the split column: the collation's for strings, the member index for
    ENUM, natural otherwise."""
    column = table.column(table.split_column)
    if column.data_type == "enum":
        return MemberOrder(enum_values(column.column_type))
    return CollationOrder(conn, column) if needs_collation(column) else None


def plan_table(
    conn: pymysql.Connection, table: TableSchema, options: SnapshotConfig
) -> list[ChunkRange]:
    """Split `table` into chunks of about `options.chunk_size` rows by its split column."""
    split = split_key(table.column(table.split_column))
    normalize = split.normalize
    k, t = split.sql, table.sql_name
    low, high, rows = query(conn, f"SELECT MIN({k}), MAX({k}), COUNT(*) FROM {t}")[0]
    low, high = normalize(low), normalize(high)
    if rows == 0:
        return [ChunkRange.all()]
    if split.integral:
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
