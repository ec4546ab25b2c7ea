"""Chunk planning against the source: the queries behind the even and uneven split."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import pymysql

from binlake.config.settings import SnapshotConfig
from binlake.model.counts import counted
from binlake.model.schema import TableSchema
from binlake.model.typemap import enum_values, split_key
from binlake.mysql.collation import CollationOrder, needs_collation
from binlake.mysql.connection import query
from binlake.snapshot.chunks import ChunkRange, Key, distribution_factor, plan_even, plan_uneven

log = logging.getLogger(__name__)

#: Runs a query (SQL with `%s` placeholders, its arguments): its first row's first value, None
#: when it returns no row.
FetchValue = Callable[[str, tuple[Any, ...]], Any]


def first_value(rows: Sequence[Sequence[Any]]) -> Any:
    """A query's rows → its first row's first value (None: no row)."""
    return rows[0][0] if rows else None


class KeySteps:
    """The split key's stepping queries (`chunks.chunk_end`), asked through `fetch`: the
    planner's connection, or a chunk read's own snapshot, which cuts an open-ended chunk short
    after its first `chunk_size` keys. Bounds go in as parameters, results come back
    normalised, as chunk bounds are kept."""

    def __init__(self, table: TableSchema, chunk_size: int, fetch: FetchValue) -> None:
        split = split_key(table.column(table.split_column))
        self._k, self._t, self._normalize = split.sql, table.sql_name, split.normalize
        self._chunk_size = chunk_size
        self._fetch = fetch

    def next_chunk_max(self, start: Key) -> Key:
        """The largest of the `chunk_size` smallest keys from `start` (the planner's step)."""
        k, t = self._k, self._t
        sql = (
            f"SELECT MAX({k}) FROM (SELECT {k} FROM {t} WHERE {k} >= %s "
            f"ORDER BY {k} LIMIT %s) AS next_chunk"
        )
        return self._normalize(self._fetch(sql, (start, self._chunk_size)))

    def key_after_chunk(self, start: Key) -> Key:
        """The key after the `chunk_size` smallest from `start` (None: the smallest key), where
        a chunk of `chunk_size` keys ends; None when there are no more keys than that."""
        k, t = self._k, self._t
        where, args = (f"WHERE {k} >= %s ", (start,)) if start is not None else ("", ())
        sql = f"SELECT {k} FROM {t} {where}ORDER BY {k} LIMIT 1 OFFSET %s"
        return self._normalize(self._fetch(sql, (*args, self._chunk_size)))

    def next_key_above(self, key: Key) -> Key:
        sql = f"SELECT MIN({self._k}) FROM {self._t} WHERE {self._k} > %s"
        return self._normalize(self._fetch(sql, (key,)))


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
                "planned %s: %s by even key steps (about %s; keys span %.1f× the row count)",
                table.qualified, counted(len(ranges), "chunk"), counted(int(rows), "row"), factor,
            )  # fmt: skip
            return ranges

    steps = KeySteps(
        table, options.chunk_size, lambda sql, args: first_value(query(conn, sql, args))
    )
    ranges = plan_uneven(low, steps.next_chunk_max, steps.next_key_above, key_order(conn, table))
    log.info(
        "planned %s: %s by counted keys (about %s)",
        table.qualified, counted(len(ranges), "chunk"), counted(int(rows), "row"),
    )  # fmt: skip
    coarse = coarse_split(table, int(rows), len(ranges), options.chunk_size)
    if coarse:
        log.warning("%s", coarse)
    return ranges


#: Rows per chunk past which a split is called coarse: a chunk is read, held and corrected in
#: one task, so its memory grows with its rows.
COARSE_FACTOR = 2


def coarse_split(table: TableSchema, rows: int, chunks: int, chunk_size: int) -> str | None:
    """What to do about a split column with too few values for `chunk_size` (a composite key's
    first column, such as a region or a tenant: one chunk per value, however many rows each
    holds), or None when the chunks hold about `chunk_size` rows or fewer."""
    per_chunk = rows / max(chunks, 1)
    if per_chunk <= COARSE_FACTOR * chunk_size:
        return None
    others = [c for c in table.key if c != table.split_column]
    remedy = (
        f"`snapshot.split_keys: {{{table.name}: {others[0]}}}` splits finer, where {others[0]} "
        "leads an index of its own (each chunk's range is read through it)"
        if others
        else "name a split column with more values in `snapshot.split_keys`"
    )
    return (
        f"{table.qualified}: split by {table.split_column}, whose values hold about "
        f"{counted(round(per_chunk), 'row')} each ({per_chunk / chunk_size:.1f}× "
        f"snapshot.chunk_size): each chunk is read and held in one task, its memory growing "
        f"with its rows; {remedy}"
    )
