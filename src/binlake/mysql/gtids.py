"""GTID positions: what a binlog offset means on any server that holds the same history.

A position comes in one of two flavours, told apart by its text alone (`is_gtid_set`):

- MariaDB: a list of `domain-server-sequence`, the last transaction of each replication domain
  (`@@gtid_binlog_pos`);
- MySQL (`gtid_mode=ON`): a GTID set, every transaction the server holds (`@@gtid_executed`,
  `uuid:1-5,uuid2:1-3:tag:1-2`, arithmetic in `binlake.model.gtid_sets`).

A promoted replica (with `log_slave_updates` / `log_replica_updates`) holds the primary's
transactions under the same GTIDs at other binlog coordinates, so the position the stream
stopped at on the old primary can be found again on the new one (`lineage`). Every comparison
or advance of a position dispatches on its flavour here (the GTID dump's command, in
`replication.open_stream`, by the same test). A MySQL server with GTIDs off records no
position: a replaced source there stops the stream with the reset error.

A MySQL set names a place in a binlog only where exactly its transactions come before it: the
new server must hold every GTID of the set (`lacks`), and the place its GTID dump starts at must
have the set before it (`_ends_there`), else the stream would read twice or skip.

python-mysql-replication 1.0.17 neither decodes MySQL 8.4's tagged GTID events (type 42, passed
on undecoded: binlake reads the GTID from the event's bytes, `gtid_after_event`) nor encodes a
tagged GTID set for a GTID dump (binlake's encoding is sent instead: `replication`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pymysql
from pymysqlreplication.event import GtidEvent, MariadbGtidEvent, NotImplementedEvent

from binlake.config.settings import SourceConfig
from binlake.model.gtid_sets import Gtid, GtidSet, is_gtid_set
from binlake.model.offsets import BinlogOffset
from binlake.mysql.binlog_files import tagged_gtid
from binlake.mysql.connection import connection, query
from binlake.mysql.replication import (
    ER_MASTER_FATAL_ERROR_READING_BINLOG,
    open_stream,
    reconnecting_read,
)
from binlake.mysql.server import current_offset

#: Reads of the GTID position around `SHOW MASTER STATUS` before giving up on an agreeing pair.
_HEAD_READS = 5
#: MySQL 8.3+'s GTID_TAGGED_LOG_EVENT, which python-mysql-replication 1.0.17 does not know.
GTID_TAGGED_LOG_EVENT = 42

#: Where a binlog file's first event starts (after the magic number).
_FIRST_EVENT = 4
#: The rows of `SHOW BINLOG EVENTS` one read of `_gtid_set_at` takes.
_EVENTS_PER_READ = 10_000
#: A GTID event's text in `SHOW BINLOG EVENTS`: `SET @@SESSION.GTID_NEXT= 'uuid:n'`.
_GTID_NEXT = re.compile(r"^SET @@SESSION\.GTID_NEXT\s*=\s*'([^']*)'", re.IGNORECASE)

_MARIADB_POSITION = "SELECT @@GLOBAL.gtid_binlog_pos"
_MYSQL_POSITION = "SELECT @@GLOBAL.gtid_executed"


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
    """Whether two GTID positions name the same history: MariaDB's with domains in any order,
    MySQL's as sets however spelt. Positions of different flavours never do."""
    if is_gtid_set(one) != is_gtid_set(other):
        return False
    if is_gtid_set(one):
        return GtidSet.parse(one) == GtidSet.parse(other)
    return parse_position(one) == parse_position(other)


def gtid_after(position: str, gtid: str) -> str:
    """The GTID position after the transaction `gtid`: MariaDB's (`domain-server-sequence`)
    replaces its domain's last transaction; MySQL's (`uuid:n`, `uuid:tag:n`) joins the set."""
    if is_gtid_set(gtid):
        return str(GtidSet.parse(position).add(Gtid.parse(gtid)))
    parsed = parse_position(position)
    parsed.update(parse_position(gtid))
    return format_position(parsed)


def gtid_after_event(position: str, event: Any) -> str:
    """The GTID position after the transaction that `event` begins, as a binlog read carries
    it: MariaDB's and MySQL's GTID events, and MySQL 8.4's tagged one (which
    python-mysql-replication passes on undecoded: read from its bytes, `tagged_gtid`). An
    anonymous transaction (no GTID) leaves it unknown (""): a set without that transaction no
    longer names the place, and a wrong position would make a failover skip or repeat
    changes."""
    if isinstance(event, MariadbGtidEvent | GtidEvent):
        return gtid_after(position, event.gtid)
    if isinstance(event, NotImplementedEvent) and event.event_type == GTID_TAGGED_LOG_EVENT:
        return gtid_after(position, tagged_gtid(event))
    return ""


