"""The source database: connections, the binlog head, server settings and table discovery.

Everything here talks to MySQL/MariaDB through PyMySQL with bound parameters; identifiers are
quoted by `quote` and never come from row values.
"""

from __future__ import annotations

import logging
import re
import ssl
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, ClassVar, Literal

import pymysql
import pymysql.connections
import pymysql.cursors

from binlake.config.settings import Config, SourceConfig, TlsMode
from binlake.errors import ConfigError, SourceConnectionError, SourceError
from binlake.model.capture import SYSTEM_DATABASES, Capture, qualified
from binlake.model.offsets import BinlogOffset
from binlake.model.schema import Column, TableSchema
from binlake.model.typemap import map_table
from binlake.mysql.charsets import charmap
from binlake.mysql.reconnect import reconnecting

log = logging.getLogger(__name__)

# MySQL/MariaDB error codes we turn into advice.
ER_ACCESS_DENIED = 1045
ER_DBACCESS_DENIED = 1044
ER_BAD_DB = 1049
ER_SPECIFIC_ACCESS_DENIED = 1227
ER_TABLEACCESS_DENIED = 1142
ER_COLUMNACCESS_DENIED = 1143
CR_CONNECTION_ERROR = 2003
CR_SSL_CONNECTION_ERROR = 2026
#: The handshake's capability flag by which the server offers TLS.
CLIENT_SSL = 2048

_FLOATING = {"float", "double", "real"}
#: MariaDB types whose order is not the order of their text (the value's landed form).
_UNORDERED = {"inet4", "inet6", "uuid"}


def _session_options(source: SourceConfig) -> dict[str, Any]:
    """Connection settings both drivers (PyMySQL and MySQLdb) accept under the same names.

    `time_zone = '+00:00'` makes TIMESTAMP values arrive in UTC, matching the binlog's epoch
    seconds, so both read paths land the same instant.
    """
    options = {
        "host": source.host,
        "port": source.port,
        "user": source.user,
        "password": source.resolve_password(),
        "charset": "utf8mb4",
        "connect_timeout": int(source.connect_timeout_s),
        "autocommit": True,
        "init_command": "SET time_zone = '+00:00'",
    }
    if source.database is not None:  # with several databases, every name is qualified
        options["database"] = source.database
    return options


def tls_options(source: SourceConfig, driver: Literal["pymysql", "mysqldb"]) -> dict[str, Any]:
    """The connection options that apply `source.tls` in one driver's terms (the binlog reader
    connects through PyMySQL's, with `Connection`).

    PyMySQL: `preferred` passes nothing (PyMySQL's own PREFERRED, whose context `Connection`
    shares); stronger modes pass one shared `SSLContext`, which makes PyMySQL refuse a server
    without TLS, and the mode, for `Connection`'s messages.

    MySQLdb is built on libmariadb, whose `ssl_mode`s are not MySQL's: PREFERRED never starts
    TLS, REQUIRED falls back to plaintext when the server has no TLS, and VERIFY_CA also checks
    the host name; what it does check is a CA given on its own (the chain, not the name). So
    `preferred` sets a cipher list (any TLS option makes it negotiate TLS when offered,
    unverified), `verify_ca` is REQUIRED with the CA, and `bulk_connect` refuses a plaintext
    session itself.
    """
    mode = source.tls
    if driver == "pymysql":
        if mode == "disabled":
            return {"ssl_disabled": True, "tls_mode": mode}
        if mode == "preferred":
            return {"tls_mode": mode}
        return {"ssl": _tls_context(source), "tls_mode": mode}
    if mode == "disabled":
        return {"ssl_mode": "DISABLED"}
    if mode == "preferred":
        return {"ssl": {"cipher": "DEFAULT"}}
    files = {"cert": source.tls_cert, "key": source.tls_key}
    if mode != "required":
        files.update({"ca": source.tls_ca} if source.tls_ca else _system_cas())
    ssl_mode = "VERIFY_IDENTITY" if mode == "verify_identity" else "REQUIRED"
    return {"ssl_mode": ssl_mode, "ssl": {k: v for k, v in files.items() if v}}


