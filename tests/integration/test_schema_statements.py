"""Issue 23: DDL statements the stream used to follow wrongly, each met while writes race, in
the modes that follow them. Each step is followed by a catch-up and a comparison with the source
(chispa) and the changelog's each-change-once check."""

from __future__ import annotations

from typing import Any

import pytest
from delta.tables import DeltaTable

from binlake.errors import SchemaChangeError
from binlake.jobs import commands

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .items import seed_items

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


@pytest.mark.parametrize(
    "mode",
    # lenient's handling of schema changes: test_ddl_met_late and test_ddl_replays (lenient).
    [pytest.param("lenient", marks=pytest.mark.soak), "evolve"],
)
def test_statements_that_used_to_wedge_or_coerce_land_as_the_source_has_them(
    spark: Any, sql: Any, make_config: Any, racer: Any, mode: str
) -> None:
    seed_items(sql, 400)
    config = make_config(stream={"schema_changes": mode})
    commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    for name, statements in STEPS.items():
        with racer():
            for statement in statements:
                sql(statement)
        commands.stream(spark, config, available_now=True)
        try:
            assert_silver_is_source(spark, sql, config, "items")
        except Exception as exc:  # chispa's error is not an AssertionError
            raise AssertionError(f"silver differs from the source after {name}") from exc
    assert_changelog_holds_each_change_once(spark, config, "items")


def test_create_or_replace_empties_and_refills_silver_with_the_deletes_in_its_feed(
    spark: Any, sql: Any, make_config: Any, racer: Any
) -> None:
    """On main CREATE OR REPLACE was read as an ALTER: silver kept every old row."""
    seed_items(sql, 300)
    config = make_config()
    commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    silver_path = config.lake.path("silver", config.source.database, "items")
    with racer():
        sql(
            "CREATE OR REPLACE TABLE items (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, "
            "qty INT NOT NULL, price VARCHAR(12) NULL, note VARCHAR(10) NULL)"
        )
        sql("INSERT INTO items SELECT seq, 'new', seq, 'p', NULL FROM seq_1_to_50")
        sql("CREATE TABLE IF NOT EXISTS items (id INT PRIMARY KEY)")  # the server does nothing
        sql("UPDATE items SET qty = qty + 1 WHERE id % 3 = 0")
    commands.stream(spark, config, available_now=True)
    assert "price__dropped_1" in assert_silver_is_source(spark, sql, config, "items")
    history = DeltaTable.forPath(spark, silver_path).history()
    [emptied] = [r["version"] for r in history.where("operation = 'DELETE'").collect()]
    feed = (
        spark.read.format("delta").option("readChangeFeed", "true")
        .option("startingVersion", emptied).option("endingVersion", emptied).load(silver_path)
    )  # fmt: skip
    assert feed.where("_change_type = 'delete' AND name LIKE 'item%'").count() > 200
    assert_changelog_holds_each_change_once(spark, config, "items")


def test_a_partition_dropped_stops_the_stream_with_the_remedy_when_told_to(
    spark: Any, sql: Any, make_config: Any, racer: Any
) -> None:
    """DROP PARTITION removes rows with no row events: silver once kept them silently. With
    `stream.on_unfollowable_ddl: stop` the stream stops before it (the default re-snapshots the
    table: `test_resnapshot.py`)."""
    sql(
        "CREATE TABLE items (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, qty INT NOT NULL, "
        "price DECIMAL(10,2) NOT NULL, note VARCHAR(10) NULL) PARTITION BY RANGE (id) "
        "(PARTITION p0 VALUES LESS THAN (100), PARTITION p1 VALUES LESS THAN MAXVALUE)"
    )
    sql("INSERT INTO items SELECT seq, 'p', seq, 1.25, NULL FROM seq_1_to_300")
    config = make_config(stream={"on_unfollowable_ddl": "stop"})
    with racer():
        commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    sql("ALTER TABLE items DROP PARTITION p0")
    with pytest.raises(SchemaChangeError, match=r"DROP PARTITION removes .*--tables items --reset"):
        commands.stream(spark, config, available_now=True)
    with racer():
        commands.snapshot(spark, config, ["items"], reset=True)
    commands.stream(spark, config, available_now=True)
    assert_silver_is_source(spark, sql, config, "items")
