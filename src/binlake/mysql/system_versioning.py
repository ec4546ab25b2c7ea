"""System-versioned tables (MariaDB `WITH SYSTEM VERSIONING`): their row images read as changes
of the current rows, which are all silver holds (what `SELECT *` returns, and what the snapshot
reads).

Such a table keeps every version of each row; a version is current while its period is open,
its row end at the greatest value of its type. The binlog logs versions, not statements' effects
on current rows (measured on MariaDB 10.11 with binlog_row_metadata=FULL):

- INSERT writes the current row;
- UPDATE updates the current row (a new row start) and writes the old version as a history row,
  its row end the statement's time;
- DELETE updates the current row, ending its period: no delete event;
- `DELETE HISTORY` (and history partitions' rotation) deletes history rows;
- the implicit period columns `row_start` and `row_end` (INVISIBLE, which information_schema
  does not list) come last in every image, named in the TABLE_MAP.

So each change is judged by whether its images are current rows: current before and after is an
update, current before only a delete, current after only an insert, and neither (history) is
nothing silver holds. The implicit period columns are decoded to judge, then dropped: silver
holds the columns information_schema lists, as the snapshot reads them. Explicit period columns
are listed there and land like any column; the row end, which the server adds to every unique
key, never joins binlake's row key (`discovery`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from binlake.model.schema import Column, TableSchema

Row = tuple[Any, ...]

#: The period columns of `WITH SYSTEM VERSIONING` without a PERIOD FOR SYSTEM_TIME clause.
IMPLICIT_PERIOD = ("row_start", "row_end")
#: A current row's row end: TIMESTAMP(6)'s maximum (2038 before MariaDB 11.5, 2106 after). A
#: transaction-precise table (BIGINT UNSIGNED periods) is never read: MariaDB logs its changes as
#: statements (`discovery` refuses it).
_OPEN_ENDS = frozenset(
    datetime.fromtimestamp(s, UTC).replace(microsecond=999_999) for s in (2**31 - 1, 2**32 - 1)
)


def is_current(row_end: Any) -> bool:
    """Whether a version whose period ends at `row_end` (as the row images decode it) is a
    current row."""
    return row_end in _OPEN_ENDS


def hidden_period_columns(table: TableSchema) -> dict[str, Column]:
    """The implicit period columns of a system-versioned table, by name, as a row image carries
    them (none when the table is not versioned or names its period columns)."""
    if table.system_period is None or table.system_period[1] in table.column_names:
        return {}
    return {
        name: Column(name, "timestamp", "timestamp(6)", False, datetime_precision=6)
        for name in table.system_period
    }


@dataclass(frozen=True)
class Versions:
    """How one image layout of a system-versioned table reads as current rows."""

    end: int  # the row end's index in a decoded image
    kept: tuple[int, ...] | None  # the indexes silver holds (None: every one)

    def current(self, before: Row | None, after: Row | None) -> tuple[Row | None, Row | None]:
        """A row change's (before, after) images as a change of current rows: an image that is
        not current is none (so both none: nothing silver holds), the others without the
        hidden period columns."""
        return self._current(before), self._current(after)

    def _current(self, image: Row | None) -> Row | None:
        if image is None or not is_current(image[self.end]):
            return None
        return image if self.kept is None else tuple(image[i] for i in self.kept)


def versions_of(
    decoded: TableSchema, hidden: dict[str, Column]
) -> tuple[TableSchema, Versions | None]:
    """The schema of a layout's rows as silver holds them, and how the layout's images read as
    current rows (None for a table not system-versioned, or a layout without its row end: one
    written before versioning was added)."""
    period = decoded.system_period
    if period is None or period[1] not in decoded.column_names:
        return decoded, None
    end = decoded.column_names.index(period[1])
    if not hidden:
        return decoded, Versions(end, None)
    kept = tuple(i for i, c in enumerate(decoded.columns) if c.name not in hidden)
    columns = tuple(decoded.columns[i] for i in kept)
    return replace(decoded, columns=columns), Versions(end, kept)
