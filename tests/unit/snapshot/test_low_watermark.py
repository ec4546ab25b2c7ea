"""The low watermark's server-facing pieces that need no server: which path a source takes
(`snapshot_offset` over `SHOW STATUS LIKE 'binlog_snapshot_%'` rows) and MySQL's owned GTIDs as a
set to wait for."""

from __future__ import annotations

from binlake.model.offsets import BinlogOffset
from binlake.mysql.server import snapshot_offset
from binlake.snapshot.chunk_reader import owned_gtid_set

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "12345678-aaaa-bbbb-cccc-1234567890ab"


def test_snapshot_offset_from_mariadb_status_rows() -> None:
    rows = [("Binlog_snapshot_file", "mysql-bin.000066"), ("Binlog_snapshot_position", "4118509")]
    assert snapshot_offset(rows) == BinlogOffset("mysql-bin.000066", 4118509)
    raw = [(b"Binlog_snapshot_file", b"mysql-bin.000002"), (b"Binlog_snapshot_position", b"4")]
    assert snapshot_offset(raw) == BinlogOffset("mysql-bin.000002", 4)


def test_no_snapshot_offset_on_mysql_or_without_a_binlog() -> None:
    assert snapshot_offset([]) is None  # MySQL: no such status variables
    rows = [("Binlog_snapshot_file", ""), ("Binlog_snapshot_position", "0")]
    assert snapshot_offset(rows) is None  # MariaDB with log_bin off


def test_owned_gtid_set_drops_owner_threads() -> None:
    assert owned_gtid_set("") == ""
    assert owned_gtid_set(f"{A}:7#31") == f"{A}:7"
    assert owned_gtid_set(f"{A}:7#31:8#33") == f"{A}:7:8"


def test_owned_gtid_set_splits_uuids_printed_back_to_back() -> None:
    # B begins with digits: the boundary is 8 hex digits before its first dash.
    assert owned_gtid_set(f"{A}:56#3{B}:9#4".upper()) == f"{A}:56,{B}:9".upper()
    assert owned_gtid_set(f"{A}:5#12{B}:6#13:7#14") == f"{A}:5,{B}:6:7"


def test_owned_gtid_set_keeps_tags() -> None:
    assert owned_gtid_set(f"{A}:batch:5#12") == f"{A}:batch:5"
