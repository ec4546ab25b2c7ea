"""`batch_ranges.even_splits`: where a batch's read is cut into reads of about equal bytes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from binlake.model.offsets import BinlogOffset
from binlake.mysql.batch_ranges import even_splits


def _starts(*done: int) -> list[tuple[BinlogOffset, int]]:
    """Transaction starts at `done` bytes past the range's start (one file, range at 1000)."""
    return [(BinlogOffset("mysql-bin.000001", 1000 + d), d) for d in done]


def _cut_at(cuts: list[BinlogOffset]) -> list[int]:
    return [c.pos - 1000 for c in cuts]


@pytest.mark.parametrize(
    ("done", "total", "parts", "expected"),
    [
        # Transactions of 10 bytes: each cut at the first start past an even share of the rest
        # (25 of 100, 23.3 of 70, 20 of 40): reads of 30, 30, 20, 20 bytes.
        (range(10, 100, 10), 100, 4, [30, 60, 80]),
        ((50,), 100, 2, [50]),
        ((49,), 100, 2, []),  # the only start leaves less than half: one read of the whole
        # One large transaction first: the 40 bytes after it shared out again.
        ((60, 70, 80, 90), 100, 4, [60, 80, 90]),
        ((10, 20), 100, 4, []),  # transactions too small a share each to start a read
        ((), 100, 4, []),
        ((25, 50, 75), 100, 1, []),
        ((100, 150), 100, 2, []),  # at or past the range's end: not a cut
        ((0, 50), 100, 2, [50]),  # at the range's start: not a cut
    ],
)
def test_cuts_share_what_the_cut_before_left_evenly(
    done: tuple[int, ...], total: int, parts: int, expected: list[int]
) -> None:
    cuts = even_splits(_starts(*done), total, parts)
    assert _cut_at(cuts) == expected
    assert len(cuts) <= parts - 1
    assert cuts == sorted(cuts)


def test_the_scan_stops_at_the_last_cut() -> None:
    """The starts come from a binlog read: it ends once every cut is found."""
    read: list[int] = []

    def starts() -> Iterator[tuple[BinlogOffset, int]]:
        for done in range(10, 1000, 10):
            read.append(done)
            yield BinlogOffset("mysql-bin.000001", 1000 + done), done

    assert _cut_at(even_splits(starts(), 1000, 2)) == [500]
    assert max(read) <= 510
