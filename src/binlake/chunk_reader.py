"""The chunk reader: one chunk, lock-free, exactly as of its high watermark.

Flink CDC's SnapshotSplitReader. Step 1, the low watermark; step 2, the SELECT of the chunk's
range; step 3, the high watermark; step 4, the binlog in (LW, HW] replayed onto the selected rows.

The low watermark must not be later than the SELECT's view: a transaction written to the binlog
before LW but not yet committed in the storage engine when the SELECT's read view opens would be
in neither the rows nor the replay. MariaDB closes that gap exactly: `START TRANSACTION WITH
CONSISTENT SNAPSHOT` publishes the binlog position of the snapshot (`binlog_snapshot_file/
_position`, the mechanism behind mysqldump --single-transaction --master-data). On MySQL the
position read before the snapshot is used; any window that brackets the SELECT is correct.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pymysql

from binlake.binlog import read_changes
from binlake.changes import Row, apply_changes
from binlake.chunks import ChunkRange
from binlake.config import SourceConfig
from binlake.offsets import BinlogOffset
from binlake.planner import key_order
from binlake.source import TableSchema, connection, current_offset, query, quote
from binlake.typemap import map_table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChunkRead:
    chunk_id: int
    lw: BinlogOffset
    hw: BinlogOffset
    rows: list[Row]
    replayed: int  # binlog changes of this table read in (LW, HW]


def select_sql(table: TableSchema, chunk: ChunkRange) -> str:
    """The chunk's SELECT; bounds are bound parameters, names are quoted."""
    columns = ", ".join(quote(c) for c in table.column_names)
    k = quote(table.split_column)
    conditions = []
    if chunk.start is not None:
        conditions.append(f"{k} >= %s")
    if chunk.end is not None:
        conditions.append(f"{k} < %s")
    where = f" WHERE {' AND '.join(conditions)}" if conditions else ""
    return f"SELECT {columns} FROM {table.sql_name}{where}"


def _bounds(chunk: ChunkRange) -> tuple[Any, ...]:
    return tuple(v for v in (chunk.start, chunk.end) if v is not None)


def _snapshot_offset(conn: pymysql.Connection) -> BinlogOffset | None:
    status = dict(query(conn, "SHOW SESSION STATUS LIKE 'binlog_snapshot_%%'"))
    file, pos = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
    return BinlogOffset(str(file), int(pos)) if file and pos is not None else None


def read_chunk(
    source: SourceConfig,
    table: TableSchema,
    chunk_id: int,
    chunk: ChunkRange,
    server_id: int,
) -> ChunkRead:
    normalizers = [m.normalize for m in map_table(table)]
    split_index = table.split_index
    key_of = table.key_of

    with connection(source) as conn:
        order = key_order(conn, table)
        before = current_offset(conn)
        log.debug(
            "Snapshot step 1 - Determining low watermark for %s chunk %d", table.qualified, chunk_id
        )
        with conn.cursor(pymysql.cursors.SSCursor) as cur:
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            lw = _snapshot_offset(conn) or before
            log.debug(
                "Snapshot step 2 - Reading %s chunk %d %s after %s",
                table.qualified,
                chunk_id,
                chunk,
                lw,
            )
            cur.execute(select_sql(table, chunk), _bounds(chunk))
            selected = {
                key_of(row): row
                for row in (
                    tuple(n(v) for n, v in zip(normalizers, raw, strict=True)) for raw in cur
                )
            }
            cur.execute("COMMIT")
        hw = current_offset(conn)
        log.debug(
            "Snapshot step 3 - High watermark %s for %s chunk %d", hw, table.qualified, chunk_id
        )
        if hw <= lw:
            return ChunkRead(chunk_id, lw, hw, list(selected.values()), 0)
        log.debug(
            "Snapshot step 4 - Replaying binlog (%s, %s] onto %s chunk %d",
            lw,
            hw,
            table.qualified,
            chunk_id,
        )
        changes = list(read_changes(source, server_id, [table], lw, hw))
        if order is not None:
            order.prime(
                image[split_index]
                for change in changes
                for image in (change.before, change.after)
                if image is not None
            )
        keep: Callable[[Row], bool] = lambda row: chunk.contains(row[split_index], order)  # noqa: E731
        rows = apply_changes(selected, changes, key_of, keep)
    return ChunkRead(chunk_id, lw, hw, list(rows.values()), len(changes))