def _system_cas() -> dict[str, str | None]:
    paths = ssl.get_default_verify_paths()
    return {"ca": paths.cafile} if paths.cafile else {"capath": paths.capath}


def _tls_context(source: SourceConfig) -> ssl.SSLContext:
    try:
        return _shared_context(source.tls, source.tls_ca, source.tls_cert, source.tls_key)
    except (ssl.SSLError, OSError) as exc:
        raise ConfigError(
            f"the TLS files in source.tls_ca, source.tls_cert and source.tls_key cannot be used "
            f"({exc.strerror or exc}): each must be PEM, the key the certificate's and unencrypted"
        ) from None


@lru_cache(maxsize=16)
def _shared_context(
    mode: TlsMode, ca: str | None, cert: str | None, key: str | None
) -> ssl.SSLContext:
    """One context per TLS setting for all PyMySQL connections: building one loads the CAs
    (~33 ms), and a context holds no per-connection state."""
    context = ssl.create_default_context(cafile=ca)  # without a CA file: the system's CAs
    # Python 3.13 turns on strict X.509 checks, which the certificates MySQL generates for
    # itself fail (PyMySQL drops them too).
    context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    context.check_hostname = mode == "verify_identity"
    if mode == "required":
        context.verify_mode = ssl.CERT_NONE
    if cert is not None:
        context.load_cert_chain(cert, key)
    return context


def tls_error(where: str, mode: TlsMode, detail: str, offered: bool) -> SourceError:
    """A TLS failure as advice: the server offers no TLS at all, or its certificate fails the
    check the mode asks for."""
    if not offered:
        return SourceError(
            f"the source at {where} does not offer TLS but source.tls is {mode}, which never "
            "falls back to plaintext: enable TLS on the server (ssl_cert and ssl_key), or set "
            "source.tls to preferred to accept an unencrypted connection"
        )
    advice = "set source.tls_ca to the PEM file of the CA that signed the server's certificate"
    if mode == "verify_identity":
        advice += (
            ", and source.host to a name or IP address the certificate lists (verify_ca checks "
            "the chain but not the name)"
        )
    return SourceError(
        f"the TLS connection to the source at {where} failed the check source.tls: {mode} asks "
        f"for ({detail}): {advice}"
    )


def _tls_failure(where: str, mode: TlsMode, exc: Exception) -> SourceError | None:
    """The TLS problem behind a driver's connect error, if that is what it is: error 2026 from
    either driver (its text tells a server without TLS from a failed handshake), or PyMySQL's
    2003 raised from an `ssl.SSLError` (a rejected certificate)."""
    cause = getattr(exc, "original_exception", None)
    if isinstance(cause, ssl.SSLError):
        detail = getattr(cause, "verify_message", None) or cause.reason or str(cause)
        return tls_error(where, mode, str(detail), offered=True)
    if exc.args and exc.args[0] == CR_SSL_CONNECTION_ERROR:
        detail = str(exc.args[-1])
        return tls_error(where, mode, detail, offered=not _NO_TLS.search(detail))
    return None


#: PyMySQL's and libmariadb's words for "the server offers no TLS" (both error 2026).
_NO_TLS = re.compile(r"does(?:n't| not) support", re.IGNORECASE)


