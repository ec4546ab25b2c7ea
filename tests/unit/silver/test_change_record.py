"""The change record's JSON images: every landed value keeps its exact form (the sink parses
them back, see `typed_image`; tests/integration/test_types.py checks the round trip)."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from decimal import Decimal

from binlake.model.schema import Column, TableSchema
from binlake.silver.change_record import ImageEncoder


def _table() -> TableSchema:
    columns = (
        Column("id", "bigint", "bigint(20) unsigned", False),
        Column("price", "decimal", "decimal(30,10)", True, precision=30, scale=10),
        Column("blob", "varbinary", "varbinary(8)", True),
        Column("day", "date", "date", True),
        Column("at", "datetime", "datetime(6)", True, datetime_precision=6),
        Column("ts", "timestamp", "timestamp(6)", True, datetime_precision=6),
        Column("ratio", "double", "double", True),
        Column("name", "varchar", "varchar(5)", True),
    )
    return TableSchema("db", "t", columns, ("id",), "id")


def test_values_keep_their_exact_form() -> None:
    row = (
        Decimal(18446744073709551615),
        Decimal("12345678901234567890.0000000001"),
        b"\x00\xff",
        date(1, 1, 1),
        datetime(2024, 2, 29, 23, 59, 59, 999999),
        datetime(1969, 12, 31, 23, 59, 59, 1, tzinfo=UTC),
        0.1 + 0.2,
        'é"\n',
    )
    image = json.loads(ImageEncoder(_table())(row) or "")
    assert image == {
        "id": "18446744073709551615",
        "price": "12345678901234567890.0000000001",
        "blob": "AP8=",
        "day": "0001-01-01",
        "at": "2024-02-29 23:59:59.999999",
        "ts": -999999,
        "ratio": 0.30000000000000004,
        "name": 'é"\n',
    }


def test_nulls_stay_null_and_a_missing_image_is_none() -> None:
    encode = ImageEncoder(_table())
    assert json.loads(encode((1, None, None, None, None, None, None, None)) or "")["blob"] is None
    assert encode(None) is None


def test_floats_and_integers_round_trip_bit_exact() -> None:
    """The images' numbers parse back to the very same value: shortest round-trip floats
    (subnormals, extremes, negative zero, a FLOAT widened to double) and 64-bit integers."""
    columns = (
        Column("id", "bigint", "bigint(20)", False),
        Column("n", "bigint", "bigint(20)", True),
        Column("x", "double", "double", True),
    )
    encode = ImageEncoder(TableSchema("db", "t", columns, ("id",), "id"))
    floats = [5e-324, 1.7976931348623157e308, -0.0, 1e16, 0.1 + 0.2, 3.4028234663852886e38,
              0.10000000149011612, 2.0**53 + 2]  # fmt: skip
    for i, value in enumerate(floats):
        back = json.loads(encode((i, -(2**63), value)) or "")
        assert back["x"] == value and str(back["x"]) == str(value)
        assert back["n"] == -(2**63)
