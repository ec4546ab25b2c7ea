"""The high-watermark filter: which binlog changes the stream must still apply.

Flink CDC's `shouldEmit` for the binlog split. Chunk `i` of table `t` already holds every change
up to its high watermark `HW_i`, so a change to key `k` is applied iff its position is after
`max(HW)` of `t` (the table's pure binlog phase), or after the `HW` of the chunk that holds `k`.
Tables captured without a snapshot have no entry and take every change after the start offset.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from binlake.model.offsets import BinlogOffset, ChangePosition
from binlake.snapshot.chunks import ChunkRange, Key, SortKey, chunk_of


@dataclass(frozen=True)
class TableWatermarks:
    """One table's finished chunks: sorted, contiguous ranges and each one's high watermark."""

    ranges: tuple[ChunkRange, ...]
    high_watermarks: tuple[BinlogOffset, ...]
    sort_key: SortKey | None = None

    def __post_init__(self) -> None:
        if len(self.ranges) != len(self.high_watermarks) or not self.ranges:
            raise ValueError("every chunk needs exactly one high watermark")

    @cached_property  # asked once per change: profiled at 8 % of the stream when recomputed
    def max_hw(self) -> BinlogOffset:
        return max(self.high_watermarks)

    @property
    def min_hw(self) -> BinlogOffset:
        return min(self.high_watermarks)

    def should_apply(self, split_value: Key, position: ChangePosition) -> bool:
        if position.is_after(self.max_hw):
            return True
        index = chunk_of(self.ranges, split_value, self.sort_key)
        if index is None:  # unreachable for a complete plan; never drop what we cannot place
            return True
        return position.is_after(self.high_watermarks[index])


@dataclass(frozen=True)
class WatermarkFilter:
    tables: dict[str, TableWatermarks]

    def should_apply(self, table: str, split_value: Key, position: ChangePosition) -> bool:
        marks = self.tables.get(table)
        return True if marks is None else marks.should_apply(split_value, position)

    def start_offset(self) -> BinlogOffset | None:
        """Where the stream must start: the smallest high watermark over all chunks."""
        return min((m.min_hw for m in self.tables.values()), default=None)