def lacks(executed: str, position: str) -> bool:
    """Whether a MySQL server whose `@@gtid_executed` is `executed` lacks a transaction of the
    GTID set `position`. A GTID dump does not check that for other servers' UUIDs: it sends
    what the set lacks, and a server missing part of the set would be resumed past changes it
    never had. A MariaDB position names each domain's last transaction only: this cannot tell
    (False), and MariaDB's GTID dump refuses a position its server does not hold."""
    if not is_gtid_set(position):
        return False
    return not GtidSet.parse(executed).issuperset(GtidSet.parse(position))


def _position_query(conn: pymysql.Connection) -> str | None:
    """The query of this server's GTID position: MariaDB's `@@gtid_binlog_pos`; MySQL's
    `@@gtid_executed` when `gtid_mode` is ON (below that, anonymous transactions are in no
    set, so none names a binlog place); None without one."""
    try:
        query(conn, _MARIADB_POSITION)
        return _MARIADB_POSITION
    except pymysql.err.OperationalError:
        pass  # MySQL: no such variable
    (mode,) = query(conn, "SELECT @@GLOBAL.gtid_mode")[0]
    return _MYSQL_POSITION if str(mode).upper() == "ON" else None


def _read_position(conn: pymysql.Connection, sql: str) -> str:
    return str(query(conn, sql)[0][0] or "")


def _nothing_owned(conn: pymysql.Connection) -> bool:
    """Whether no MySQL transaction is between its binlog write and its commit now. MySQL
    writes a transaction to the binlog (moving the head) before it adds its GTID to
    `gtid_executed`, and the GTID is owned (`@@gtid_owned`) in between: with nothing owned
    after the head was read, every transaction before the head is in the set read next.
    (MariaDB updates `gtid_binlog_pos` with the binlog write itself.)"""
    return not str(query(conn, "SELECT @@GLOBAL.gtid_owned")[0][0] or "").strip()


def gtid_head(conn: pymysql.Connection) -> BinlogOffset:
    """The binlog head with the GTID position there (MySQL's in the canonical text). The two
    are separate reads, so the position is read before and after `SHOW MASTER STATUS` until
    both agree and, on MySQL, nothing was owned in between (`_nothing_owned`): no transaction
    was written between them, and every one before the head is in the position. The head
    comes without a position when they never agree, or on MySQL with GTIDs off."""
    sql = _position_query(conn)
    if sql is None:
        return current_offset(conn)
    mysql = sql == _MYSQL_POSITION
    for _ in range(_HEAD_READS):
        before = _read_position(conn, sql)
        head = current_offset(conn)
        if (not mysql or _nothing_owned(conn)) and _read_position(conn, sql) == before:
            return head.with_gtid(str(GtidSet.parse(before)) if mysql else before)
    return head


def gtid_at(conn: pymysql.Connection, offset: BinlogOffset) -> str | None:
    """The GTID position at `offset` of this server's binlog (MariaDB's `BINLOG_GTID_POS`, which
    reads the file up to there; on MySQL `_gtid_set_at`); None where the file is not on the
    server, the offset is not an event boundary in it, or the server has no GTID positions."""
    if _position_query(conn) == _MYSQL_POSITION:
        return _gtid_set_at(conn, offset)
    try:
        rows = query(conn, "SELECT BINLOG_GTID_POS(%s, %s)", (offset.binlog_file, offset.pos))
    except pymysql.err.MySQLError:
        return None
    found = rows[0][0] if rows else None
    return None if found is None else str(found)


def _gtid_set_at(conn: pymysql.Connection, offset: BinlogOffset) -> str | None:
    """MySQL's GTID set at `offset`: it has no `BINLOG_GTID_POS`, so the file's PREVIOUS_GTIDS
    plus the GTID of each transaction before `offset` in it, read from `SHOW BINLOG EVENTS`
    (whose text names tagged GTIDs too). None where the file is not on the server, `offset` is
    no event boundary in it, or a transaction before it has no GTID."""
    position: GtidSet | None = GtidSet()
    begins = _FIRST_EVENT  # where the next event begins (the file's end after the last)
    try:
        for event_begins, ends, kind, info in _binlog_events(conn, offset.binlog_file):
            begins = event_begins
            if begins >= offset.pos or position is None:
                break
            position, begins = _set_after(position, kind, info), ends
    except pymysql.err.MySQLError:
        return None  # the file is not on the server
    return str(position) if position is not None and begins == offset.pos else None


