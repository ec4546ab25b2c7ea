"""The source database: connections, the binlog head, validation and table discovery.

Everything here talks to MySQL/MariaDB through PyMySQL with bound parameters; identifiers are
quoted by `quote` and never come from row values.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any, ClassVar

import pymysql
import pymysql.connections
import pymysql.cursors

from binlake.charsets import charmap
from binlake.config import Config, SourceConfig
from binlake.errors import SourceError
from binlake.offsets import BinlogOffset

# MySQL/MariaDB error codes we turn into advice.
ER_ACCESS_DENIED = 1045
ER_DBACCESS_DENIED = 1044
ER_BAD_DB = 1049
ER_SPECIFIC_ACCESS_DENIED = 1227
ER_TABLEACCESS_DENIED = 1142
CR_CONNECTION_ERROR = 2003

_FLOATING = {"float", "double", "real"}
#: MariaDB types whose order is not the order of their text (the value's landed form).
_UNORDERED = {"inet4", "inet6", "uuid"}


def quote(identifier: str) -> str:
    """Quote a MySQL identifier (the one place SQL names are built from strings)."""
    return "`" + identifier.replace("`", "``") + "`"


def _session_options(source: SourceConfig) -> dict[str, Any]:
    """Connection settings both drivers (PyMySQL and MySQLdb) accept under the same names.

    `time_zone = '+00:00'` makes TIMESTAMP values arrive in UTC, matching the binlog's epoch
    seconds, so both read paths land the same instant.
    """
    return {
        "host": source.host,
        "port": source.port,
        "user": source.user,
        "password": source.resolve_password(),
        "database": source.database,
        "charset": "utf8mb4",
        "connect_timeout": int(source.connect_timeout_s),
        "autocommit": True,
        "init_command": "SET time_zone = '+00:00'",
    }


class Connection(pymysql.connections.Connection):
    """PyMySQL's connection, sharing one TLS context per process.

    Without TLS options PyMySQL negotiates TLS when the server offers it (its PREFERRED mode)
    and builds a new `SSLContext` for every connection, loading the system's CA paths each time:
    ~33 ms, most of a chunk's binlog replay (two connections each). The context carries no
    per-connection state, so one serves them all; explicit TLS options keep their own.
    """

    _preferred_tls: ClassVar[Any] = None

    def _create_ssl_ctx(self, sslp: Any) -> Any:
        if sslp:
            return super()._create_ssl_ctx(sslp)  # type: ignore[misc]  # untyped in the stubs
        if Connection._preferred_tls is None:
            Connection._preferred_tls = super()._create_ssl_ctx({})  # type: ignore[misc]
        return Connection._preferred_tls


def connect(source: SourceConfig, **options: Any) -> pymysql.Connection:
    """A PyMySQL connection in UTC: for metadata, watermarks and small queries."""
    try:
        return Connection(**_session_options(source), **options)
    except pymysql.err.OperationalError as exc:
        raise _connect_error(source, exc) from None


def _connect_error(source: SourceConfig, exc: Exception) -> SourceError:
    code = exc.args[0] if exc.args else None
    where = f"{source.host}:{source.port}"
    if code == ER_ACCESS_DENIED:
        return SourceError(
            f"access denied for user {source.user!r} at {where}: check source.user and the "
            f"password (source.password_env, now {source.password_env!r}, or source.password)"
        )
    if code in (ER_BAD_DB, ER_DBACCESS_DENIED):
        return SourceError(
            f"database {source.database!r} does not exist at {where} or {source.user!r} "
            "may not use it: check source.database and the user's grants"
        )
    return SourceError(f"cannot connect to {where}: {exc.args[-1] if exc.args else exc}")


@contextmanager
def bulk_connection(source: SourceConfig) -> Iterator[Any]:
    """A MySQLdb (libmariadb, C) connection for bulk reads: ~10× PyMySQL's rows/s (FIELD-NOTES)."""
    import MySQLdb

    try:
        conn = MySQLdb.connect(**_session_options(source))
    except MySQLdb.OperationalError as exc:
        raise _connect_error(source, exc) from None
    try:
        yield conn
    finally:
        conn.close()


@contextmanager
def connection(source: SourceConfig, **options: Any) -> Iterator[pymysql.Connection]:
    conn = connect(source, **options)
    try:
        yield conn
    finally:
        conn.close()


