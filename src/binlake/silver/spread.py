"""How a table's row changes in a batch are spread over Spark tasks before `TableApply` types
them: as the batch's reads hold them, or shuffled over more tasks when one read holds too many.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: A batch arrives in the partitions of its reads (`stream.read_tasks`), one for a small batch,
#: and a read's changes are typed, collapsed and appended to the changelog by one task. Where
#: one read holds more of a table's changes than this, and at least twice what a task would
#: hold after it, the table's changes are spread over tasks of at most this many first; else
#: the reads spread them already, and a shuffle of the images would only add to the batch
#: (`Spread`).
CHANGES_PER_TASK = 50_000


@dataclass(frozen=True)
class Spread:
    """A table's row changes in a batch and the most of them one of the batch's partitions
    holds."""

    changes: int
    most_in_a_read: int

    @property
    def tasks(self) -> int | None:
        """The tasks the table's changes are spread over before they are typed (None: as the
        batch's partitions hold them). A shuffle that would not halve the largest read's share
        costs more than it spreads: a burst in a few reads of about `CHANGES_PER_TASK` each
        would be shuffled into as many tasks of as many changes, moving every image for nothing
        (`bench/results/merge-source-2026-12-05-spread.md`)."""
        tasks = math.ceil(self.changes / CHANGES_PER_TASK)
        most = self.most_in_a_read
        if most <= CHANGES_PER_TASK or most * tasks < 2 * self.changes:
            return None
        return tasks
