"""The source server: its binlog head and files, the account a session runs as, and the server
settings binlake relies on (the binlog's format, the low watermark's guarantee, how it compares
table names)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pymysql

from binlake.config.settings import SourceConfig
from binlake.errors import SourceError
from binlake.model.capture import TableNames
from binlake.model.offsets import BinlogOffset
from binlake.mysql.connection import connection, query

#: The server's refusal of a statement that needs a privilege the user lacks.
ER_SPECIFIC_ACCESS_DENIED = 1227


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
#: word (absent on MySQL: fine). MySQL's compressed transactions and partial JSON updates
#: (`binlog_row_value_options=PARTIAL_JSON`, under the FULL row image checked above) are read.
_UNREADABLE_EVENTS = {
    "log_bin_compress": ("OFF", "MariaDB compresses its row events"),
}


def logs_column_names(conn: pymysql.Connection) -> bool:
    """Whether row events name their columns (`binlog_row_metadata=FULL`), which lets the stream
    check every row image against the schema it decodes it with, by name."""
    return (_variable(conn, "binlog_row_metadata") or "").upper() == "FULL"


def table_names(conn: pymysql.Connection) -> TableNames:
    """How the server compares database and table names (`lower_case_table_names`; a server
    that does not report it compares them as written)."""
    found = _variable(conn, "lower_case_table_names")
    return TableNames(int(found) if found and found.isdigit() else 0)


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