class Connection(pymysql.connections.Connection):
    """PyMySQL's connection, sharing one TLS context per process.

    Without TLS options PyMySQL negotiates TLS when the server offers it (its PREFERRED mode)
    and builds a new `SSLContext` for every connection, loading the system's CA paths each time:
    ~33 ms, most of a chunk's binlog replay (two connections each). The context carries no
    per-connection state, so one serves them all; explicit TLS options bring their own, shared
    too (`tls_options`), and `tls_mode`, named in the advice a TLS failure raises.
    """

    _preferred_tls: ClassVar[Any] = None
    #: How long a statement waits for a source that dropped this connection, reconnecting
    #: (`connect` sets it); None, as on the binlog reader's connections, fails at once.
    reconnect_window_s: float | None = None

    def __init__(self, *args: Any, tls_mode: TlsMode = "preferred", **kwargs: Any) -> None:
        self.tls_mode: TlsMode = tls_mode
        super().__init__(*args, **kwargs)

    def _create_ssl_ctx(self, sslp: Any) -> Any:
        if sslp:
            return super()._create_ssl_ctx(sslp)  # type: ignore[misc]  # untyped in the stubs
        if Connection._preferred_tls is None:
            Connection._preferred_tls = super()._create_ssl_ctx({})  # type: ignore[misc]
        return Connection._preferred_tls

    def connect(self, sock: Any = None) -> None:
        """Connect with the handshake bounded by `connect_timeout` too.

        PyMySQL bounds only the TCP connect by it and then waits for the server's greeting under
        the read timeout, none by default: a host that accepts the connection but never answers
        (a proxy or firewall in the way, another service's port) would hang the caller forever.

        A TLS failure raises a `SourceError` with advice: PyMySQL reports a rejected certificate
        as error 2003, "can't connect", which reads (and would be retried) as the network.
        """
        read_timeout = self._read_timeout  # type: ignore[has-type]  # untyped in the stubs
        self._read_timeout = read_timeout or self.connect_timeout
        failure: SourceError | None = None
        try:
            super().connect(sock)
        except pymysql.err.OperationalError as exc:
            failure = _tls_failure(f"{self.host}:{self.port}", self.tls_mode, exc)
            if failure is None:
                raise
        finally:
            # The next read puts this timeout back on the socket.
            self._read_timeout = read_timeout
        if failure is not None:
            raise failure  # outside the handler: no driver error in its context to retry on

    def query(self, sql: Any, unbuffered: bool = False) -> int:
        """Run a statement, repeated on a new connection if the source dropped this one.

        Safe because the statements of connections that reconnect are all autocommit reads of
        metadata and watermarks (the chunk SELECTs' transactions run on `bulk_connect`'s
        connections, which never reconnect on their own): repeating one answers as of later,
        which every caller accepts (a high watermark read later only widens its chunk's window).
        """
        if self.reconnect_window_s is None:
            return self._query_once(sql, unbuffered)
        retrying = reconnecting(f"query on {self.host}:{self.port}", self.reconnect_window_s)
        return retrying(self._query_once, sql, unbuffered)

    def _query_once(self, sql: Any, unbuffered: bool) -> int:
        if self._sock is None:  # type: ignore[attr-defined]  # closed by the attempt before
            self.connect()
        return int(super().query(sql, unbuffered))


def connect(source: SourceConfig, wait: bool = True, **options: Any) -> pymysql.Connection:
    """A PyMySQL connection in UTC: for metadata, watermarks and small queries.

    With `wait`, a source that refuses or drops connections is waited for, reconnecting, for
    `source.reconnect_timeout_s` (a restart, a failover). The CLI's first check passes False:
    a host that was never reached is a configuration error, answered at once.
    """

    def attempt() -> Connection:
        conn = Connection(**_session_options(source), **tls_options(source, "pymysql"), **options)
        conn.reconnect_window_s = source.reconnect_timeout_s
        return conn

    try:
        if not wait:
            return attempt()
        where = f"connecting to {_where(source)}"
        return reconnecting(where, source.reconnect_timeout_s)(attempt)
    except pymysql.err.OperationalError as exc:
        raise _connect_error(source, exc) from None


def _where(source: SourceConfig) -> str:
    return f"{source.host}:{source.port}"


def _require_tls(source: SourceConfig, conn: Any) -> None:
    """libmariadb, asked for TLS, uses it whenever the server offers it, but unless it checks
    the host name it goes on in plaintext when the server does not: refuse that session."""
    if source.tls not in ("disabled", "preferred") and not conn.server_capabilities & CLIENT_SSL:
        conn.close()
        raise tls_error(_where(source), source.tls, "no TLS offered", offered=False)


