"""Issue 23: a batch replayed after a crash meets its DDL again. The stream crashes inside a
batch holding DDL segments (between an ALTER and its backfill, inside a multi-step DDL, after
the whole batch but before its checkpoint commit); the rerun must converge to silver equal to
the source and a changelog with each change once, as an uncrashed run does. The crash is
raised in-process (`crash.crashed_at`): what is under test is the rerun's handling of DDL
half applied, which a raise leaves as a kill does (test_faults kills the process itself)."""

from __future__ import annotations

from typing import Any

import pytest

from binlake.jobs import commands

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .crash import crashed_at
from .items import ITEMS, seed_items

pytestmark = pytest.mark.integration

#: Where the stream crashes while applying the batch below: (function, when, which call).
POINTS = {
    # ALTER … ADD COLUMN done, its default not yet set: the rerun left NULLs for good on main.
    "between_add_and_backfill": ("binlake.silver.schema_follow:literal_default", "before", 1),
    # Every segment applied, checkpoint not committed: the rerun re-applied the DDL after later
    # rows (a lenient rename's copy overwrote them; an evolve drop failed on every restart).
    "before_checkpoint_commit": ("binlake.stream.sink:BatchSink.__call__", "after", 1),
    # Inside one DDL of two column changes, after the first.
    "inside_a_ddl": ("binlake.silver.schema_follow:_apply_column_change", "after", 3),
}

BATCH = [
    "UPDATE items SET qty = qty + 1 WHERE id % 2 = 0",
    "ALTER TABLE items ADD COLUMN extra VARCHAR(20) NOT NULL DEFAULT 'dflt'",
    "UPDATE items SET extra = 'set' WHERE id % 3 = 0",
    "ALTER TABLE items RENAME COLUMN note TO remark",
    "UPDATE items SET remark = 'renamed' WHERE id % 4 = 0",
    "ALTER TABLE items DROP COLUMN price, MODIFY qty BIGINT NOT NULL",
    "UPDATE items SET qty = 5000000000, remark = 'last' WHERE id % 5 = 0",
]


@pytest.mark.parametrize(
    ("mode", "point"),
    [
        ("lenient", "between_add_and_backfill"),
        # The replay of a whole batch of DDL: test_faults' kill before the checkpoint commit.
        pytest.param("lenient", "before_checkpoint_commit", marks=pytest.mark.soak),
        ("evolve", "inside_a_ddl"),  # on replay the drop is done already: failed on every rerun
    ],
)
def test_a_batch_with_ddl_killed_and_replayed_converges(
    spark: Any, sql: Any, make_config: Any, racer: Any, mode: str, point: str
) -> None:
    seed_items(sql, 600)
    config = make_config(stream={"schema_changes": mode})
    with racer():
        commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    with racer():
        for statement in BATCH:
            sql(statement)
    with crashed_at(*POINTS[point]):
        commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)
    columns = assert_silver_is_source(spark, sql, config, "items")
    assert ("price" in columns) is (mode == "lenient")
    assert_changelog_holds_each_change_once(spark, config, "items")


#: Statements that empty `items` without row events, each followed by rows of the new table.
EMPTYING = {
    "truncate": ["TRUNCATE TABLE items"],
    "drop_and_create": ["DROP TABLE items", ITEMS],
    "create_or_replace": [ITEMS.replace("CREATE TABLE", "CREATE OR REPLACE TABLE")],
}


@pytest.mark.parametrize(
    "emptying",
    [
        "truncate",
        # The same replay of an emptied table, reached by other statements.
        pytest.param("drop_and_create", marks=pytest.mark.soak),
        pytest.param("create_or_replace", marks=pytest.mark.soak),
    ],
)
def test_rows_before_an_emptying_ddl_stay_gone_when_their_batch_is_replayed(
    spark: Any, sql: Any, make_config: Any, racer: Any, emptying: str
) -> None:
    """Issue 68.1: a batch holds rows of `items`, then a statement that empties it, then rows of
    the new table; the stream dies after applying it all, before the checkpoint commits. The
    replay must not merge the rows before the emptying statement into the emptied silver again
    (on main it did: they were not matched, so inserted, and the DDL then skipped as applied)."""
    seed_items(sql, 300)
    config = make_config()
    with racer():
        commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    with racer():
        sql("UPDATE items SET qty = qty + 1 WHERE id % 2 = 0")
        sql("DELETE FROM items WHERE id % 7 = 0")
    for statement in EMPTYING[emptying]:
        sql(statement)
    sql("INSERT INTO items VALUES (5001, 'after', 1, 1.25, NULL), (5002, 'after', 2, 2.25, 'n')")
    sql("UPDATE items SET qty = 9 WHERE id = 5001")
    with crashed_at(*POINTS["before_checkpoint_commit"]):
        commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")
