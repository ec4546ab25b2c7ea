"""GTID positions: what a binlog offset means on any server that holds the same history.

A MariaDB GTID position is a list of `domain-server-sequence`, the last transaction of each
replication domain (`@@gtid_binlog_pos`). A promoted replica (with `log_slave_updates`) holds
the primary's transactions under the same GTIDs at other binlog coordinates, so the position
the stream stopped at on the old primary can be found again on the new one (`lineage`). MySQL
spells GTIDs differently (UUID sets); binlake records none there, and a replaced MySQL source
stops the stream with the reset error instead of being resumed.
"""

from __future__ import annotations

import pymysql
from pymysqlreplication.event import MariadbGtidEvent

from binlake.config.settings import SourceConfig
from binlake.model.offsets import BinlogOffset
from binlake.mysql.connection import connection, query
from binlake.mysql.replication import (
    ER_MASTER_FATAL_ERROR_READING_BINLOG,
    open_stream,
    reconnecting_read,
)
from binlake.mysql.server import current_offset

#: Reads of the GTID position around `SHOW MASTER STATUS` before giving up on an agreeing pair.
_HEAD_READS = 5


def parse_position(text: str) -> dict[int, tuple[int, int]]:
    """`0-1-100,1-2-7` → {domain: (server_id, sequence)}."""
    parsed: dict[int, tuple[int, int]] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        domain, server, sequence = (int(number) for number in item.split("-"))
        parsed[domain] = (server, sequence)
    return parsed


def format_position(position: dict[int, tuple[int, int]]) -> str:
    return ",".join(f"{d}-{s}-{n}" for d, (s, n) in sorted(position.items()))


def same_position(one: str, other: str) -> bool:
    """Whether two GTID positions name the same history (domains in any order)."""
    return parse_position(one) == parse_position(other)


def gtid_after(position: str, gtid: str) -> str:
    """The GTID position after the transaction `gtid` (`domain-server-sequence`)."""
    parsed = parse_position(position)
    parsed.update(parse_position(gtid))
    return format_position(parsed)


def _binlog_position(conn: pymysql.Connection) -> str | None:
    """`@@gtid_binlog_pos`, or None on a server without MariaDB's GTIDs (MySQL)."""
    try:
        return str(query(conn, "SELECT @@GLOBAL.gtid_binlog_pos")[0][0] or "")
    except pymysql.err.OperationalError:
        return None


def gtid_head(conn: pymysql.Connection) -> BinlogOffset:
    """The binlog head with the GTID position there. The two are separate reads, so the GTID
    position is read before and after `SHOW MASTER STATUS` until both agree: no transaction
    was written between them. MySQL's head comes without one."""
    for _ in range(_HEAD_READS):
        before = _binlog_position(conn)
        head = current_offset(conn)
        if before is None:
            return head
        if _binlog_position(conn) == before:
            return head.with_gtid(before)
    return head


def gtid_at(conn: pymysql.Connection, offset: BinlogOffset) -> str | None:
    """The GTID position at `offset` of this server's binlog (MariaDB's `BINLOG_GTID_POS`, which
    reads the file up to there); None where the file is not on the server, the offset is not
    an event boundary in it, or the server has no such function (MySQL)."""
    try:
        rows = query(conn, "SELECT BINLOG_GTID_POS(%s, %s)", (offset.binlog_file, offset.pos))
    except pymysql.err.MySQLError:
        return None
    found = rows[0][0] if rows else None
    return None if found is None else str(found)


def server_identity(conn: pymysql.Connection) -> int:
    """The source's `server_id`: a promoted replica answering at the same address has another."""
    return int(query(conn, "SELECT @@GLOBAL.server_id")[0][0])


def offset_of_gtid(source: SourceConfig, server_id: int, gtid: str) -> BinlogOffset | None:
    """Where GTID position `gtid` ends in the source's binlog (server coordinates, with `gtid`):
    the start of the first transaction after it, or the head if none follows yet. None when the
    source does not hold that position: purged, or never written there (a replica promoted
    before it received every transaction the stream read: a history that diverged)."""
    return reconnecting_read(source)(_offset_of_gtid, source, server_id, gtid)


def _offset_of_gtid(source: SourceConfig, server_id: int, gtid: str) -> BinlogOffset | None:
    for _ in range(2):  # the head, then a dump from the position: one of them finds it
        with connection(source) as conn:
            head = gtid_head(conn)
        if head.gtid and same_position(head.gtid, gtid):
            return head.with_gtid(gtid)
        stream = open_stream(source, server_id, gtid, only_events=[MariadbGtidEvent])
        try:
            for event in stream:
                begins = event.packet.log_pos - event.packet.event_size
                return BinlogOffset(stream.log_file, begins, gtid)
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] == ER_MASTER_FATAL_ERROR_READING_BINLOG:
                return None
            raise
        finally:
            stream.close()
    return None