#: A server that requires TLS (`require_secure_transport`) refuses a plaintext login as denied.
_DISABLED_TLS_HINT = (
    "; or the server accepts only TLS connections: set source.tls to something other than disabled"
)


def _connect_error(source: SourceConfig, exc: Exception) -> SourceError:
    code = exc.args[0] if exc.args else None
    where = _where(source)
    if code == ER_ACCESS_DENIED:
        return SourceConnectionError(
            f"access denied for user {source.user!r} at {where}: check source.user and the "
            f"password (source.password_env, now {source.password_env!r}, or source.password)"
            + (_DISABLED_TLS_HINT if source.tls == "disabled" else "")
        )
    if code in (ER_BAD_DB, ER_DBACCESS_DENIED):
        return SourceError(
            f"database {source.database!r} does not exist at {where} or {source.user!r} "
            "may not use it: check source.database and the user's grants"
        )
    detail = str(exc.args[-1] if exc.args else exc)
    timed_out = "timed out" in detail
    waited = f" in source.connect_timeout_s={source.connect_timeout_s:g} s" if timed_out else ""
    return SourceConnectionError(
        f"cannot connect to {where}{waited} ({detail}): check source.host and source.port, "
        "and that the server runs and accepts connections from here"
    )


#: The drivers the chunk SELECTs can run on: mysqlclient's MySQLdb (libmariadb, C) or PyMySQL.
BulkDriver = Literal["mysqldb", "pymysql"]


@lru_cache(maxsize=1)
def bulk_driver() -> BulkDriver:
    """The fastest driver installed for the chunk SELECTs, chosen (and logged) once per process.

    On MySQLdb the chunk reader runs ~3× as fast (`make bench`: snapshot.reader_*), but PyPI
    has no Linux wheel of mysqlclient: building it needs a C compiler and the MariaDB client
    headers, which Databricks job clusters lack. So it is the optional `fast` extra, and PyMySQL,
    which every install has, reads the same rows as the same values without it.
    """
    try:
        import MySQLdb  # noqa: F401  # only whether it loads matters here
    except ImportError as exc:
        log.warning(
            "snapshot reader: PyMySQL (pure Python; MySQLdb unavailable: %s). Install "
            "binlake[fast] (mysqlclient; building it needs gcc, pkg-config and libmariadb-dev) "
            "for ~3x faster snapshots",
            exc,
        )
        return "pymysql"
    log.info("snapshot reader: MySQLdb (mysqlclient, libmariadb)")
    return "mysqldb"


def bulk_connect(source: SourceConfig, driver: BulkDriver | None = None) -> Any:
    """A connection for the chunk SELECTs through `driver` (by default `bulk_driver()`).

    It does not reconnect by itself: its reads are transactions, which only the caller can
    repeat (`ChunkReader.read`); a PyMySQL one is a `Connection` without a reconnect window.
    """
    if (driver or bulk_driver()) == "pymysql":
        try:
            return Connection(**_session_options(source), **tls_options(source, "pymysql"))
        except pymysql.err.OperationalError as exc:
            raise _connect_error(source, exc) from None
    import MySQLdb

    try:
        conn = MySQLdb.connect(**_session_options(source), **tls_options(source, "mysqldb"))
    except MySQLdb.OperationalError as exc:
        raise _tls_failure(_where(source), source.tls, exc) or _connect_error(source, exc) from None
    _require_tls(source, conn)
    return conn


@contextmanager
def bulk_connection(source: SourceConfig, driver: BulkDriver | None = None) -> Iterator[Any]:
    conn = bulk_connect(source, driver)
    try:
        yield conn
    finally:
        conn.close()


@contextmanager
def connection(
    source: SourceConfig, wait: bool = True, **options: Any
) -> Iterator[pymysql.Connection]:
    conn = connect(source, wait, **options)
    try:
        yield conn
    finally:
        conn.close()


