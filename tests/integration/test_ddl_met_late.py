"""Issue 23: DDL the stream meets late. While the stream is stopped, a table goes through a
migration of several steps with writes between them; one catch-up must decode every row with
the schema in force at its offset, not the server's schema of now."""

from __future__ import annotations

from typing import Any

import pytest

from binlake.jobs import commands

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .items import seed_items

pytestmark = pytest.mark.integration


def _catch_up(spark: Any, config: Any) -> None:
    commands.stream(spark, config, available_now=True)


def _started(spark: Any, sql: Any, make_config: Any, racer: Any, mode: str) -> Any:
    seed_items(sql, 600)
    config = make_config(stream={"schema_changes": mode})
    with racer():
        commands.snapshot(spark, config)
    _catch_up(spark, config)
    return config


@pytest.mark.parametrize("mode", ["lenient", "evolve"])
def test_widen_drop_and_rename_met_in_one_catch_up(
    spark: Any, sql: Any, make_config: Any, racer: Any, mode: str
) -> None:
    """On main, lenient silver held `quantity` NULL for ~half the rows whose source value was set:
    the schema read at the first DDL was the one after the rename."""
    config = _started(spark, sql, make_config, racer, mode)
    with racer():
        sql("ALTER TABLE items MODIFY name VARCHAR(40) NOT NULL")
        sql("UPDATE items SET name = CONCAT(name, '-wide-enough-now'), qty = 7 WHERE id % 2 = 0")
        sql("ALTER TABLE items DROP COLUMN note")
        sql("UPDATE items SET qty = 8 WHERE id % 3 = 0")
        sql("ALTER TABLE items RENAME COLUMN qty TO quantity")
        sql("UPDATE items SET quantity = 9 WHERE id % 5 = 0")
    _catch_up(spark, config)
    assert "quantity" in assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")


def test_a_routine_migration_backlog_and_enum_reorders_need_no_resnapshot(
    spark: Any, sql: Any, make_config: Any, racer: Any
) -> None:
    """Two changes to one column while behind (widen, then rename) stopped the stream for good
    on main (exit 4: the binlog's layout no longer matched the captured schema). ENUM members
    reordered twice while behind: on main, rows written between the two reorders landed with
    the other label ('lo' read as 'hi'), with no error."""
    sql("CREATE TABLE levels (id INT PRIMARY KEY, qty INT NOT NULL, lvl ENUM('lo','hi') NOT NULL)")
    sql("INSERT INTO levels SELECT seq, 0, IF(seq % 2, 'lo', 'hi') FROM seq_1_to_600")
    config = _started(spark, sql, make_config, racer, "lenient")
    with racer(), racer("levels"):
        sql("ALTER TABLE items ADD COLUMN region VARCHAR(8) NOT NULL DEFAULT 'eu'")
        sql("UPDATE items SET region = 'us' WHERE id % 4 = 0")
        sql("UPDATE levels SET lvl = 'hi' WHERE id % 3 = 0")
        sql("ALTER TABLE items MODIFY qty BIGINT NOT NULL")
        sql("ALTER TABLE levels MODIFY lvl ENUM('hi','lo') NOT NULL")
        sql("UPDATE items SET qty = 5000000000 WHERE id % 6 = 0")
        sql("UPDATE levels SET lvl = 'lo' WHERE id % 5 = 0")
        sql("ALTER TABLE items RENAME COLUMN qty TO quantity")
        sql("ALTER TABLE levels MODIFY lvl ENUM('lo','mid','hi') NOT NULL")
        sql("UPDATE items SET quantity = quantity + 1 WHERE id % 7 = 0")
        sql("UPDATE levels SET lvl = 'mid' WHERE id % 7 = 0")
        sql("ALTER TABLE items DROP COLUMN note")
        sql("UPDATE items SET region = 'ap' WHERE id % 9 = 0")
        sql("ALTER TABLE items ADD COLUMN tier INT NULL DEFAULT 3")
        sql("UPDATE items SET tier = 1 WHERE id % 10 = 0")
    _catch_up(spark, config)
    columns = assert_silver_is_source(spark, sql, config, "items")
    assert {"region", "quantity", "tier"} <= set(columns)
    assert_silver_is_source(spark, sql, config, "levels")
    for table in ("items", "levels"):
        assert_changelog_holds_each_change_once(spark, config, table)


def test_a_migration_between_the_snapshot_and_the_first_stream_start(
    spark: Any, sql: Any, make_config: Any, racer: Any
) -> None:
    """On main, the stream's first start created silver from bronze in the server's schema of
    now, with a column added after the snapshot that bronze does not have: the start failed
    (exit 70, UNRESOLVED_COLUMN) and kept failing. Silver starts in bronze's schema, the schema
    in force at the stream's start, and the stream then applies the migration in order."""
    seed_items(sql, 600)
    config = make_config()
    with racer():
        commands.snapshot(spark, config)
    with racer():
        sql("ALTER TABLE items ADD COLUMN region VARCHAR(8) NOT NULL DEFAULT 'eu'")
        sql("UPDATE items SET region = 'us' WHERE id % 4 = 0")
        sql("ALTER TABLE items RENAME COLUMN qty TO quantity")
        sql("UPDATE items SET quantity = quantity + 1 WHERE id % 7 = 0")
    _catch_up(spark, config)
    assert {"region", "quantity"} <= set(assert_silver_is_source(spark, sql, config, "items"))
    assert_changelog_holds_each_change_once(spark, config, "items")
