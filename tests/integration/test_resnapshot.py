"""Issue 23: a DDL silver cannot follow from the binlog (a partition dropped, a table renamed
onto a captured name) sends that one table back to its snapshot, which the stream runs by itself
while every other table keeps streaming, then rejoins it: no stop, no person, nothing lost or
applied twice. Before, the stream stopped before the DDL and asked for `--reset`."""

from __future__ import annotations

from typing import Any

import pytest
from delta.tables import DeltaTable

from binlake.jobs import commands

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .crash import crashed_at
from .items import ITEMS, running_stream, seed_items, wait_for

pytestmark = pytest.mark.integration

PARTITIONED = (
    ITEMS.replace("items", "parts")
    + " PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (100), "
    "PARTITION p1 VALUES LESS THAN MAXVALUE)"
)


def _seed(sql: Any) -> None:
    """`items` and `other` (1,000 rows each), `parts` partitioned by id (300 rows)."""
    seed_items(sql, 1000, copy="other")
    sql(PARTITIONED)
    sql("INSERT INTO parts SELECT * FROM items WHERE id <= 300")


def _silver_has(spark: Any, config: Any, table: str, key: int) -> bool:
    path = config.lake.path("silver", config.source.database, table)
    return spark.read.format("delta").load(path).where(f"id = {key}").count() == 1


def _assert_exact(spark: Any, sql: Any, config: Any, tables: list[str]) -> None:
    for table in tables:
        assert_silver_is_source(spark, sql, config, table)
        assert_changelog_holds_each_change_once(spark, config, table)


def test_a_partition_dropped_while_streaming_resnapshots_that_table_alone(
    spark: Any, sql: Any, make_config: Any, racer: Any
) -> None:
    """A continuous stream, writers racing on every table: the partition drop sends `parts`
    back; `items` keeps streaming meanwhile, and `parts` rejoins by itself, its silver feed
    showing the dropped rows' deletes."""
    _seed(sql)
    config = make_config(stream={"trigger_interval": "1s"})
    with racer("items"), racer("other"):
        commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    silver = config.lake.path("silver", config.source.database, "parts")
    before = DeltaTable.forPath(spark, silver).history(1).first()["version"]
    with running_stream(spark, config) as stream, racer("items"), racer("parts"):
        sql("ALTER TABLE parts DROP PARTITION p0")
        sql("INSERT INTO items (id, name, qty, price) VALUES (90001, 'after', 1, 1)")
        sql("INSERT INTO parts (id, name, qty, price) VALUES (90002, 'after', 1, 1)")
        wait_for(lambda: not stream.is_alive() or _silver_has(spark, config, "items", 90001))
        wait_for(lambda: not stream.is_alive() or _silver_has(spark, config, "parts", 90002))
        assert stream.is_alive()
    commands.stream(spark, config, available_now=True)
    _assert_exact(spark, sql, config, ["items", "other", "parts"])
    feed = (
        spark.read.format("delta").option("readChangeFeed", "true")
        .option("startingVersion", before + 1).load(silver)
    )  # fmt: skip
    assert feed.where("_change_type = 'delete' AND id < 100").count() >= 80


def test_unfollowable_changes_met_in_a_catch_up_end_exact_in_that_run(
    spark: Any, sql: Any, make_config: Any, racer: Any
) -> None:
    """While the stream is stopped: a partition of `parts` dropped, and `other` replaced by a
    table renamed onto its name (`RENAME TABLE other TO other_old, staging TO other`), each
    with updates after; one `--available-now` run snapshots both again and joins them."""
    _seed(sql)
    config = make_config(source={"tables": ["items", "other", "parts"]})
    with racer("items"):
        commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    sql(ITEMS.replace("items", "staging"))
    sql("INSERT INTO staging SELECT id, 'staged', qty * 2, price, note FROM other WHERE id < 700")
    with racer("items"), racer("parts"):
        sql("UPDATE other SET qty = qty + 1 WHERE id % 2 = 0")
        # A change of `parts` before its DDL, whatever the racer managed by then: the changelog
        # keeps it (the changes after the DDL are the new snapshot's).
        sql("UPDATE parts SET qty = qty + 1 WHERE id = 250")
        sql("ALTER TABLE parts DROP PARTITION p0")
        sql("UPDATE parts SET qty = qty + 10 WHERE id % 3 = 0")
        sql("RENAME TABLE other TO other_old, staging TO other")
        sql("UPDATE other SET qty = qty + 100 WHERE id % 5 = 0")
    commands.stream(spark, config, available_now=True)
    _assert_exact(spark, sql, config, ["items", "other", "parts"])