def query(conn: pymysql.Connection, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
    """Rows of `sql`, always %-formatted with `args` (so a literal `%` is written `%%`)."""
    with conn.cursor() as cur:
        cur.execute(sql, tuple(args))
        return list(cur.fetchall())


def head_offset(source: SourceConfig, lineage: int = 0) -> BinlogOffset:
    """The binlog head, on a connection of its own, as lineage `lineage` stores it."""
    with connection(source) as conn:
        return current_offset(conn).on(lineage)


def current_offset(conn: pymysql.Connection) -> BinlogOffset:
    """The binlog head: `SHOW MASTER STATUS` (MySQL ≥ 8.4 spells it `SHOW BINARY LOG STATUS`)."""
    try:
        rows = query(conn, "SHOW MASTER STATUS")
    except pymysql.err.ProgrammingError:
        rows = query(conn, "SHOW BINARY LOG STATUS")
    except pymysql.err.OperationalError as exc:
        if exc.args and exc.args[0] == ER_SPECIFIC_ACCESS_DENIED:
            account = current_account(conn)
            raise SourceError(
                f"the source user {account} may not read the binlog position (SHOW MASTER "
                "STATUS needs BINLOG MONITOR on MariaDB 10.5+, REPLICATION CLIENT on MySQL and "
                f"older MariaDB): run `GRANT BINLOG MONITOR ON *.* TO {account}` on MariaDB, "
                f"`GRANT REPLICATION CLIENT ON *.* TO {account}` on MySQL"
            ) from None
        raise
    if not rows:
        raise SourceError(
            "the source's binlog is off (SHOW MASTER STATUS is empty): start the server with "
            "log_bin, binlog_format=ROW and binlog_row_image=FULL"
        )
    return BinlogOffset(rows[0][0], int(rows[0][1]))


def current_account(conn: pymysql.Connection) -> str:
    """The account the server authenticated the session as, as a GRANT names it: 'user'@'host'."""
    user, _, host = str(query(conn, "SELECT CURRENT_USER()")[0][0]).rpartition("@")
    return "@".join("'" + part.replace("'", "''") + "'" for part in (user, host))


def binlog_files(conn: pymysql.Connection) -> list[str]:
    return list(binlog_sizes(conn))


def binlog_sizes(conn: pymysql.Connection) -> dict[str, int]:
    """The binlog files the source still has, oldest first, with their sizes in bytes."""
    return {str(row[0]): int(row[1]) for row in query(conn, "SHOW BINARY LOGS")}


# ---------------------------------------------------------------------------------------------
# Table discovery


def _table_names(conn: pymysql.Connection, capture: Capture) -> list[tuple[str, str]]:
    """(database, table) of the base tables the capture may take, in name order."""
    params: tuple[Any, ...]
    where, params = "table_schema NOT IN %s", (tuple(sorted(SYSTEM_DATABASES)),)
    if capture.database is not None:
        where, params = "table_schema = %s", (capture.database,)
    rows = query(
        conn,
        "SELECT table_schema, table_name FROM information_schema.tables "
        f"WHERE {where} AND table_type = 'BASE TABLE' ORDER BY table_schema, table_name",
        params,
    )
    return [(r[0], r[1]) for r in rows]


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
    exists = query(
        conn,
        "SELECT 1 FROM information_schema.tables "
        "WHERE table_schema = %s AND table_name = %s AND table_type = 'BASE TABLE'",
        (database, table),
    )
    if not exists:
        return None
    schema = load_schema(conn, database, table, split_keys)
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
    """The captured tables' schemas, in `source.tables` order (name order without it)."""
    tables = config.source.capture.select(_table_names(conn, config.source.capture))
    names = {n for d, t in tables for n in (t, qualified(d, t))}
    unknown = sorted(set(config.snapshot.split_keys) - names)
    if unknown:
        raise SourceError(
            f"snapshot.split_keys names tables that are not captured: {', '.join(unknown)}"
        )
    return [load_schema(conn, d, t, config.snapshot.split_keys) for d, t in tables]


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
