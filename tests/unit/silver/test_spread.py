"""Where a table's changes in a batch are spread over tasks before they are typed
(`spread.Spread`): only where one of the batch's reads holds more than `CHANGES_PER_TASK`, and at
least twice what a task would hold after the shuffle."""

from __future__ import annotations

import pytest

from binlake.silver.spread import CHANGES_PER_TASK, Spread

LIMIT = CHANGES_PER_TASK


@pytest.mark.parametrize(
    ("changes", "most_in_a_read", "tasks"),
    [
        (10, 10, None),  # a small batch: one task types it
        (LIMIT, LIMIT, None),  # at the limit, not over it
        (LIMIT + 1, LIMIT + 1, 2),  # one read just over it: two tasks
        (4 * LIMIT, LIMIT, None),  # four reads of the limit each: spread already
        (4 * LIMIT, 2 * LIMIT, 4),  # half of it in one read: spread evenly over four
        (3 * LIMIT + 1, 3 * LIMIT + 1, 4),  # a catch-up read whole: the tasks round up
        (LIMIT + 1, 1, None),  # many reads of a few changes each
        # Four reads of about the limit each (a 200k burst cut by bytes): four tasks would
        # hold about what each read holds, so the reads type it as they are.
        (4 * LIMIT, LIMIT + LIMIT // 20, None),
        (4 * LIMIT + 1, LIMIT + 1, None),  # five tasks of 0.8x the limit: not worth a shuffle
        (4 * LIMIT, 2 * LIMIT - 1, None),  # just under twice a task's share after it
        (2 * LIMIT, 2 * LIMIT, 2),  # one read holding all of twice the limit: two tasks
    ],
)
def test_changes_are_spread_only_where_one_read_holds_too_many(
    changes: int, most_in_a_read: int, tasks: int | None
) -> None:
    assert Spread(changes, most_in_a_read).tasks == tasks
