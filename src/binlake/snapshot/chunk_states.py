"""The chunk ledger's rows as chunk states, without Spark: what `Ledger` reads back, and what
`binlake status` and `binlake plan` read with delta-rs (no JVM) to show a snapshot's progress.

A chunk's state is its plan row with its newest mark row applied (`snapshot.ledger` has why the
ledger only grows by appends).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from binlake.model.offsets import BinlogOffset
from binlake.snapshot.chunks import ChunkRange, decode_key

PENDING = "pending"
FINISHED = "finished"


@dataclass(frozen=True, slots=True)
class ChunkState:
    """One ledger row."""

    table: str
    chunk_id: int
    split_column: str
    range: ChunkRange
    status: str = PENDING
    lw: BinlogOffset | None = None
    hw: BinlogOffset | None = None
    rows: int | None = None
    #: When the ledger marked it (its newest mark row's `updated_at`); None while pending. Not
    #: part of the chunk's identity: the same chunk read back later is equal.
    marked_at: datetime | None = field(default=None, compare=False)

    @property
    def finished(self) -> bool:
        return self.status == FINISHED


#: The split column of a mark row: a plan row always names one.
MARK = ""
#: What a mark row sets on its chunk's plan row.
_MARKED = ("status", "lw_file", "lw_pos", "hw_file", "hw_pos", "rows", "hw_gtid")


def current_chunks(rows: Iterable[Mapping[str, object]]) -> list[ChunkState]:
    """The chunks that ledger rows record, ordered by table and chunk id: each chunk's newest
    plan row (a later one holds the range an open-ended chunk's read was cut to) with its
    newest mark (both by `updated_at`) applied; a mark whose plan is gone (a table forgotten) is
    no chunk."""
    plans: dict[tuple[object, object], Mapping[str, object]] = {}
    marks: dict[tuple[object, object], Mapping[str, object]] = {}
    for row in rows:
        key = (row["table"], row["chunk_id"])
        newest = plans if row["split_column"] != MARK else marks
        if key not in newest or _newer(row, newest[key]):
            newest[key] = row
    states = []
    for key, plan in plans.items():
        mark = marks.get(key)
        merged = plan if mark is None else {**plan, **{c: mark.get(c) for c in _MARKED}}
        merged = {**merged, "marked_at": None if mark is None else mark["updated_at"]}
        states.append(chunk_state(dict(merged)))
    return sorted(states, key=lambda s: (s.table, s.chunk_id))


def by_table(chunks: Iterable[ChunkState]) -> dict[str, list[ChunkState]]:
    """`chunks` grouped by table, in their order: one walk over a ledger however many tables it
    holds, where a scan per table would cost tables × chunks at every stream start."""
    grouped: dict[str, list[ChunkState]] = {}
    for chunk in chunks:
        grouped.setdefault(chunk.table, []).append(chunk)
    return grouped


def _newer(row: Mapping[str, object], than: Mapping[str, object]) -> bool:
    return row["updated_at"] > than["updated_at"]  # type: ignore[operator]


def read_chunks(path: str) -> list[ChunkState]:
    """Every chunk the ledger at `path` records, read with delta-rs (none before the first
    snapshot)."""
    try:
        rows = DeltaTable(path).to_pyarrow_table().to_pylist()
    except TableNotFoundError:
        return []
    return current_chunks(rows)


def chunk_state(row: dict[str, object]) -> ChunkState:
    """A ledger row (as a dict) as the chunk it records."""

    def offset(prefix: str) -> BinlogOffset | None:
        file, pos = row[f"{prefix}_file"], row[f"{prefix}_pos"]
        if file is None or pos is None:
            return None
        return BinlogOffset(str(file), int(pos), str(row.get(f"{prefix}_gtid") or ""))  # type: ignore[call-overload]

    return ChunkState(
        table=str(row["table"]),
        chunk_id=int(row["chunk_id"]),  # type: ignore[call-overload]
        split_column=str(row["split_column"]),
        range=ChunkRange(decode_key(row["start"]), decode_key(row["end"])),  # type: ignore[arg-type]
        status=str(row["status"]),
        lw=offset("lw"),
        hw=offset("hw"),
        rows=int(row["rows"]) if row["rows"] is not None else None,  # type: ignore[call-overload]
        marked_at=row.get("marked_at"),  # type: ignore[arg-type]
    )
