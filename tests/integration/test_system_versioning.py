"""Issue 68.9: system-versioned tables (MariaDB `WITH SYSTEM VERSIONING`).

Their `table_type` is `SYSTEM VERSIONED`, and binlake once captured base tables alone: such a
table was never captured, and `ALTER TABLE t ADD SYSTEM VERSIONING` on a captured one stopped its
capture without a word. In the binlog an UPDATE of such a table is the update of its current row
plus the insert of the old version as a history row, a DELETE is an update that ends the current
row's period, and `DELETE HISTORY` deletes history rows: silver holds the current rows alone."""

from __future__ import annotations

from typing import Any

import pytest

from binlake.errors import SourceError
from binlake.jobs import commands
from binlake.mysql.discovery import load_schema

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .items import ITEMS, seed_items
from .replay import connect

pytestmark = pytest.mark.integration


def test_system_versioned_tables_land_their_current_rows(
    spark: Any, sql: Any, make_config: Any, racer: Any
) -> None:
    """`versioned` is system-versioned from the start, `items` becomes so after its snapshot,
    before the stream reads on; writers race through the snapshot and the DDL, and the history
    each change leaves, the period a delete ends and `DELETE HISTORY` never reach silver."""
    seed_items(sql, 300)
    sql(ITEMS.replace("items", "versioned") + " WITH SYSTEM VERSIONING")
    sql("INSERT INTO versioned SELECT * FROM items")
    config = make_config()  # source.tables unset: every table of the database
    with racer("versioned"):
        commands.snapshot(spark, config)
    with racer("versioned"), racer("items"):
        sql("ALTER TABLE items ADD SYSTEM VERSIONING")
        sql("UPDATE items SET qty = qty + 10 WHERE id % 3 = 0")
        sql("DELETE FROM items WHERE id % 7 = 0")
        sql("REPLACE INTO versioned (id, name, qty, price) VALUES (5, 'replaced', 1, 2)")
        sql("UPDATE versioned SET id = id + 5000 WHERE id IN (11, 12)")  # key changes
        sql("DELETE HISTORY FROM versioned")
    commands.stream(spark, config, available_now=True)
    for table in ("versioned", "items"):
        assert_silver_is_source(spark, sql, config, table)
        assert_changelog_holds_each_change_once(spark, config, table)


PERIOD = (
    "rs TIMESTAMP(6) GENERATED ALWAYS AS ROW START INVISIBLE, re TIMESTAMP(6) GENERATED ALWAYS "
    "AS ROW END INVISIBLE, PERIOD FOR SYSTEM_TIME (rs, re)"
)


def test_named_period_columns_land_but_never_join_the_key(
    db_env: dict[str, str], database: str, sql: Any
) -> None:
    """The server adds the row end to every unique key of a versioned table: binlake's row key
    (and a key-less table's split key candidates) stay as declared. Transaction-precise history,
    whose changes MariaDB logs as statements, is refused with its remedy."""
    sql(f"CREATE TABLE named (id INT PRIMARY KEY, v INT, {PERIOD}) WITH SYSTEM VERSIONING")
    sql(f"CREATE TABLE keyless (u INT NOT NULL, {PERIOD}, UNIQUE (u)) WITH SYSTEM VERSIONING")
    sql(
        "CREATE TABLE precise (id INT PRIMARY KEY, ts BIGINT UNSIGNED GENERATED ALWAYS AS ROW "
        "START, te BIGINT UNSIGNED GENERATED ALWAYS AS ROW END, PERIOD FOR SYSTEM_TIME (ts, te)) "
        "ENGINE=InnoDB WITH SYSTEM VERSIONING"
    )
    with connect(db_env, database) as conn:
        named = load_schema(conn, database, "named", {})
        assert (named.column_names, named.key) == (("id", "v", "rs", "re"), ("id",))
        assert named.system_period == ("rs", "re")
        assert load_schema(conn, database, "keyless", {"keyless": "u"}).key == ("u",)
        with pytest.raises(SourceError, match=r"transaction-precise history.*Leave it out"):
            load_schema(conn, database, "precise", {})
