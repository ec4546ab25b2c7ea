"""A system-versioned table's row images read as changes of its current rows, on the images
MariaDB 10.11 logs (the integration test runs them on a real binlog)."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from binlake.model.schema import Column, TableSchema
from binlake.mysql.system_versioning import (
    IMPLICIT_PERIOD,
    Versions,
    hidden_period_columns,
    is_current,
    versions_of,
)

OPEN = datetime(2038, 1, 19, 3, 14, 7, 999_999, tzinfo=UTC)  # TIMESTAMP(6)'s maximum
ENDED = datetime(2026, 12, 6, 8, 28, 22, 912_083, tzinfo=UTC)
STARTED = datetime(2026, 12, 6, 8, 28, 22, 911_347, tzinfo=UTC)
ID = Column("id", "int", "int(11)", False)
V = Column("v", "int", "int(11)", True)
RS = Column("rs", "timestamp", "timestamp(6)", False, datetime_precision=6)
RE = Column("re", "timestamp", "timestamp(6)", False, datetime_precision=6)


def implicit() -> TableSchema:
    """`CREATE TABLE t (id INT PRIMARY KEY, v INT) WITH SYSTEM VERSIONING`, as discovered."""
    return TableSchema("db", "t", (ID, V), ("id",), "id", IMPLICIT_PERIOD)


@pytest.mark.parametrize(
    ("row_end", "current"),
    [
        (OPEN, True),
        (datetime(2106, 2, 7, 6, 28, 15, 999_999, tzinfo=UTC), True),  # MariaDB 11.5+
        (OPEN.replace(microsecond=999_998), False),
        (ENDED, False),
        (Decimal(2**64 - 1), False),  # transaction-precise tables are refused, never read
        (OPEN.replace(tzinfo=None), False),  # never decoded so; not taken for the maximum
        (None, False),
    ],
)
def test_a_current_row_is_one_whose_period_has_not_ended(row_end: object, current: bool) -> None:
    assert is_current(row_end) is current


def test_implicit_period_columns_are_decoded_then_dropped() -> None:
    table = implicit()
    hidden = hidden_period_columns(table)
    assert list(hidden) == ["row_start", "row_end"]
    # ADD COLUMN after ADD SYSTEM VERSIONING: the period stays last, but names decide.
    decoded = TableSchema("db", "t", (ID, V, *hidden.values()), ("id",), "id", IMPLICIT_PERIOD)
    schema, versions = versions_of(decoded, hidden)
    assert schema == table and versions == Versions(3, (0, 1))
    assert versions.current((1, 10, STARTED, OPEN), (1, 11, ENDED, OPEN)) == ((1, 10), (1, 11))


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        # UPDATE: the current row updated (kept), then the old version written as history.
        ((1, 10, STARTED, OPEN), (1, 11, ENDED, OPEN), ((1, 10), (1, 11))),
        (None, (1, 10, STARTED, ENDED), (None, None)),
        # DELETE: an update ending the current row's period.
        ((2, 20, STARTED, OPEN), (2, 20, STARTED, ENDED), ((2, 20), None)),
        # INSERT, and a delete of a current row (none logged today; kept for what it says).
        (None, (3, 30, ENDED, OPEN), (None, (3, 30))),
        ((3, 30, ENDED, OPEN), None, ((3, 30), None)),
        # DELETE HISTORY: deletes of history rows, never of current ones.
        ((1, 10, STARTED, ENDED), None, (None, None)),
        # An update of a history row alone (system_versioning_insert_history sessions).
        ((1, 10, STARTED, ENDED), (1, 12, STARTED, ENDED), (None, None)),
    ],
)
def test_each_change_becomes_a_change_of_current_rows(
    before: tuple[object, ...] | None,
    after: tuple[object, ...] | None,
    expected: tuple[object, object],
) -> None:
    hidden = hidden_period_columns(implicit())
    decoded = TableSchema("db", "t", (ID, V, *hidden.values()), ("id",), "id", IMPLICIT_PERIOD)
    _, versions = versions_of(decoded, hidden)
    assert versions is not None
    assert versions.current(before, after) == expected


def test_explicit_period_columns_land_and_still_tell_history_apart() -> None:
    table = TableSchema("db", "e", (ID, RS, V, RE), ("id",), "id", ("rs", "re"))
    assert hidden_period_columns(table) == {}
    schema, versions = versions_of(table, {})
    assert schema == table and versions == Versions(3, None)
    assert versions.current(None, (1, ENDED, 2, OPEN)) == (None, (1, ENDED, 2, OPEN))
    assert versions.current((1, STARTED, 1, OPEN), (1, STARTED, 1, ENDED)) == (
        (1, STARTED, 1, OPEN),
        None,
    )


def test_tables_and_layouts_without_a_period_read_as_they_are() -> None:
    plain = TableSchema("db", "u", (ID, V), ("id",), "id")
    assert hidden_period_columns(plain) == {}
    assert versions_of(plain, {}) == (plain, None)
    # Rows written before ADD SYSTEM VERSIONING, decoded with the schema after it.
    assert versions_of(implicit(), hidden_period_columns(implicit())) == (implicit(), None)


def test_the_period_survives_the_schema_history_and_older_entries_read_without_one() -> None:
    table = implicit()
    assert TableSchema.from_json(table.to_json()) == table
    older = {k: v for k, v in table.to_json().items() if k != "system_period"}
    assert TableSchema.from_json(older).system_period is None