def query(conn: pymysql.Connection, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
    with conn.cursor() as cur:
        cur.execute(sql, tuple(args))
        return list(cur.fetchall())


def current_offset(conn: pymysql.Connection) -> BinlogOffset:
    """The binlog head: `SHOW MASTER STATUS` (MySQL ≥ 8.4 spells it `SHOW BINARY LOG STATUS`)."""
    try:
        rows = query(conn, "SHOW MASTER STATUS")
    except pymysql.err.ProgrammingError:
        rows = query(conn, "SHOW BINARY LOG STATUS")
    except pymysql.err.OperationalError as exc:
        if exc.args and exc.args[0] == ER_SPECIFIC_ACCESS_DENIED:
            raise SourceError(
                "the source user may not read the binlog position: "
                "GRANT REPLICATION CLIENT (BINLOG MONITOR on MariaDB) ON *.* to it"
            ) from None
        raise
    if not rows:
        raise SourceError(
            "the source's binlog is off (SHOW MASTER STATUS is empty): start the server with "
            "log_bin, binlog_format=ROW and binlog_row_image=FULL"
        )
    return BinlogOffset(rows[0][0], int(rows[0][1]))


def binlog_files(conn: pymysql.Connection) -> list[str]:
    return [row[0] for row in query(conn, "SHOW BINARY LOGS")]


# ---------------------------------------------------------------------------------------------
# Table schemas


@dataclass(frozen=True, slots=True)
class Column:
    """One source column, as information_schema describes it."""

    name: str
    data_type: str  # lower case: int, bigint, decimal, varchar, datetime, ...
    column_type: str  # full type: "bigint(20) unsigned", "decimal(10,2)", "enum('a','b')"
    nullable: bool
    precision: int | None = None
    scale: int | None = None
    datetime_precision: int | None = None
    charset: str | None = None
    collation: str | None = None
    #: Single-byte charsets: the server's decoding of each byte (`binlake.charsets`).
    charmap: str | None = None
    #: COLUMN_DEFAULT as the server reports it (a literal, `NULL`, or an expression).
    default: str | None = None

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type.lower()


@dataclass(frozen=True)
class TableSchema:
    """A captured table: its columns in ordinal order, its row key and its split column."""

    database: str
    name: str
    columns: tuple[Column, ...]
    key: tuple[str, ...]  # primary key, or the unique split key of a key-less table
    split_column: str

    # Asked once per binlog change by the stream's filter: computed once per schema.
    @cached_property
    def qualified(self) -> str:
        return f"{self.database}.{self.name}"

    @property
    def sql_name(self) -> str:
        return f"{quote(self.database)}.{quote(self.name)}"

    def column(self, name: str) -> Column:
        for column in self.columns:
            if column.name == name:
                return column
        raise KeyError(name)

    @cached_property
    def column_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @cached_property
    def key_indexes(self) -> tuple[int, ...]:
        names = self.column_names
        return tuple(names.index(k) for k in self.key)

    def key_of(self, row: tuple[Any, ...]) -> tuple[Any, ...]:
        """The row key of a row tuple in column order."""
        return tuple(row[i] for i in self.key_indexes)

    @cached_property
    def split_index(self) -> int:
        return self.column_names.index(self.split_column)

    def to_json(self) -> dict[str, Any]:
        return {
            "database": self.database,
            "name": self.name,
            "columns": [asdict(c) for c in self.columns],
            "key": list(self.key),
            "split_column": self.split_column,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TableSchema:
        return cls(
            data["database"],
            data["name"],
            tuple(Column(**c) for c in data["columns"]),
            tuple(data["key"]),
            data["split_column"],
        )


def _table_names(conn: pymysql.Connection, database: str) -> list[str]:
    rows = query(
        conn,
        "SELECT table_name FROM information_schema.tables "
        "WHERE table_schema = %s AND table_type = 'BASE TABLE' ORDER BY table_name",
        (database,),
    )
    return [r[0] for r in rows]


def select_tables(available: list[str], patterns: list[str] | None, database: str) -> list[str]:
    """Resolve `source.tables` (names or fully-matched regexes) against the existing tables."""
    if patterns is None:
        return list(available)
    chosen: list[str] = []
    for pattern in patterns:
        matched = [t for t in available if _matches(t, pattern)]
        if not matched:
            raise SourceError(
                f"table {database}.{pattern} does not exist (no base table matches "
                f"{pattern!r}): fix source.tables"
            )
        chosen.extend(t for t in matched if t not in chosen)
    return chosen


def _matches(table: str, pattern: str) -> bool:
    if table == pattern:
        return True
    try:
        return re.fullmatch(pattern, table) is not None
    except re.error:
        return False


def captured_by(table: str, patterns: list[str] | None) -> bool:
    """Whether `source.tables` captures a table of this name (e.g. one created later)."""
    return patterns is None or any(_matches(table, p) for p in patterns)


def load_schema(
    conn: pymysql.Connection, database: str, table: str, split_keys: dict[str, str]
) -> TableSchema:
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
        for r in query(
            conn,
            "SELECT column_name, data_type, column_type, is_nullable, numeric_precision, "
            "numeric_scale, datetime_precision, character_set_name, collation_name, "
            "column_default "
            "FROM information_schema.columns WHERE table_schema = %s AND table_name = %s "
            "ORDER BY ordinal_position",
            (database, table),
        )
    )
    primary = tuple(
        r[0]
        for r in query(
            conn,
            "SELECT column_name FROM information_schema.key_column_usage "
            "WHERE table_schema = %s AND table_name = %s AND constraint_name = 'PRIMARY' "
            "ORDER BY ordinal_position",
            (database, table),
        )
    )
    names = [c.name for c in columns]
    configured = split_keys.get(table)
    if configured is not None and configured not in names:
        raise SourceError(
            f"snapshot.split_keys.{table} names column {configured!r}, which {database}.{table} "
            f"does not have (columns: {', '.join(names)})"
        )
    if primary:
        split = configured or primary[0]
        _check_split_in_primary_key(database, table, split, primary)
    else:
        unique = _unique_not_null_columns(conn, database, table, columns)
        if configured is None:
            raise SourceError(
                f"table {database}.{table} has no primary key: set snapshot.split_keys.{table} "
                f"to a unique, non-null column ({_candidates(unique)})"
            )
        split = configured
        _check_split_identifies_rows(database, table, columns, split, unique)
    _check_split_exact(database, table, columns, split, primary)
    return TableSchema(database, table, columns, primary or (split,), split)


def load_schema_if_exists(
    conn: pymysql.Connection, database: str, table: str, split_keys: dict[str, str]
) -> TableSchema | None:
    """A table's schema as the stream captures it (None if the table does not exist now)."""
    if table not in _table_names(conn, database):
        return None
    schema = load_schema(conn, database, table, split_keys)
    from binlake.typemap import map_table  # the value model builds on this module

    map_table(schema)  # refuses a column type binlake cannot land
    return schema


def _unique_not_null_columns(
    conn: pymysql.Connection, database: str, table: str, columns: tuple[Column, ...]
) -> list[str]:
    """Columns that alone identify a row: NOT NULL, with a single-column UNIQUE index."""
    indexed = {
        r[0]
        for r in query(
            conn,
            "SELECT MAX(column_name) FROM information_schema.statistics "
            "WHERE table_schema = %s AND table_name = %s AND non_unique = 0 "
            "GROUP BY index_name HAVING COUNT(*) = 1",
            (database, table),
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


def discover(conn: pymysql.Connection, config: Config) -> list[TableSchema]:
    """The captured tables' schemas, in name order."""
    database = config.source.database
    tables = select_tables(_table_names(conn, database), config.source.tables, database)
    unknown = sorted(set(config.snapshot.split_keys) - set(tables))
    if unknown:
        raise SourceError(
            f"snapshot.split_keys names tables that are not captured: {', '.join(unknown)}"
        )
    return [load_schema(conn, database, t, config.snapshot.split_keys) for t in tables]


# ---------------------------------------------------------------------------------------------
# Validation


def _variable(conn: pymysql.Connection, name: str) -> str | None:
    rows = query(conn, "SHOW GLOBAL VARIABLES LIKE %s", (name,))
    return str(rows[0][1]) if rows else None


def check_binlog_settings(conn: pymysql.Connection) -> None:
    """log_bin on, ROW format, FULL row image, and no row events the binlog reader cannot read:
    each failure names the setting to change."""
    expected = {"log_bin": "ON", "binlog_format": "ROW", "binlog_row_image": "FULL"}
    for name, want in expected.items():
        found = _variable(conn, name)
        if found is None and name == "binlog_row_image":
            continue  # servers older than 5.6 always log full rows
        if (found or "").upper() != want:
            raise SourceError(
                f"the source has {name}={found or 'unset'}; binlake needs {name}={want} "
                "(set it in the server's config and restart it)"
            )
    for name, (want, what) in _UNREADABLE_EVENTS.items():
        found = _variable(conn, name)
        if found is not None and found.upper() != want:
            wanted = want or "''"
            raise SourceError(
                f"the source has {name}={found}: {what}, which binlake's binlog reader cannot "
                f"decode and would skip, losing those changes; binlake needs {name}={wanted} "
                "(set it in the server's config and restart it)"
            )


#: Settings under which the server logs row events python-mysql-replication skips without a
#: word (absent on the other server family: fine). Sessions may still set the MySQL ones; the
#: binlog reader stops on such events when it meets them.
_UNREADABLE_EVENTS = {
    "log_bin_compress": ("OFF", "MariaDB compresses its row events"),
    "binlog_transaction_compression": ("OFF", "MySQL compresses whole transactions"),
    "binlog_row_value_options": ("", "MySQL logs partial updates of JSON values"),
}


def logs_column_names(conn: pymysql.Connection) -> bool:
    """Whether row events name their columns (`binlog_row_metadata=FULL`), which lets the stream
    check every row image against the schema it decodes it with, by name."""
    return (_variable(conn, "binlog_row_metadata") or "").upper() == "FULL"


def snapshot_offset(status: Iterable[tuple[Any, Any]]) -> BinlogOffset | None:
    """The binlog position of the current consistent snapshot, from the rows of `SHOW STATUS LIKE
    'binlog_snapshot_%'` (named `Binlog_snapshot_file` and `Binlog_snapshot_position`). MariaDB
    and Percona Server report it; MySQL has no such variables (None), nor a server with its
    binlog off (an empty file name)."""
    values = {_text(name).lower(): value for name, value in status}
    file, pos = values.get("binlog_snapshot_file"), values.get("binlog_snapshot_position")
    return BinlogOffset(_text(file), int(pos)) if file and pos is not None else None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def reports_snapshot_offset(conn: pymysql.Connection) -> bool:
    return snapshot_offset(query(conn, "SHOW STATUS LIKE 'binlog_snapshot_%%'")) is not None


def check_low_watermark(conn: pymysql.Connection) -> None:
    """A chunk's low watermark must be at or before its read view (see chunk_reader): exact where
    the server reports the snapshot's binlog position, through GTIDs where it does not (MySQL),
    and without either nothing bounds it short of locking the server."""
    if reports_snapshot_offset(conn):
        return
    mode = _variable(conn, "gtid_mode")
    if (mode or "").upper() != "ON":
        raise SourceError(
            f"the source reports no binlog_snapshot_position (MySQL) and has gtid_mode="
            f"{mode or 'unset'}: without a snapshot position binlake needs gtid_mode=ON to place "
            "each chunk's low watermark at or before its read view (set gtid_mode=ON and "
            "enforce_gtid_consistency=ON in the server's config and restart it)"
        )


def check_privileges(conn: pymysql.Connection, tables: list[TableSchema]) -> None:
    grants = " ".join(str(r[0]).upper() for r in query(conn, "SHOW GRANTS"))
    if "ALL PRIVILEGES ON *.*" not in grants:
        if "REPLICATION SLAVE" not in grants and "REPLICATION REPLICA" not in grants:
            raise SourceError(
                "the source user lacks REPLICATION SLAVE: GRANT REPLICATION SLAVE ON *.* to it"
            )
        if not any(p in grants for p in ("REPLICATION CLIENT", "BINLOG MONITOR", "SUPER")):
            raise SourceError(
                "the source user lacks REPLICATION CLIENT (BINLOG MONITOR on MariaDB): "
                "GRANT it ON *.*"
            )
    for table in tables:
        try:
            query(conn, f"SELECT 1 FROM {table.sql_name} LIMIT 0")
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] == ER_TABLEACCESS_DENIED:
                raise SourceError(
                    f"the source user may not SELECT from {table.qualified}: GRANT SELECT on it"
                ) from None
            raise


def validate(conn: pymysql.Connection, config: Config) -> list[TableSchema]:
    """Check everything the snapshot and the stream rely on, before any work starts."""
    check_binlog_settings(conn)
    current_offset(conn)
    check_low_watermark(conn)
    tables = discover(conn, config)
    if not tables:
        raise SourceError(f"database {config.source.database!r} has no tables to capture")
    check_privileges(conn, tables)
    # Imported here: the value model builds on this module's Column/TableSchema.
    from binlake.typemap import map_table

    for table in tables:
        try:
            map_table(table)
        except SourceError as exc:
            raise SourceError(f"table {table.qualified}: {exc}") from None
    return tables
