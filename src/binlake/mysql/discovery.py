"""Table discovery: the captured tables' schemas as the source's catalog describes them, and the
checks of each table's split key (the column its snapshot is chunked by and, without a primary
key, its rows are identified by)."""

from __future__ import annotations

from typing import Any

import pymysql

from binlake.config.settings import Config
from binlake.errors import SourceError
from binlake.model.capture import SYSTEM_DATABASES, Capture, qualified
from binlake.model.schema import Column, TableSchema
from binlake.model.typemap import map_table
from binlake.mysql.charsets import charmap
from binlake.mysql.connection import query
from binlake.mysql.server import table_names
from binlake.mysql.system_versioning import IMPLICIT_PERIOD

_FLOATING = {"float", "double", "real"}
#: MariaDB types whose order is not the order of their text (the value's landed form).
_UNORDERED = {"inet4", "inet6", "uuid"}
#: The tables binlake captures: base tables, and system-versioned ones (their current rows).
_TABLE_TYPES = ("BASE TABLE", "SYSTEM VERSIONED")


def discover(conn: pymysql.Connection, config: Config) -> list[TableSchema]:
    """The captured tables' schemas, in `source.tables` order (name order without it), named as
    the server stores them (`source.tables` matched as the server compares names); refused when
    there are none."""
    tables = captured_tables(conn, config.source.capture)
    if not tables:
        raise SourceError(f"database {config.source.database!r} has no tables to capture")
    names = {n for d, t in tables for n in (t, qualified(d, t))}
    unknown = sorted(set(config.snapshot.split_keys) - names)
    if unknown:
        raise SourceError(
            f"snapshot.split_keys names tables that are not captured: {', '.join(unknown)}"
        )
    return [load_schema(conn, d, t, config.snapshot.split_keys) for d, t in tables]


def captured_tables(conn: pymysql.Connection, capture: Capture) -> list[tuple[str, str]]:
    """(database, table) of the tables `capture` takes, as the server stores their names, in its
    patterns' order (name order without them); a pattern matching nothing is refused."""
    capture = capture.under(table_names(conn))
    return capture.select(_table_names(conn, capture))


def _table_names(conn: pymysql.Connection, capture: Capture) -> list[tuple[str, str]]:
    """(database, table) of the base tables the capture may take (system-versioned ones
    included), in name order."""
    params: tuple[Any, ...]
    where, params = "table_schema NOT IN %s", (tuple(sorted(SYSTEM_DATABASES)),)
    if capture.database is not None:
        where, params = "table_schema = %s", (capture.database,)
    rows = query(
        conn,
        "SELECT table_schema, table_name FROM information_schema.tables "
        f"WHERE {where} AND table_type IN %s ORDER BY table_schema, table_name",
        (*params, _TABLE_TYPES),
    )
    return [(r[0], r[1]) for r in rows]


def load_schema(
    conn: pymysql.Connection, database: str, table: str, split_keys: dict[str, str]
) -> TableSchema:
    """A table's schema with its row key and split column: `split_keys`' entry for it, else its
    primary key's first column; refused (`SourceError`, with the remedy) when it has no usable
    one."""
    columns, period, primary = _describe(conn, database, table)
    names = [c.name for c in columns]
    configured = split_keys.get(qualified(database, table), split_keys.get(table))
    if configured is not None and configured not in names:
        raise SourceError(
            f"snapshot.split_keys.{table} names column {configured!r}, which {database}.{table} "
            f"does not have (columns: {', '.join(names)})"
        )
    if primary:
        split = configured or primary[0]
        _check_split_in_primary_key(database, table, split, primary)
    else:
        unique = _unique_not_null_columns(conn, database, table, columns, _row_end(period))
        if configured is None:
            raise SourceError(
                f"table {database}.{table} has no primary key: set snapshot.split_keys.{table} "
                f"to a unique, non-null column ({_candidates(unique)})"
            )
        split = configured
        _check_split_identifies_rows(database, table, columns, split, unique)
    _check_split_exact(database, table, columns, split, primary)
    return TableSchema(database, table, columns, primary or (split,), split, period)


