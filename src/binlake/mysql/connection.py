"""Connections to the source: PyMySQL for metadata, watermarks and small queries (in UTC,
reconnecting), and the bulk drivers for the chunk SELECTs.

Everything talks to MySQL/MariaDB with bound parameters; identifiers are quoted by `quote` and
never come from row values.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from functools import lru_cache
from typing import Any, ClassVar, Literal

import pymysql
import pymysql.connections
import pymysql.cursors

from binlake.config.secrets import source_password
from binlake.config.settings import SourceConfig, TlsMode
from binlake.errors import SourceConnectionError, SourceError
from binlake.mysql.reconnect import reconnecting
from binlake.mysql.tls import CLIENT_SSL, tls_error, tls_failure, tls_options

log = logging.getLogger(__name__)

# MySQL/MariaDB error codes we turn into advice.
ER_ACCESS_DENIED = 1045
ER_DBACCESS_DENIED = 1044
ER_BAD_DB = 1049
CR_CONNECTION_ERROR = 2003


def _session_options(source: SourceConfig) -> dict[str, Any]:
    """Connection settings both drivers (PyMySQL and MySQLdb) accept under the same names.

    `time_zone = '+00:00'` makes TIMESTAMP values arrive in UTC, matching the binlog's epoch
    seconds, so both read paths land the same instant.
    """
    options = {
        "host": source.host,
        "port": source.port,
        "user": source.user,
        "password": source_password(source),
        "charset": "utf8mb4",
        "connect_timeout": int(source.connect_timeout_s),
        "autocommit": True,
        "init_command": "SET time_zone = '+00:00'",
    }
    if source.database is not None:  # with several databases, every name is qualified
        options["database"] = source.database
    return options


class Connection(pymysql.connections.Connection):
    """PyMySQL's connection, sharing one TLS context per process.

    Without TLS options PyMySQL negotiates TLS when the server offers it (its PREFERRED mode)
    and builds a new `SSLContext` for every connection, loading the system's CA paths each time:
    most of a chunk's binlog replay, which opens two connections (docs/performance.md). The
    context carries no
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
            failure = tls_failure(f"{self.host}:{self.port}", self.tls_mode, exc)
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

    On MySQLdb the chunk reader runs several times as fast (`make bench`: snapshot.reader_*;
    docs/performance.md), but PyPI
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
        raise tls_failure(_where(source), source.tls, exc) or _connect_error(source, exc) from None
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
