"""Routes' pure parts: which tables write one silver table (one after another), and which
member is which source table."""

from __future__ import annotations

from pyspark.sql import types as T

from binlake.config.settings import parse_config
from binlake.silver.routes import group_by_silver, member_of, reconciliation, silver_name


def test_tables_of_one_silver_are_grouped_in_their_order_and_the_others_alone() -> None:
    config = parse_config(
        {
            "source": {"tables": [r"s[0-9]\.items", "crm.customers"]},
            "silver": {"routes": [{"source": r"s[0-9]\.items", "target": "all.items"}]},
        }
    )
    tables = ["s2.items", "crm.customers", "s1.items", "s3.items", "all.items_x"]
    assert group_by_silver(config, tables) == [
        ["s2.items", "s1.items", "s3.items"],
        ["crm.customers"],
        ["all.items_x"],
    ]
    assert silver_name(config, "s2.items") == ("all", "items")
    assert silver_name(config, "crm.customers") == ("crm", "customers")
    assert member_of(config, "crm.customers") is None
    member = member_of(config, "s2.items")
    assert member is not None and (member.database, member.table) == ("s2", "items")


def test_a_table_whose_silver_is_a_route_target_name_without_the_route_is_not_grouped() -> None:
    """`all.items` itself, when captured and not routed, is a silver of its own name: the
    validation refuses that config (see test_routes); the grouping alone keeps it with the
    route, so even then no two writes into one table run at once."""
    config = parse_config(
        {
            "source": {"tables": [r"s[0-9]\.items", r"all\.items"]},
            "silver": {"routes": [{"source": r"s[0-9]\.items", "target": "all.items"}]},
        }
    )
    assert group_by_silver(config, ["s1.items", "all.items"]) == [["s1.items", "all.items"]]


def test_a_member_s_columns_are_added_widened_kept_or_refused() -> None:
    held = T.StructType(
        [
            T.StructField("id", T.IntegerType()),
            T.StructField("qty", T.LongType()),
            T.StructField("price", T.DecimalType(10, 2)),
            T.StructField("Name", T.StringType()),
            T.StructField("seen", T.DateType()),
        ]
    )
    member = [
        T.StructField("id", T.LongType()),  # wider than silver's: widened
        T.StructField("qty", T.IntegerType()),  # narrower: silver's holds it
        T.StructField("price", T.DecimalType(12, 4)),  # more digits on both sides: widened
        T.StructField("name", T.StringType()),  # the same column, spelt otherwise
        T.StructField("seen", T.StringType()),  # neither holds the other's values
        T.StructField("shelf", T.StringType()),  # silver lacks it
    ]
    assert [(f.name, action) for f, action in reconciliation(held, member)] == [
        ("id", "widen"),
        ("price", "widen"),
        ("seen", "refuse"),
        ("shelf", "add"),
    ]
    narrower = T.StructField("price", T.DecimalType(12, 1))  # loses a digit of scale
    assert reconciliation(held, [narrower]) == [(narrower, "refuse")]