def split_key_candidates(conn: pymysql.Connection, database: str, table: str) -> list[str]:
    """The columns `snapshot.split_keys` may name for a table, in binlake's order of preference:
    its primary key's (the first is the default), or without one its NOT NULL columns with a
    single-column UNIQUE index; `load_schema` has the last word on each (`binlake init` writes
    the first it accepts)."""
    columns, period, primary = _describe(conn, database, table)
    if primary:
        return list(primary)
    return _unique_not_null_columns(conn, database, table, columns, _row_end(period))


def estimated_rows(conn: pymysql.Connection, tables: list[tuple[str, str]]) -> dict[str, int]:
    """Each (database, table)'s row count as the server estimates it, by qualified name
    (`information_schema.tables.table_rows`: InnoDB's sampled count, free to ask but possibly
    off by a good part): what `init` and `plan` show before a row is read."""
    databases = sorted({d for d, _ in tables})
    if not databases:
        return {}
    rows = query(
        conn,
        "SELECT table_schema, table_name, table_rows FROM information_schema.tables "
        "WHERE table_schema IN %s",
        (tuple(databases),),
    )
    found = {qualified(r[0], r[1]): int(r[2] or 0) for r in rows}
    return {qualified(d, t): found.get(qualified(d, t), 0) for d, t in tables}


def _row_end(period: tuple[str, str] | None) -> str | None:
    return period[1] if period else None


def _describe(
    conn: pymysql.Connection, database: str, table: str
) -> tuple[tuple[Column, ...], tuple[str, str] | None, tuple[str, ...]]:
    """A table's columns, its system period (if versioned) and its primary key's columns (without
    the row end the server adds to a versioned table's keys)."""
    described = query(
        conn,
        "SELECT column_name, data_type, column_type, is_nullable, numeric_precision, "
        "numeric_scale, datetime_precision, character_set_name, collation_name, "
        "column_default, generation_expression "
        "FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
        "ORDER BY ordinal_position",
        (database, table),
    )
    columns = tuple(
        Column(
            name=r[0],
            data_type=r[1].lower(),
            # As written: ENUM/SET members keep their case ('New' is not 'new').
            column_type=r[2],
            nullable=r[3] == "YES",
            precision=r[4],
            scale=r[5],
            datetime_precision=r[6],
            charset=r[7],
            collation=r[8],
            charmap=charmap(conn, r[7]),
            default=r[9],
        )
        for r in described
    )
    period = _system_period(conn, database, table, described)
    row_end = _row_end(period)
    primary = tuple(  # without the row end the server adds to a versioned table's keys
        r[0]
        for r in query(
            conn,
            "SELECT column_name FROM information_schema.key_column_usage "
            "WHERE table_schema = %s AND table_name = %s AND constraint_name = 'PRIMARY' "
            "ORDER BY ordinal_position",
            (database, table),
        )
        if r[0] != row_end
    )
    return columns, period, primary


def _system_period(
    conn: pymysql.Connection, database: str, table: str, described: list[tuple[Any, ...]]
) -> tuple[str, str] | None:
    """A system-versioned table's (row start, row end) columns: those information_schema shows
    generated AS ROW START / ROW END, else the implicit ones it does not list; None for a table
    not system-versioned (`system_versioning` has how binlake reads such a table)."""
    kind = query(
        conn,
        "SELECT table_type FROM information_schema.tables "
        "WHERE table_schema = %s AND table_name = %s",
        (database, table),
    )
    if not kind or kind[0][0] != "SYSTEM VERSIONED":
        return None
    generated = {str(r[10]).upper(): r for r in described if r[10] in ("ROW START", "ROW END")}
    if len(generated) < 2:
        return IMPLICIT_PERIOD
    start, end = generated["ROW START"], generated["ROW END"]
    if str(end[1]).lower() != "timestamp":
        raise SourceError(
            f"{database}.{table} keeps transaction-precise history (its period columns "
            f"{start[0]!r} and {end[0]!r} are {end[2]} transaction ids): MariaDB logs its changes "
            "as statements, not row events, so binlake cannot capture it. Leave it out of "
            "source.tables, or version it by time (period columns TIMESTAMP(6))"
        )
    return start[0], end[0]


def load_schema_if_exists(
    conn: pymysql.Connection, database: str, table: str, split_keys: dict[str, str]
) -> TableSchema | None:
    """A table's schema as the stream captures it (None if the table does not exist now)."""
    exists = query(
        conn,
        "SELECT 1 FROM information_schema.tables "
        "WHERE table_schema = %s AND table_name = %s AND table_type IN %s",
        (database, table, _TABLE_TYPES),
    )
    if not exists:
        return None
    schema = load_schema(conn, database, table, split_keys)
    map_table(schema)  # refuses a column type binlake cannot land
    return schema


