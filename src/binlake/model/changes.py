"""Row changes read from the binlog, and the pure operations on them.

A `RowChange` is one row of one binlog row event, its images already normalised to the values
that land in Delta. An update that changes the row key is, for every purpose downstream, a
delete of the old key and an insert of the new one (each judged by its own chunk), so
`split_key_change` turns it into that pair before anything else looks at it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from binlake.model.offsets import ChangePosition

if TYPE_CHECKING:
    from binlake.model.schema import TableSchema

Row = tuple[Any, ...]
RowKey = tuple[Any, ...]
KeyOf = Callable[[Row], RowKey]


class Op(enum.Enum):
    INSERT = "insert"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True, slots=True)
class RowChange:
    table: str  # "db.table"
    op: Op
    position: ChangePosition
    before: Row | None
    after: Row | None
    timestamp: int = 0  # the event's commit time, epoch seconds
    #: The schema the images were decoded with (the one in force at the change's position).
    schema: TableSchema | None = None

    @property
    def image(self) -> Row:
        """The row image that identifies the changed row: the after image, or for a delete the
        before image."""
        image = self.before if self.op is Op.DELETE else self.after
        assert image is not None, f"{self.op.value} without its row image"
        return image


def split_key_change(change: RowChange, key_of: KeyOf) -> list[RowChange]:
    """An update that changes the key becomes delete(old key) + insert(new key)."""
    if change.op is not Op.UPDATE:
        return [change]
    assert change.before is not None and change.after is not None
    if key_of(change.before) == key_of(change.after):
        return [change]
    return [
        replace(change, op=Op.DELETE, after=None),
        replace(change, op=Op.INSERT, before=None),
    ]


def collapse(changes: Iterable[RowChange], key_of: KeyOf) -> list[RowChange]:
    """The last change of each key by binlog position (the input may be in any order).

    Key-changing updates must already be split, so that each change touches exactly one key.
    """
    last: dict[RowKey, RowChange] = {}
    for change in changes:
        key = key_of(change.image)
        kept = last.get(key)
        if kept is None or kept.position < change.position:
            last[key] = change
    return sorted(last.values(), key=lambda c: c.position)


def apply_changes(
    rows: dict[RowKey, Row],
    changes: Sequence[RowChange],
    key_of: KeyOf,
    keep: Callable[[Row], bool],
) -> dict[RowKey, Row]:
    """Replay `changes` (any order; applied by position) onto `rows` keyed by row key.

    Insert and update put the after image, delete removes the key; a change is applied only if
    `keep(image)` (for a chunk: the image's split key falls in the chunk), and an update whose
    row leaves the chunk (`keep(before)` but not `keep(after)`) removes it. This is the chunk
    normalisation of Flink CDC's SnapshotSplitReader: SELECT result + binlog (LW, HW] → the chunk
    exactly as of HW.
    """
    result = dict(rows)
    ordered = sorted(
        (part for change in changes for part in split_key_change(change, key_of)),
        key=lambda c: c.position,
    )
    for change in ordered:
        image = change.image
        if keep(image):
            if change.op is Op.DELETE:
                result.pop(key_of(image), None)
            else:
                result[key_of(image)] = image
        elif change.op is Op.UPDATE and change.before is not None and keep(change.before):
            # Same key, but a split column outside the key moved the row out of the chunk.
            result.pop(key_of(image), None)
    return result
