"""Where a table's changes in a batch are spread over tasks before they are typed
(`silver.Spread`): only where one of the batch's reads holds more than `CHANGES_PER_TASK`."""

from __future__ import annotations

import pytest

from binlake.silver import CHANGES_PER_TASK, Spread

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
    ],
)
def test_changes_are_spread_only_where_one_read_holds_too_many(
    changes: int, most_in_a_read: int, tasks: int | None
) -> None:
    assert Spread(changes, most_in_a_read).tasks == tasks