def _unique_not_null_columns(
    conn: pymysql.Connection,
    database: str,
    table: str,
    columns: tuple[Column, ...],
    row_end: str | None,
) -> list[str]:
    """Columns that alone identify a row: NOT NULL, with a single-column UNIQUE index (a
    system-versioned table's: single-column but for the `row_end` every unique key gains)."""
    indexed = {
        r[0]
        for r in query(
            conn,
            "SELECT MAX(column_name) FROM information_schema.statistics "
            "WHERE table_schema = %s AND table_name = %s AND non_unique = 0 "
            "AND column_name <> %s GROUP BY index_name HAVING COUNT(*) = 1",
            (database, table, row_end or ""),
        )
    }
    return [c.name for c in columns if c.name in indexed and not c.nullable]


def _candidates(unique: list[str]) -> str:
    if not unique:
        return "it has none: add a NOT NULL column with a UNIQUE index, or a primary key"
    return f"candidates: {', '.join(unique)}"


def _check_split_in_primary_key(
    database: str, table: str, split: str, primary: tuple[str, ...]
) -> None:
    """The replay identifies rows by the primary key, and a range over one of its columns puts
    each row in exactly one chunk. A range over another column does not: an update moving a row
    between chunks keeps its key, so one chunk loses it or two chunks hold it."""
    if split not in primary:
        raise SourceError(
            f"snapshot.split_keys.{table} names {split!r}, which is not in the primary key of "
            f"{database}.{table} ({', '.join(primary)}): binlake identifies its rows by the "
            "primary key and must split it by one of those columns. Name a primary-key column "
            f"there, or remove the entry to split by {primary[0]!r}"
        )


def _check_split_identifies_rows(
    database: str, table: str, columns: tuple[Column, ...], split: str, unique: list[str]
) -> None:
    """Without a primary key the split key is the row key: a NULL falls in no chunk's range and
    a repeated value makes two rows one key, so it must be NOT NULL and UNIQUE on its own."""
    if split in unique:
        return
    others = _candidates([c for c in unique if c != split])
    needed = "binlake needs a NOT NULL column with a single-column UNIQUE index there"
    if next(c for c in columns if c.name == split).nullable:
        raise SourceError(
            f"snapshot.split_keys.{table} names {split!r}, which is nullable in "
            f"{database}.{table}: rows holding NULL there would be lost. {needed}: declare "
            f"{split!r} NOT NULL, or name another column ({others})"
        )
    raise SourceError(
        f"snapshot.split_keys.{table} names {split!r}, which has no single-column UNIQUE index "
        f"in {database}.{table}: rows sharing a value would be merged into one. {needed}: add "
        f"UNIQUE ({split}), or name another column ({others})"
    )


def _check_split_exact(
    database: str, table: str, columns: tuple[Column, ...], split: str, primary: tuple[str, ...]
) -> None:
    """FLOAT and DOUBLE values do not survive the round trip exactly (the server prints them
    rounded, the binlog carries their bits): chunk bounds and row keys would not compare equal."""
    column = next(c for c in columns if c.name == split)
    if column.data_type in _UNORDERED:
        raise SourceError(
            f"the split key {split!r} of {database}.{table} is {column.column_type}, which the "
            "server orders by its binary form, not by the text binlake lands: set "
            f"snapshot.split_keys.{table} to another unique NOT NULL or primary-key column"
        )
    if column.data_type not in _FLOATING:
        return
    others = [c.name for c in columns if c.name in primary and c.data_type not in _FLOATING]
    if others:
        advice = f"set snapshot.split_keys.{table} to a primary-key column of another type"
        advice += f" ({', '.join(others)})"
    elif primary:
        advice = "its primary key has no other column to split by: leave it out of source.tables"
    else:
        advice = f"set snapshot.split_keys.{table} to a unique NOT NULL column of an exact type"
    raise SourceError(
        f"the split key {split!r} of {database}.{table} is {column.column_type}, a "
        f"floating-point type whose values do not compare exactly: {advice}"
    )
