"""What a progress line counts, carried on its log record for a display that draws progress
(a terminal's bar) rather than printing each line. Plain log handlers ignore it: the line's
message says the same in words."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tally:
    """`done` of `total` units of `unit` (for example chunks) finished; `detail`: the rest of
    the line (rows, rates, time left, or what is being read)."""

    unit: str
    done: int
    total: int
    detail: str
