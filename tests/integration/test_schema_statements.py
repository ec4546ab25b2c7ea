"""Issue 23: DDL statements the stream used to follow wrongly, each met while writes race, in
the modes that follow them. Each step is followed by a catch-up and a comparison with the source
(chispa) and the changelog's each-change-once check."""

from __future__ import annotations

from typing import Any

import pytest

from binlake import jobs

from .items import assert_changelog_holds_each_change_once, assert_silver_is_source, seed_items

pytestmark = pytest.mark.integration

STEPS = {
    # A rename and a widening in one clause: the changelog's images lacked the new field.
    "change_renames_and_widens": [
        "ALTER TABLE items CHANGE qty quantity BIGINT NOT NULL",
        "UPDATE items SET quantity = 6000000000 WHERE id % 3 = 0",
    ],
    # A column added, then redefined before the changelog held it.
    "add_then_modify": [
        "ALTER TABLE items ADD COLUMN extra INT NULL",
        "ALTER TABLE items MODIFY extra BIGINT NULL",
        "UPDATE items SET extra = 7000000000 WHERE id % 4 = 0",
    ],
    # MySQL compares column names case-insensitively; so does Spark.
    "case_only_rename": [
        "ALTER TABLE items CHANGE quantity Quantity BIGINT NOT NULL",
        "UPDATE items SET Quantity = Quantity + 1 WHERE id % 5 = 0",
    ],
    # A column dropped, then added again with another type.
    "drop_then_add_another_type": [
        "ALTER TABLE items DROP COLUMN note",
        "UPDATE items SET name = 'no note' WHERE id % 6 = 0",
        "ALTER TABLE items ADD COLUMN note DECIMAL(8,3) NULL DEFAULT 1.5",
        "UPDATE items SET note = 2.25 WHERE id % 7 = 0",
    ],
}


@pytest.mark.parametrize("mode", ["lenient", "evolve"])
def test_statements_that_used_to_wedge_or_coerce_land_as_the_source_has_them(
    spark: Any, sql: Any, make_config: Any, racer: Any, mode: str
) -> None:
    seed_items(sql, 400)
    config = make_config(stream={"schema_changes": mode})
    jobs.snapshot(spark, config)
    jobs.stream(spark, config, available_now=True)
    for name, statements in STEPS.items():
        with racer():
            for statement in statements:
                sql(statement)
        jobs.stream(spark, config, available_now=True)
        try:
            assert_silver_is_source(spark, sql, config, "items")
        except AssertionError as exc:
            raise AssertionError(f"after {name}: {exc}") from None
    assert_changelog_holds_each_change_once(spark, config, "items")