def test_a_stream_killed_in_its_own_resnapshot_after_planning_finishes_it_on_restart(
    spark: Any, sql: Any, make_config: Any, racer: Any
) -> None:
    """Issue 68.4: a catch-up meets a partition drop, sends `parts` back and snapshots it again;
    it dies once the new plan is in the ledger (which ends the pending reset), before any chunk
    is read. The next catch-up must finish that snapshot and rejoin `parts` (on main nothing
    resumed it: `parts` stayed out of the stream, its silver frozen, with no lag reported)."""
    _seed(sql)
    config = make_config()
    with racer("items"):
        commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    with racer("items"), racer("parts"):
        sql("UPDATE parts SET qty = qty + 1 WHERE id = 250")  # the changelog keeps it
        sql("ALTER TABLE parts DROP PARTITION p0")
        sql("UPDATE parts SET qty = qty + 10 WHERE id % 3 = 0")
    with crashed_at("binlake.snapshot.task:read_and_commit", "before", 1):
        commands.stream(spark, config, available_now=True)
    with racer("parts"):
        sql("INSERT INTO parts (id, name, qty, price) VALUES (90003, 'after', 1, 1)")
    commands.stream(spark, config, available_now=True)
    _assert_exact(spark, sql, config, ["items", "parts"])


#: Row-moving partition DDL (MariaDB 10.7+): rows leave `parts` for a new table, or a table's
#: rows arrive in `parts` as a partition, with no row events either way.
CONVERTS = {
    "partition_to_table": ["ALTER TABLE parts CONVERT PARTITION p0 TO TABLE parts_p0"],
    "table_to_partition": [
        ITEMS.replace("items", "arriving"),
        "INSERT INTO arriving SELECT id + 3000, name, qty, price, note FROM items WHERE id < 50",
        # A partitioning change just before: the stream works out the columns between the two
        # from its text (it stopped here before, unable to).
        "ALTER TABLE parts REORGANIZE PARTITION p1 INTO (PARTITION p1 VALUES LESS THAN (2000), "
        "PARTITION p2 VALUES LESS THAN (3000))",
        "ALTER TABLE parts CONVERT TABLE arriving TO PARTITION p3 VALUES LESS THAN (4000)",
    ],
}


@pytest.mark.parametrize("convert", sorted(CONVERTS))
def test_rows_moved_by_partition_conversion_resnapshot_the_table(
    spark: Any, sql: Any, make_config: Any, racer: Any, convert: str
) -> None:
    """Issue 68.8: `CONVERT PARTITION … TO TABLE` and `CONVERT TABLE … TO PARTITION` move rows
    in or out of `parts` with no row events; on main the stream took them for a plain ALTER and
    silver kept the rows that left (or lacked those that came). Now `parts` is read again."""
    seed_items(sql, 1000)
    sql(ITEMS.replace("items", "parts") + " PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS "
        "THAN (100), PARTITION p1 VALUES LESS THAN (1000))")  # fmt: skip
    sql("INSERT INTO parts SELECT * FROM items WHERE id < 300")
    config = make_config(source={"tables": ["items", "parts"]})
    with racer("items"):
        commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    with racer("items"), racer("parts"):
        sql("UPDATE parts SET qty = qty + 1 WHERE id = 250")  # the changelog keeps it
        for statement in CONVERTS[convert]:
            sql(statement)
        sql("UPDATE parts SET qty = qty + 10 WHERE id % 3 = 0")
    commands.stream(spark, config, available_now=True)
    _assert_exact(spark, sql, config, ["items", "parts"])
