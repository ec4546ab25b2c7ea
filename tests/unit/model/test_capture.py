"""Which tables a config captures: one database's names and regexes, or `db.table` patterns over
several databases, and how per-table config keys name a table."""

from __future__ import annotations

import pytest

from binlake.config.settings import parse_config
from binlake.errors import ConfigError, SourceError
from binlake.model.capture import Capture, TableNames, table_matches

SERVER = [
    ("shop_1", "orders"),
    ("shop_1", "items"),
    ("shop_1", "_orders_new"),
    ("shop_12", "orders"),
    ("shop_x", "orders"),
    ("shop_2", "orderss"),
    ("mysql", "orders"),
    ("eu", "customers"),
]


def test_one_database_keeps_its_names_and_regexes() -> None:
    capture = Capture("shop_1", ("orders", "it.*"))
    assert capture.select(SERVER) == [("shop_1", "orders"), ("shop_1", "items")]
    assert capture.captures("shop_1", "orders") and not capture.captures("shop_12", "orders")
    assert Capture("shop_1", None).select(SERVER) == [("shop_1", "orders"), ("shop_1", "items")]
    assert capture.schemas == ["shop_1"]


def test_patterns_over_several_databases_match_all_of_db_table() -> None:
    capture = Capture(None, (r"shop_[0-9]+\.orders", "eu.customers"))
    assert capture.select(SERVER) == [
        ("shop_1", "orders"),
        ("shop_12", "orders"),
        ("eu", "customers"),
    ]
    # A database created later, matching: captured; the dot must sit between the two parts.
    assert capture.captures("shop_7", "orders")
    assert not capture.captures("shop_7", "orders_archive")
    assert not capture.captures("shop_2", "orderss")
    assert capture.schemas is None  # a binlog read keeps to no fixed list of databases


def test_server_databases_and_shadow_tables_are_not_taken_by_a_pattern() -> None:
    everything = Capture(None, (r".*\..*",))
    chosen = everything.select(SERVER)
    assert ("mysql", "orders") not in chosen and ("shop_1", "_orders_new") not in chosen
    assert ("shop_2", "orderss") in chosen
    assert Capture(None, ("shop_1._orders_new",)).captures("shop_1", "_orders_new")


def test_an_entry_that_matches_nothing_is_refused_with_the_closest_name() -> None:
    with pytest.raises(SourceError, match=r"shop_1\.ordres does not exist.*'shop_1\.orders'"):
        Capture(None, ("shop_1.ordres",)).select(SERVER)
    with pytest.raises(SourceError, match=r"table shop_1\.ordres does not exist.*'orders'"):
        Capture("shop_1", ("ordres",)).select(SERVER)


@pytest.mark.parametrize(
    ("pattern", "table", "expected"),
    [
        ("orders", "shop_1.orders", True),  # a name: that table in every database
        ("shop_1.orders", "shop_1.orders", True),
        ("shop_1.orders", "shop_2.orders", False),
        (r"shop_[12]\.orders", "shop_2.orders", True),
        ("ord.*", "shop_2.orders", True),
        ("shop_1", "shop_1.orders", False),
        ("(", "shop_1.orders", False),  # not a regex: only the name itself
    ],
)
def test_per_table_keys_name_a_table_or_db_table(pattern: str, table: str, expected: bool) -> None:
    assert table_matches(pattern, table) is expected


def test_several_databases_need_their_tables_listed() -> None:
    with pytest.raises(ConfigError, match=r"source.database is required, unless source.tables"):
        parse_config({"source": {}})
    config = parse_config(
        {"source": {"database": "shop", "tables": r"shop_[0-9]+\.orders, eu.customers"}},
        {"source.database": ""},  # the bundle's empty source_database parameter
    )
    assert config.source.capture == Capture(None, (r"shop_[0-9]+\.orders", "eu.customers"))
    scd2 = parse_config(
        {"source": {"database": "eu"}, "silver": {"history_tables": {"eu.customers": "scd2"}}}
    )
    assert scd2.silver.history_of("eu.customers") == "scd2"
    assert scd2.silver.history_of("us.customers") == "latest"


@pytest.mark.parametrize(
    ("lower_case", "written", "key", "stored"),
    [
        (0, "Orders", "Orders", "Orders"),  # Linux's default: as written
        (1, "Orders", "orders", "orders"),  # stored lower-case, compared so
        (2, "Orders", "orders", "Orders"),  # stored as created, compared lower-cased
    ],
)
def test_table_names_compare_as_the_server_compares_them(
    lower_case: int, written: str, key: str, stored: str
) -> None:
    names = TableNames(lower_case)
    assert (names.key(written), names.stored(written)) == (key, stored)
    assert names.same("ORDERS", "orders") is (lower_case != 0)
    assert names.matches("ORDERS", "orders") is (lower_case != 0)
    # A regex is matched ignoring case, never lower-cased: `\D` is not `\d`.
    assert names.matches(r"ORD\D+", "orders") is (lower_case != 0)
    assert not names.matches(r"ORD\d+", "orders")


def test_a_capture_under_lower_case_table_names_matches_any_spelling() -> None:
    server = [("shop", "orders"), ("shop", "items"), ("shop_7", "orders")]
    capture = Capture("Shop", ("Orders", "IT.*"))
    with pytest.raises(SourceError, match="Orders does not exist"):
        capture.select(server)  # case-sensitive: `Shop`.`Orders` is not `shop`.`orders`
    folded = capture.under(TableNames(1))
    assert folded.select(server) == [("shop", "orders"), ("shop", "items")]
    assert folded.captures("SHOP", "ORDERS") and not folded.captures("shop_7", "orders")
    assert folded.schemas == ["shop"]  # the binlog names the database as the server stores it
    assert Capture("Shop", None).under(TableNames(2)).captures("SHOP", "anything")
    assert Capture("Shop", None).under(TableNames(2)).schemas is None  # stored as created
    assert not Capture("Shop", None).captures("shop", "anything")
    several = Capture(None, (r"Shop_[0-9]+\.Orders",)).under(TableNames(1))
    assert several.captures("shop_7", "orders") and not several.captures("shop_7", "orders2")
