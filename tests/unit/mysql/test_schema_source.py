"""Which DDL statements read from the binlog after an offset touch a table (the check that
decides whether the server's schema of now is the schema at a DDL)."""

from __future__ import annotations

import pytest

from binlake.model.capture import TableNames
from binlake.model.offsets import BinlogOffset
from binlake.mysql.schema_source import LoggedStatement


def _logged(statement: str, database: str = "shop") -> LoggedStatement:
    return LoggedStatement(BinlogOffset("mysql-bin.000002", 900), database, statement)


@pytest.mark.parametrize(
    ("statement", "database", "touches"),
    [
        ("ALTER TABLE items ADD x INT", "shop", True),
        ("ALTER TABLE `shop`.`items` ADD x INT", "", True),
        ("ALTER TABLE other.items ADD x INT", "shop", False),  # the same name elsewhere
        ("ALTER TABLE items ADD x INT", "other", False),
        ("RENAME TABLE _items_new TO items", "shop", True),  # a cut-over onto it
        ("RENAME TABLE items TO items_2024", "shop", True),
        ("DROP TABLE IF EXISTS a, items", "shop", True),
        ("CREATE INDEX i ON items (x)", "shop", True),
        ("INSERT INTO items VALUES (1)", "shop", False),  # statement-logged DML: not a DDL
        ("ALTER TABLE items_archive ADD x INT", "shop", False),
        ("BEGIN", "shop", False),
    ],
)
def test_a_later_statement_touches_the_table_it_names(
    statement: str, database: str, touches: bool
) -> None:
    assert _logged(statement, database).touches("shop", "items") is touches


@pytest.mark.parametrize(
    ("statement", "database", "lower_case", "touches"),
    [
        ("ALTER TABLE Items ADD x INT", "shop", 0, False),  # another table, as written
        ("ALTER TABLE Items ADD x INT", "shop", 1, True),
        ("ALTER TABLE `SHOP`.`ITEMS` ADD x INT", "", 1, True),
        ("ALTER TABLE `SHOP`.`ITEMS` ADD x INT", "", 2, True),
        ("ALTER TABLE Other.Items ADD x INT", "shop", 1, False),
        ("RENAME TABLE _Items_New TO Items", "Shop", 1, True),  # a cut-over onto it
        ("DROP DATABASE Shop", "", 1, True),
        ("DROP DATABASE Shop", "", 0, False),
    ],
)
def test_a_later_statement_touches_the_table_as_the_server_compares_names(
    statement: str, database: str, lower_case: int, touches: bool
) -> None:
    logged = _logged(statement, database)
    assert logged.touches("shop", "items", False, TableNames(lower_case)) is touches
