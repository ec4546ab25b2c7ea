"""The replication connection: a binlog dump opened at an offset or a GTID position, as every
binlog read opens it, and retried as a binlog read is when the source drops it.

A MySQL GTID dump (COM_BINLOG_DUMP_GTID) carries the set in MySQL's binary form. The library
encodes it with its own GtidSet, which knows no tags (MySQL 8.4's `uuid:tag:n`); on import,
the name its binlog stream builds the set by is bound to `DumpGtidSet`, binlake's encoding
(`GtidSet.encode`: byte for byte what servers write in PREVIOUS_GTIDS, tagged and untagged).
"""

from __future__ import annotations

from typing import Any

from pymysqlreplication import BinLogStreamReader, binlogstream
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent
from tenacity import Retrying

from binlake.config.secrets import source_password
from binlake.config.settings import SourceConfig
from binlake.model.gtid_sets import GtidSet, is_gtid_set
from binlake.model.offsets import BinlogOffset
from binlake.mysql import table_maps  # noqa: F401  # importing it parses each TABLE_MAP once
from binlake.mysql.connection import Connection
from binlake.mysql.reconnect import reconnecting
from binlake.mysql.tls import tls_options

#: The server's refusal to serve its binlog from where a dump asks, e.g. "Could not find first
#: log file name" (a purged file, an offset that is no event boundary, an unknown GTID position).
ER_MASTER_FATAL_ERROR_READING_BINLOG = 1236
#: The row events of the captured tables.
ROW_EVENTS = [WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent]


class DumpGtidSet:
    """A GTID set as python-mysql-replication's binlog dump asks its encoding (the two members
    it reads of its own GtidSet), encoded by binlake: tagged sets included."""

    def __init__(self, text: str) -> None:
        self._encoded = GtidSet.parse(text).encode()

    @property
    def encoded_length(self) -> int:
        return len(self._encoded)

    def encoded(self) -> bytes:
        return self._encoded


binlogstream.GtidSet = DumpGtidSet


def open_stream(
    source: SourceConfig, server_id: int, start: BinlogOffset | str, **options: Any
) -> BinLogStreamReader:
    """A replication connection reading from `start` (non-blocking unless `blocking=True`):
    an offset, or a GTID position (the server finds where it ends in its binlog): MariaDB's
    `domain-server-sequence` list, or a MySQL GTID set (`uuid:1-5,…`; COM_BINLOG_DUMP_GTID,
    which sends every transaction the set lacks)."""
    options.setdefault("blocking", False)
    if isinstance(start, str):
        at: dict[str, Any] = {"is_mariadb": not is_gtid_set(start), "auto_position": start}
    else:
        # File/position resume: is_mariadb=True without GTIDs silently streams from the
        # oldest binlog instead of log_file/log_pos, so MariaDB is read with the MySQL path.
        at = {"log_file": start.binlog_file, "log_pos": start.pos, "is_mariadb": False}
    return BinLogStreamReader(
        connection_settings={
            "host": source.host,
            "port": source.port,
            "user": source.user,
            "password": source_password(source),
            "charset": "utf8mb4",
            **tls_options(source, "pymysql"),
        },
        server_id=server_id,
        resume_stream=True,
        **at,
        enable_logging=False,
        pymysql_wrapper=Connection,
        **options,
    )


def reconnecting_read(source: SourceConfig) -> Retrying:
    return reconnecting(f"binlog read on {source.host}:{source.port}", source.reconnect_timeout_s)
