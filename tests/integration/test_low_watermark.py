"""The chunk's low watermark on the real server: MariaDB's exact path, and the switch to MySQL's.

MariaDB reports the binlog position of the chunk's own snapshot (binlog_snapshot_file/position),
which is the chunk's LW. MySQL's path (the head, once every transaction before it committed,
through GTIDs) needs gtid_owned and WAIT_FOR_EXECUTED_GTID_SET, which MariaDB does not have: here
it is only shown to be taken, before the read view, when the server reports no snapshot position.
"""

from __future__ import annotations

from typing import Any

import pymysql
import pytest

from binlake.mysql.connection import bulk_connection, connection
from binlake.mysql.discovery import load_schema
from binlake.mysql.server import reports_snapshot_offset
from binlake.snapshot.chunk_reader import ChunkReader, _select_at_snapshot
from binlake.snapshot.chunks import ChunkRange

from .replay import head_offset, offset_of

pytestmark = pytest.mark.integration


def _table(sql: Any, make_config: Any, database: str) -> tuple[Any, Any]:
    sql("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))")
    sql("INSERT INTO t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    config = make_config()
    with connection(config.source) as conn:
        return config, load_schema(conn, database, "t", {})


def test_mariadb_reports_the_binlog_position_of_the_chunks_snapshot(
    db_env: dict[str, str], database: str, sql: Any, make_config: Any
) -> None:
    config, table = _table(sql, make_config, database)
    with connection(config.source) as conn:
        assert reports_snapshot_offset(conn)
        before = head_offset(conn)
    with bulk_connection(config.source) as bulk:
        at, _, rows = _select_at_snapshot(bulk, table, ChunkRange.all())
    with connection(config.source) as conn:
        after = head_offset(conn)
    assert len(rows) == 3
    assert at is not None, "the snapshot's binlog position was not read"
    assert offset_of(*before) <= offset_of(at.file, at.pos) <= offset_of(*after)


def test_chunk_reader_takes_its_lw_from_the_snapshot_on_mariadb(
    db_env: dict[str, str], database: str, sql: Any, make_config: Any
) -> None:
    config, table = _table(sql, make_config, database)
    with ChunkReader(config.source, table, config.snapshot_server_id(0)) as reader:
        assert reader.exact_lw
        read = reader.read(0, ChunkRange.all())
    assert read.rows == 3 and read.lw <= read.hw


def test_without_a_snapshot_position_the_lw_is_settled_before_the_read_view(
    db_env: dict[str, str], database: str, sql: Any, make_config: Any
) -> None:
    config, table = _table(sql, make_config, database)
    with ChunkReader(config.source, table, config.snapshot_server_id(0)) as reader:
        reader.exact_lw = False  # what reports_snapshot_offset answers on MySQL
        # MySQL's path asks for the owned GTIDs; MariaDB has none to give.
        with pytest.raises(pymysql.err.MySQLError, match="gtid_owned"):
            reader.read(0, ChunkRange.all())
