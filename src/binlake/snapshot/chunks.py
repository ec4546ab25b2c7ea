"""Chunks: half-open ranges of a table's split key, and the planner that cuts a table into them.

Flink CDC's `ChunkSplitter`/`ChunkRange` in Python. A chunk is `[start, end)`; `None` stands for
an unbounded side, so the first chunk is `(-inf, end)` and the last `[start, +inf)` and a row
inserted outside the min/max seen at planning time still belongs to exactly one chunk.

Splitting is pure: the even split is arithmetic, the uneven split is driven by two callbacks that
ask the database for the next boundary, so tests run it against an in-memory key list.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any

Key = Any  # a split-key value as the driver returns it: int, Decimal, str, date, datetime, bytes
SortKey = Callable[[Key], Any]  # maps a key to a value ordered the way MySQL orders the column


@dataclass(frozen=True, slots=True)
class ChunkRange:
    """`[start, end)` over the split key; `None` is unbounded. Never empty by construction."""

    start: Key = None
    end: Key = None

    def __post_init__(self) -> None:
        if self.start is not None and self.end is not None and self.start == self.end:
            raise ValueError(f"a chunk range cannot be empty: start == end == {self.start!r}")

    @classmethod
    def all(cls) -> ChunkRange:
        return cls(None, None)

    def contains(self, key: Key, sort_key: SortKey | None = None) -> bool:
        """Membership with MySQL's comparison (pass `sort_key` for collated strings)."""
        if key is None:
            return False
        order = sort_key or _identity
        value = order(key)
        if self.start is not None and value < order(self.start):
            return False
        return self.end is None or value < order(self.end)


def _identity(value: Key) -> Key:
    return value


def plan_even(minimum: int, maximum: int, chunk_size: int, factor: float) -> list[ChunkRange]:
    """Even split of an integral key: steps of `chunk_size × factor` from `minimum`.

    Flink CDC's `splitEvenlySizedChunks`: the first range is open below and the last open above.
    """
    step = max(math.floor(chunk_size * factor), 1) if factor > 0 else chunk_size
    if minimum >= maximum:
        return [ChunkRange.all()]
    ranges: list[ChunkRange] = []
    start: int | None = None
    end = minimum + step
    while end <= maximum:
        ranges.append(ChunkRange(start, end))
        start, end = end, end + step
    ranges.append(ChunkRange(start, None))
    return ranges


def plan_uneven(
    minimum: Key,
    next_chunk_max: Callable[[Key], Key],
    next_key_above: Callable[[Key], Key],
    sort_key: SortKey | None = None,
) -> list[ChunkRange]:
    """Uneven split: each chunk ends at the largest of the next `chunk_size` keys from its start
    (`next_chunk_max`), moved to the next distinct key above (`next_key_above`) when that would
    make the chunk zero-width; `None` from either callback means no more keys.

    Keys are compared with `sort_key`, so under a `_ci` collation `'a'` and `'A'` are one key.
    """
    if minimum is None:
        return [ChunkRange.all()]
    ranges: list[ChunkRange] = []
    start: Key = None
    cursor = minimum
    while True:
        end = chunk_end(cursor, next_chunk_max, next_key_above, sort_key)
        if end is None:
            ranges.append(ChunkRange(start, None))
            return ranges
        ranges.append(ChunkRange(start, end))
        start = cursor = end


def chunk_end(
    start: Key,
    next_end: Callable[[Key], Key],
    next_key_above: Callable[[Key], Key],
    sort_key: SortKey | None = None,
) -> Key:
    """Where the chunk of about `chunk_size` keys from `start` ends (exclusive): `next_end`'s
    key (the uneven split's `next_chunk_max`, or a read's `key_after_chunk`), moved to the next
    distinct key above when it is `start`'s own (a chunk is never empty); `None`: the chunk
    stays open above. `start` `None` is the smallest key.

    One step of the uneven split, and how a chunk read cuts an open-ended chunk short: every
    key still lands in exactly one chunk, the one whose `[start, end)` holds it.
    """
    order = sort_key or _identity
    end = next_end(start)
    if end is not None and start is not None and order(end) == order(start):
        end = next_key_above(end)
    return end


def distribution_factor(minimum: int, maximum: int, rows: int) -> float:
    """(max - min + 1) / rows: how densely the key space is used; 1.0 is gap-free."""
    return (maximum - minimum + 1) / rows if rows else math.inf


def chunk_of(ranges: Sequence[ChunkRange], key: Key, sort_key: SortKey | None = None) -> int | None:
    """Index of the range that holds `key` (ranges sorted and contiguous), by binary search."""
    order = sort_key or _identity
    if key is None or not ranges:
        return None
    value = order(key)
    low, high = 0, len(ranges) - 1
    while low < high:
        mid = (low + high) // 2
        end = ranges[mid].end
        if end is not None and value >= order(end):
            low = mid + 1
        else:
            high = mid
    return low if ranges[low].contains(key, sort_key) else None


# Split-key values cross into the ledger as JSON. Plain JSON keeps ints and strings as they are;
# other types carry a tag so they come back as the same Python type.


def encode_key(key: Key) -> str | None:
    if key is None:
        return None
    if isinstance(key, bool):
        raise TypeError("boolean split keys are not supported")
    if isinstance(key, int | str):
        return json.dumps(key)
    if isinstance(key, Decimal):
        return json.dumps({"decimal": str(key)})
    if isinstance(key, datetime):
        return json.dumps({"datetime": key.isoformat()})
    if isinstance(key, date):
        return json.dumps({"date": key.isoformat()})
    if isinstance(key, bytes):
        return json.dumps({"bytes": key.hex()})
    raise TypeError(f"unsupported split key type {type(key).__name__}")


def decode_key(text: str | None) -> Key:
    if text is None:
        return None
    value = json.loads(text)
    if not isinstance(value, dict):
        return value
    ((tag, raw),) = value.items()
    decoders: dict[str, Callable[[str], Key]] = {
        "decimal": Decimal,
        "datetime": datetime.fromisoformat,
        "date": date.fromisoformat,
        "bytes": bytes.fromhex,
    }
    return decoders[tag](raw)
