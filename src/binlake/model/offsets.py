"""Binlog offsets: the total order every step of the algorithm reasons in.

A binlog offset is `(file, pos)`. Files compare by their numeric suffix (`mysql-bin.000010`
follows `mysql-bin.000009` whatever the width), then positions. `SHOW MASTER STATUS` yields an
offset on a transaction boundary; a row change carries the *end* position of its row event
(the event header's `log_pos`, i.e. where the next event starts) plus its row index inside the
event, so every change is strictly after the offset of the transaction boundary before it and at
or before the boundary after it.

**Lineages.** Binlog coordinates mean something on one server's binlog only. When the source is
replaced (a replica promoted after a failover, `RESET MASTER`), the stream finds its position
on the new server by GTID (`lineage`) and from then on reads that server's binlog: its offsets
belong to the next *lineage* of the lake, and sort after every offset of the lineages before.
An offset of lineage n > 0 names its file `mysql-bin.000003@n`: the lineage travels inside the
file name through every place an offset is stored (ledger, schema history, changelog, Spark's
checkpoint), so no stored offset changes meaning. `binlog_file` is the name on the server.

An offset may also carry the source's GTID position there (MariaDB's `gtid_binlog_pos` form,
`domain-server-sequence` per domain, or a MySQL GTID set, `uuid:1-5,…`: `binlake.mysql.gtids`):
what a position means on any server holding that history. It does not take part in comparisons.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering
from typing import Any

_SUFFIX = re.compile(r"\.(\d+)$")
#: Separates a binlog file's name from the lineage it belongs to: `mysql-bin.000003@2`.
LINEAGE_MARK = "@"


def file_sequence(file: str) -> int:
    """The numeric suffix of a binlog file name: `mysql-bin.000042` → 42 (`…@n` ignored)."""
    match = _SUFFIX.search(file.partition(LINEAGE_MARK)[0])
    if match is None:
        raise ValueError(f"binlog file name {file!r} has no numeric suffix")
    return int(match.group(1))


def file_lineage(file: str) -> int:
    """The lineage a stored file name belongs to: `mysql-bin.000003@2` → 2, no mark → 0."""
    _, mark, lineage = file.partition(LINEAGE_MARK)
    if not mark:
        return 0
    if not lineage.isdigit():
        raise ValueError(f"binlog file name {file!r} has no lineage number after {LINEAGE_MARK!r}")
    return int(lineage)


def on_lineage(file: str, lineage: int) -> str:
    """`file` (a server's binlog file name) as lineage `lineage` stores it."""
    name = file.partition(LINEAGE_MARK)[0]
    return f"{name}{LINEAGE_MARK}{lineage}" if lineage else name


@dataclass(frozen=True, slots=True)
class BinlogOffset:
    """A position in the source's binlog; the same value serves the ledger and the stream.

    Offsets are compared once per change in the stream's filter, so the order key is computed
    once, at construction: re-parsing the file name per comparison was a large share of the
    stream's time (docs/performance.md#measured-constants).
    """

    file: str  # as the lake stores it: the server's name, `@n` on lineage n > 0
    pos: int
    gtid: str = field(default="", compare=False)  # the GTID position here, where known
    sort_key: tuple[int, int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.pos < 0:
            raise ValueError(f"binlog position must be >= 0, got {self.pos}")
        key = (file_lineage(self.file), file_sequence(self.file), self.pos)
        object.__setattr__(self, "sort_key", key)

    @property
    def binlog_file(self) -> str:
        """The file's name on the server (without the lineage mark)."""
        return self.file.partition(LINEAGE_MARK)[0]

    @property
    def lineage(self) -> int:
        return self.sort_key[0]

    def on(self, lineage: int) -> BinlogOffset:
        """This position of the server's binlog, as lineage `lineage` stores it."""
        return BinlogOffset(on_lineage(self.file, lineage), self.pos, self.gtid)

    def with_gtid(self, gtid: str) -> BinlogOffset:
        return BinlogOffset(self.file, self.pos, gtid)

    def __lt__(self, other: BinlogOffset) -> bool:
        return self.sort_key < other.sort_key

    def __le__(self, other: BinlogOffset) -> bool:
        return self.sort_key <= other.sort_key

    def __gt__(self, other: BinlogOffset) -> bool:
        return self.sort_key > other.sort_key

    def __ge__(self, other: BinlogOffset) -> bool:
        return self.sort_key >= other.sort_key

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"file": self.file, "pos": self.pos}
        if self.gtid:
            data["gtid"] = self.gtid
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BinlogOffset:
        return cls(str(data["file"]), int(data["pos"]), str(data.get("gtid") or ""))

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"


class RowNumbers:
    """The row index of each change at an offset several rows events share: the events inside
    one transaction payload (`binlog_transaction_compression`) all end where the payload ends,
    so their rows are numbered on from the last one there, and each change keeps a position of
    its own."""

    def __init__(self) -> None:
        self._at: tuple[BinlogOffset | None, int] = (None, 0)

    def first(self, offset: BinlogOffset, rows: int) -> int:
        """The index of the first of `rows` rows at `offset` (0 at an offset new to it)."""
        last, used = self._at
        first = used if last == offset else 0
        self._at = (offset, first + rows)
        return first


@total_ordering
@dataclass(frozen=True, slots=True)
class ChangePosition:
    """Where one row change sits: its event's end offset and its index among the event's rows."""

    offset: BinlogOffset
    row: int = 0

    @property
    def sort_key(self) -> tuple[int, int, int, int]:
        return (*self.offset.sort_key, self.row)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ChangePosition):
            return NotImplemented
        return self.sort_key < other.sort_key

    def is_after(self, boundary: BinlogOffset) -> bool:
        """True if this change was committed after the transaction boundary `boundary`."""
        return self.offset > boundary

    def token(self) -> str:
        """A fixed-width string whose lexicographic order is the change order (for Delta)."""
        return position_token(self.offset, self.row)


#: The largest row index a token holds (its field is 8 digits): a token range's upper end.
MAX_ROW = 99_999_999


def position_token(offset: BinlogOffset, row: int) -> str:
    """`_binlake_offset` values: comparable as strings in Delta MERGE conditions. Lineage 0's
    tokens are digits; a later lineage's begin with `L` and its number, so they sort after."""
    lineage, sequence, pos = offset.sort_key
    return f"{lineage_prefix(lineage)}{sequence:010d}:{pos:020d}:{row:08d}"


def lineage_prefix(lineage: int) -> str:
    return f"L{lineage:04d}:" if lineage else ""


def bytes_behind(offset: BinlogOffset, head: BinlogOffset, sizes: dict[str, int]) -> int:
    """Binlog bytes from `offset` to `head`, across file rotations (`sizes`: SHOW BINARY LOGS).
    From an earlier lineage, every byte of the server's binlog is ahead."""
    if head <= offset:
        return 0
    if offset.lineage != head.lineage:
        return sum(sizes.values())
    if offset.file == head.file:
        return head.pos - offset.pos
    first, last = offset.sort_key[1], head.sort_key[1]
    between = [size for name, size in sizes.items() if first < file_sequence(name) < last]
    return max(sizes.get(offset.binlog_file, offset.pos) - offset.pos, 0) + sum(between) + head.pos
