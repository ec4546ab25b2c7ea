"""Binlog offsets: the total order every step of the algorithm reasons in.

A binlog offset is `(file, pos)`. Files compare by their numeric suffix (`mysql-bin.000010`
follows `mysql-bin.000009` whatever the width), then positions. `SHOW MASTER STATUS` yields an
offset on a transaction boundary; a row change carries the *end* position of its row event
(the event header's `log_pos`, i.e. where the next event starts) plus its row index inside the
event, so every change is strictly after the offset of the transaction boundary before it and at
or before the boundary after it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import total_ordering
from typing import Any

_SUFFIX = re.compile(r"\.(\d+)$")


def file_sequence(file: str) -> int:
    """The numeric suffix of a binlog file name: `mysql-bin.000042` → 42."""
    match = _SUFFIX.search(file)
    if match is None:
        raise ValueError(f"binlog file name {file!r} has no numeric suffix")
    return int(match.group(1))


@dataclass(frozen=True, slots=True)
class BinlogOffset:
    """A position in the source's binlog; the same value serves the ledger and the stream.

    Offsets are compared once per change in the stream's filter, so the order key is computed
    once, at construction (profiled: re-parsing the file name cost ~30 % of stream time).
    """

    file: str
    pos: int
    sort_key: tuple[int, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.pos < 0:
            raise ValueError(f"binlog position must be >= 0, got {self.pos}")
        object.__setattr__(self, "sort_key", (file_sequence(self.file), self.pos))

    def __lt__(self, other: BinlogOffset) -> bool:
        return self.sort_key < other.sort_key

    def __le__(self, other: BinlogOffset) -> bool:
        return self.sort_key <= other.sort_key

    def __gt__(self, other: BinlogOffset) -> bool:
        return self.sort_key > other.sort_key

    def __ge__(self, other: BinlogOffset) -> bool:
        return self.sort_key >= other.sort_key

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "pos": self.pos}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> BinlogOffset:
        return cls(str(data["file"]), int(data["pos"]))

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}"


@total_ordering
@dataclass(frozen=True, slots=True)
class ChangePosition:
    """Where one row change sits: its event's end offset and its index among the event's rows."""

    offset: BinlogOffset
    row: int = 0

    @property
    def sort_key(self) -> tuple[int, int, int]:
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


def position_token(offset: BinlogOffset, row: int) -> str:
    """`_binlake_offset` values: comparable as strings in Delta MERGE conditions."""
    return f"{offset.sort_key[0]:010d}:{offset.pos:020d}:{row:08d}"


def bytes_behind(offset: BinlogOffset, head: BinlogOffset, sizes: dict[str, int]) -> int:
    """Binlog bytes from `offset` to `head`, across file rotations (`sizes`: SHOW BINARY LOGS)."""
    if head <= offset:
        return 0
    if offset.file == head.file:
        return head.pos - offset.pos
    between = [
        size
        for name, size in sizes.items()
        if offset.sort_key[0] < file_sequence(name) < head.sort_key[0]
    ]
    return max(sizes.get(offset.file, offset.pos) - offset.pos, 0) + sum(between) + head.pos
