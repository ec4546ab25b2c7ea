"""The chunk reader: one chunk, lock-free, exactly as of its high watermark.

Flink CDC's SnapshotSplitReader. Step 1, the low watermark; step 2, the SELECT of the chunk's
range; step 3, the high watermark; step 4, the binlog in (LW, HW] replayed onto the selected rows.

The low watermark must not be later than the SELECT's view: a transaction written to the binlog
before LW but not yet committed in the storage engine when the SELECT's read view opens would be
in neither the rows nor the replay. MariaDB closes that gap exactly: `START TRANSACTION WITH
CONSISTENT SNAPSHOT` publishes the binlog position of the snapshot (`binlog_snapshot_file/
_position`, the mechanism behind mysqldump --single-transaction --master-data). On MySQL the
position read before the snapshot is used; any window that brackets the SELECT is correct.

Rows stay columnar: the SELECT's rows go to Arrow column by column, and the replay only touches
the keys the binlog window changed (the rows of those keys are replaced by their state at HW).
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from binlake.binlog import read_changes
from binlake.changes import Row, RowKey, apply_changes
from binlake.chunks import ChunkRange
from binlake.config import SourceConfig
from binlake.offsets import BinlogOffset
from binlake.planner import key_order
from binlake.source import TableSchema, bulk_connection, connection, current_offset, quote
from binlake.typemap import ColumnMapping, map_table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ChunkRead:
    chunk_id: int
    lw: BinlogOffset
    hw: BinlogOffset
    columns: list[pa.Array]  # the chunk at HW, one array per table column
    replayed: int  # binlog changes of this table read in (LW, HW]

    @property
    def rows(self) -> int:
        return len(self.columns[0]) if self.columns else 0


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


def _select_at_snapshot(
    bulk: Any, table: TableSchema, chunk: ChunkRange
) -> tuple[BinlogOffset | None, tuple[tuple[Any, ...], ...]]:
    """The chunk's rows in one consistent snapshot, and that snapshot's binlog position (MariaDB;
    None elsewhere)."""
    cur = bulk.cursor()
    try:
        cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        cur.execute("SHOW SESSION STATUS LIKE 'binlog_snapshot_%%'")
        status = {str(k): v for k, v in cur.fetchall()}
        cur.execute(select_sql(table, chunk), _bounds(chunk))
        rows = cur.fetchall()
        cur.execute("COMMIT")
    finally:
        cur.close()
    file, pos = status.get("binlog_snapshot_file"), status.get("binlog_snapshot_position")
    at = BinlogOffset(_text(file), int(pos)) if file and pos is not None else None
    return at, rows


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


class ChunkReader:
    """Reads chunks of one table over one pair of connections, kept for all its chunks: a
    PyMySQL one for watermarks and collation weights, a MySQLdb one for the SELECTs (opening
    them per chunk cost half the reader's time, in TLS set-up)."""

    def __init__(self, source: SourceConfig, table: TableSchema, server_id: int) -> None:
        self.source = source
        self.table = table
        self.server_id = server_id
        self.mappings = map_table(table)
        self._stack = ExitStack()

    def __enter__(self) -> ChunkReader:
        self.conn = self._stack.enter_context(connection(self.source))
        self.bulk = self._stack.enter_context(bulk_connection(self.source))
        self.order = key_order(self.conn, self.table)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def read(self, chunk_id: int, chunk: ChunkRange) -> ChunkRead:
        table, name = self.table, self.table.qualified
        log.debug("Snapshot step 1 - Determining low watermark for %s chunk %d", name, chunk_id)
        before = current_offset(self.conn)
        at, raw = _select_at_snapshot(self.bulk, table, chunk)
        lw = at or before
        log.debug(
            "Snapshot step 2 - Read %d rows of %s chunk %d %s", len(raw), name, chunk_id, chunk
        )
        hw = current_offset(self.conn)
        log.debug("Snapshot step 3 - High watermark %s for %s chunk %d", hw, name, chunk_id)
        if hw <= lw:
            return ChunkRead(chunk_id, lw, hw, _columns(self.mappings, raw), 0)
        log.debug("Snapshot step 4 - Replaying (%s, %s] onto %s chunk %d", lw, hw, name, chunk_id)
        changes = list(read_changes(self.source, self.server_id, [table], lw, hw))
        split, order = table.split_index, self.order
        if order is not None:
            order.prime(
                image[split]
                for change in changes
                for image in (change.before, change.after)
                if image is not None
            )
        # The final state at HW of every key the window touched (None: deleted or moved away).
        touched: dict[RowKey, Row | None] = {
            table.key_of(image): None
            for change in changes
            for image in (change.before, change.after)
            if image is not None
        }
        touched.update(
            apply_changes({}, changes, table.key_of, lambda r: chunk.contains(r[split], order))
        )
        key_normalizers = [(i, self.mappings[i].normalize) for i in table.key_indexes]
        untouched = [r for r in raw if tuple(n(r[i]) for i, n in key_normalizers) not in touched]
        replaced = [row for row in touched.values() if row is not None]
        columns = [
            pa.concat_arrays(
                [column, mapping.to_arrow([row[i] for row in replaced], normalized=True)]
            )
            for i, (mapping, column) in enumerate(
                zip(self.mappings, _columns(self.mappings, untouched), strict=True)
            )
        ]
        return ChunkRead(chunk_id, lw, hw, columns, len(changes))


def _columns(mappings: tuple[ColumnMapping, ...], rows: Any) -> list[pa.Array]:
    """Row tuples of raw driver values → one Arrow array per column."""
    transposed = list(zip(*rows, strict=True)) if rows else [() for _ in mappings]
    return [m.to_arrow(values) for m, values in zip(mappings, transposed, strict=True)]