def _binlog_events(conn: pymysql.Connection, file: str) -> Iterator[tuple[int, int, str, str]]:
    """Each event of binlog `file` as `SHOW BINLOG EVENTS` lists it: (where it begins, where
    it ends, its type, its text), read `_EVENTS_PER_READ` at a time."""
    start = _FIRST_EVENT
    while True:
        rows = query(
            conn, "SHOW BINLOG EVENTS IN %s FROM %s LIMIT %s", (file, start, _EVENTS_PER_READ)
        )
        for _, pos, kind, _, end, info in rows:
            yield int(pos), int(end), str(kind), str(info or "")
        if len(rows) < _EVENTS_PER_READ:
            return
        start = int(rows[-1][4])


def _set_after(position: GtidSet, kind: str, info: str) -> GtidSet | None:
    """The set after one event of `SHOW BINLOG EVENTS`: a PREVIOUS_GTIDS event's set is the
    file's start; a GTID event's `SET @@SESSION.GTID_NEXT= '…'` adds its GTID; an anonymous
    transaction (`'ANONYMOUS'`) makes it unknown (None)."""
    if kind == "Previous_gtids":
        return GtidSet.parse(info)
    gtid_next = _GTID_NEXT.search(info)
    if gtid_next is None:
        return position
    if not is_gtid_set(gtid_next.group(1)):
        return None
    return position.add(Gtid.parse(gtid_next.group(1)))


def server_identity(conn: pymysql.Connection) -> int:
    """The source's `server_id`: a promoted replica answering at the same address has another."""
    return int(query(conn, "SELECT @@GLOBAL.server_id")[0][0])


def offset_of_gtid(source: SourceConfig, server_id: int, gtid: str) -> BinlogOffset | None:
    """Where GTID position `gtid` ends in the source's binlog (server coordinates, with `gtid`):
    the start of the first transaction after it, or the head if none follows yet. None when the
    source does not hold that position: purged, or never written there (a replica promoted
    before it received every transaction the stream read: a history that diverged; on MySQL,
    a `gtid_executed` without every GTID of the set, or a binlog without a place where the set
    ends: `_ends_there`)."""
    return reconnecting_read(source)(_offset_of_gtid, source, server_id, gtid)


def holds(source: SourceConfig, server_id: int, gtid: str) -> bool:
    """Whether the source has every transaction up to GTID position `gtid`. MySQL: its
    `gtid_executed` holds the set (the transactions themselves, whatever binlog files were
    purged since). MariaDB's position names each domain's last transaction only: the source
    holds it where its binlog has the position (`offset_of_gtid`)."""
    if not is_gtid_set(gtid):
        return offset_of_gtid(source, server_id, gtid) is not None
    with connection(source) as conn:
        return not lacks(_read_position(conn, _MYSQL_POSITION), gtid)


def _offset_of_gtid(source: SourceConfig, server_id: int, gtid: str) -> BinlogOffset | None:
    for _ in range(2):  # the head, then a dump from the position: one of them finds it
        with connection(source) as conn:
            if is_gtid_set(gtid) and lacks(_read_position(conn, _MYSQL_POSITION), gtid):
                return None
            head = gtid_head(conn)
        if head.gtid and same_position(head.gtid, gtid):
            return head.with_gtid(gtid)
        stream = open_stream(
            source, server_id, gtid, only_events=[MariadbGtidEvent, GtidEvent, NotImplementedEvent],
            filter_non_implemented_events=False,
        )  # fmt: skip
        try:
            for event in stream:
                if _begins_transaction(event):
                    begins = event.packet.log_pos - event.packet.event_size
                    found = BinlogOffset(stream.log_file, begins, gtid)
                    return found if _ends_there(source, found) else None
        except pymysql.err.OperationalError as exc:
            if exc.args and exc.args[0] == ER_MASTER_FATAL_ERROR_READING_BINLOG:
                return None
            raise
        finally:
            stream.close()
    return None


def _ends_there(source: SourceConfig, found: BinlogOffset) -> bool:
    """Whether the position `found.gtid` ends at `found`, where a GTID dump from it began.
    MariaDB's dump starts where each domain's last transaction of the position is (True).
    MySQL's sends every transaction the set lacks, wherever it is in the binlog: where the
    server wrote one outside the set before one inside it (its own writes before it was
    promoted, or the same transactions in another order: a replica applying in parallel
    without `replica_preserve_commit_order`), no place has exactly the set before it, and
    reading from the first would read again what the stream read. So the set at `found` (its
    file's PREVIOUS_GTIDS and the GTIDs before it) must be the position itself."""
    if not is_gtid_set(found.gtid):
        return True
    with connection(source) as conn:
        return same_position(_gtid_set_at(conn, found) or "", found.gtid)


def _begins_transaction(event: Any) -> bool:
    """A GTID event: MariaDB's, MySQL's, or MySQL's tagged one (undecoded)."""
    if isinstance(event, NotImplementedEvent):
        return bool(event.event_type == GTID_TAGGED_LOG_EVENT)
    return True
