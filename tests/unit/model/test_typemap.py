"""Value normalisers: a value read by the snapshot (PyMySQL, text protocol) and the same value
decoded from the binlog (python-mysql-replication) must land in Delta identically."""

from __future__ import annotations

import struct
from datetime import UTC, date, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from binlake.errors import SourceError
from binlake.model.schema import Column
from binlake.model.typemap import map_column, split_key


def column(data_type: str, column_type: str | None = None, **extra: Any) -> Column:
    return Column("c", data_type, column_type or data_type, True, **extra)


def assert_same_landing(col: Column, snapshot: Any, binlog: Any, expected: Any) -> None:
    """Both read paths normalise to `expected` (same value and type) and to equal Arrow cells."""
    mapping = map_column(col)
    from_snapshot, from_binlog = mapping.normalize(snapshot), mapping.normalize(binlog)
    assert from_snapshot == expected
    assert from_binlog == expected
    assert type(from_snapshot) is type(expected)
    assert type(from_binlog) is type(expected)
    cells = pa.array([from_snapshot, from_binlog], mapping.arrow)
    assert cells[0] == cells[1]


# -- integers --------------------------------------------------------------------------------


def test_unsigned_bigint_read_as_signed_by_the_binlog_lands_unsigned() -> None:
    col = column("bigint", "bigint(20) unsigned")
    assert map_column(col).spark == T.DecimalType(20, 0)
    assert_same_landing(col, 18446744073709551615, -1, Decimal(18446744073709551615))


def test_unsigned_bigint_below_two_to_the_63_is_unchanged() -> None:
    assert_same_landing(
        column("bigint", "bigint unsigned"), 9223372036854775807, 9223372036854775807,
        Decimal(9223372036854775807),
    )  # fmt: skip


@pytest.mark.parametrize(
    ("data_type", "signed_read", "unsigned_value"),
    [("tinyint", -1, 255), ("tinyint", -128, 128), ("smallint", -2, 65534),
     ("mediumint", -1, 16777215), ("int", -1, 4294967295), ("int", -2147483648, 2147483648)],
)  # fmt: skip
def test_unsigned_integers_read_as_signed_land_unsigned(
    data_type: str, signed_read: int, unsigned_value: int
) -> None:
    col = column(data_type, f"{data_type} unsigned")
    assert map_column(col).spark == T.LongType()
    assert_same_landing(col, unsigned_value, signed_read, unsigned_value)


def test_signed_integers_keep_their_sign() -> None:
    assert map_column(column("int")).spark == T.IntegerType()
    assert map_column(column("bigint")).spark == T.LongType()
    assert_same_landing(column("bigint", "bigint(20)"), -1, -1, -1)
    assert_same_landing(column("int"), -2147483648, -2147483648, -2147483648)


def test_zerofill_unsigned_int_is_unsigned() -> None:
    assert_same_landing(column("int", "int(10) unsigned zerofill"), 4294967295, -1, 4294967295)


# -- BIT ---------------------------------------------------------------------------------------


def test_bit_bytes_from_snapshot_equal_bit_string_from_binlog() -> None:
    assert_same_landing(column("bit", "bit(3)"), b"\x05", "101", 5)


def test_bit_wider_than_a_byte() -> None:
    assert_same_landing(column("bit", "bit(9)"), b"\x01\x00", "100000000", 256)


def test_bit_1_is_a_boolean() -> None:
    assert map_column(column("bit", "bit(1)")).spark == T.BooleanType()
    assert_same_landing(column("bit", "bit(1)"), b"\x00", "0", False)
    assert_same_landing(column("bit", "bit(1)"), b"\x01", "1", True)


def test_bit_64_with_the_high_bit_set_lands_unsigned() -> None:
    """BIT(64) lands as DECIMAL(20,0) like BIGINT UNSIGNED: no value wraps to negative."""
    col = column("bit", "bit(64)")
    mapping = map_column(col)
    assert mapping.spark == T.DecimalType(20, 0)
    assert_same_landing(col, b"\xff" * 8, "1" * 64, Decimal(2**64 - 1))
    pa.array([mapping.normalize(b"\x80" + b"\x00" * 7)], mapping.arrow)  # fits


# -- SET / ENUM / strings ----------------------------------------------------------------------


def test_set_comma_string_equals_python_set_in_definition_order() -> None:
    col = column("set", "set('a','b','c')")
    assert map_column(col).spark == T.StringType()
    assert_same_landing(col, "a,c", {"c", "a"}, "a,c")


def test_set_of_all_members_follows_definition_order_not_alphabetical() -> None:
    assert_same_landing(column("set", "set('z','m','a')"), "z,m,a", {"a", "m", "z"}, "z,m,a")


def test_set_member_with_a_quote() -> None:
    assert_same_landing(column("set", "set('it''s','b')"), "it's,b", {"b", "it's"}, "it's,b")


def test_empty_set_is_an_empty_string() -> None:
    assert_same_landing(column("set", "set('a','b')"), "", set(), "")


def test_enum_lands_as_its_label() -> None:
    assert_same_landing(column("enum", "enum('small','large')"), "large", "large", "large")


def test_varchar_bytes_are_decoded_as_utf8() -> None:
    assert_same_landing(column("varchar", "varchar(10)"), "Zoë", "Zoë".encode(), "Zoë")


# -- binary ------------------------------------------------------------------------------------


def test_binary_padded_by_the_snapshot_equals_stripped_binlog_value() -> None:
    col = column("binary", "binary(4)")
    assert map_column(col).spark == T.BinaryType()
    assert_same_landing(col, b"ab\x00\x00", b"ab", b"ab\x00\x00")


def test_binary_value_ending_in_zero_bytes_keeps_its_length() -> None:
    assert_same_landing(column("binary", "binary(3)"), b"\x00\x00\x00", b"", b"\x00\x00\x00")


def test_varbinary_is_not_padded() -> None:
    assert_same_landing(column("varbinary", "varbinary(8)"), b"ab", b"ab", b"ab")


def test_blob_decoded_as_text_by_the_binlog_is_encoded_back() -> None:
    assert_same_landing(column("blob"), "Zoë".encode(), "Zoë", "Zoë".encode())


# -- TIME --------------------------------------------------------------------------------------


def test_time_renders_like_mysql() -> None:
    value = timedelta(hours=1, minutes=2, seconds=3)
    assert map_column(column("time")).spark == T.StringType()
    assert_same_landing(column("time", datetime_precision=0), "01:02:03", value, "01:02:03")


def test_negative_time_renders_with_a_leading_minus() -> None:
    value = -timedelta(hours=1, minutes=30)  # timedelta(days=-1, seconds=81000)
    assert_same_landing(column("time", datetime_precision=0), "-01:30:00", value, "-01:30:00")


def test_time_beyond_24_hours() -> None:
    longest = timedelta(hours=838, minutes=59, seconds=59)
    col = column("time", datetime_precision=0)
    assert_same_landing(col, "838:59:59", longest, "838:59:59")
    assert_same_landing(col, "-838:59:59", -longest, "-838:59:59")


def test_fractional_time_renders_its_declared_digits() -> None:
    value = timedelta(seconds=1, microseconds=500_000)
    assert_same_landing(
        column("time", "time(3)", datetime_precision=3), "00:00:01.500", value, "00:00:01.500"
    )
    assert_same_landing(
        column("time", "time(6)", datetime_precision=6), "00:00:01.500000", value,
        "00:00:01.500000",
    )  # fmt: skip


def test_negative_fractional_time() -> None:
    col = column("time", "time(1)", datetime_precision=1)
    value = -timedelta(seconds=1, microseconds=500_000)
    assert_same_landing(col, "-00:00:01.5", value, "-00:00:01.5")


def test_negative_time_under_one_second() -> None:
    col = column("time", "time(6)", datetime_precision=6)
    value = -timedelta(microseconds=1)
    assert_same_landing(col, "-00:00:00.000001", value, "-00:00:00.000001")


# -- DECIMAL -----------------------------------------------------------------------------------


def test_decimal_keeps_its_scale() -> None:
    col = column("decimal", "decimal(10,2)", precision=10, scale=2)
    assert map_column(col).spark == T.DecimalType(10, 2)
    assert_same_landing(col, Decimal("1234.50"), Decimal("1234.50"), Decimal("1234.50"))
    assert str(map_column(col).normalize(Decimal("1234.50"))) == "1234.50"


def test_negative_decimal() -> None:
    col = column("decimal", "decimal(5,3)", precision=5, scale=3)
    assert_same_landing(col, Decimal("-12.345"), Decimal("-12.345"), Decimal("-12.345"))


def test_decimal_wider_than_spark_lands_as_its_text() -> None:
    col = column("decimal", "decimal(65,2)", precision=65, scale=2)
    big = Decimal("1" * 63 + ".25")
    assert map_column(col).spark == T.StringType()
    assert_same_landing(col, big, big, "1" * 63 + ".25")


def test_wide_decimal_text_is_plain_not_scientific() -> None:
    """BUG: DECIMAL(65,30) lands as str(Decimal), so 0.000…001 becomes '1E-30' (and zero
    '0E-30') instead of the source's '0.000000000000000000000000000001'."""
    col = column("decimal", "decimal(65,30)", precision=65, scale=30)
    tiny = Decimal("0.000000000000000000000000000001")
    assert_same_landing(col, tiny, tiny, "0.000000000000000000000000000001")


# -- dates and times ---------------------------------------------------------------------------


def test_datetime_with_microseconds_is_naive() -> None:
    col = column("datetime", "datetime(6)", datetime_precision=6)
    value = datetime(2024, 2, 29, 23, 59, 59, 123_456)
    assert map_column(col).spark == T.TimestampNTZType()
    assert_same_landing(col, value, value, value)


def test_timestamp_lands_as_a_utc_instant() -> None:
    col = column("timestamp", "timestamp(3)", datetime_precision=3)
    naive_utc = datetime(2024, 3, 31, 1, 30, 0, 250_000)  # both paths deliver naive UTC
    assert map_column(col).spark == T.TimestampType()
    assert map_column(col).arrow == pa.timestamp("us", tz="UTC")
    assert_same_landing(col, naive_utc, naive_utc, naive_utc.replace(tzinfo=UTC))


def test_aware_timestamp_keeps_its_instant() -> None:
    col = column("timestamp")
    plus_two = datetime(2024, 3, 31, 3, 30, tzinfo=timezone(timedelta(hours=2)))
    landed = map_column(col).normalize(plus_two)
    assert landed == datetime(2024, 3, 31, 1, 30, tzinfo=UTC)
    cells = pa.array([landed, datetime(2024, 3, 31, 1, 30, tzinfo=UTC)], map_column(col).arrow)
    assert cells[0] == cells[1]


def test_zero_datetime_lands_as_null() -> None:
    normalize = map_column(column("datetime")).normalize
    assert normalize("0000-00-00 00:00:00") is None  # PyMySQL leaves it as text
    assert normalize(None) is None  # python-mysql-replication


def test_date_and_zero_date() -> None:
    col = column("date")
    assert_same_landing(col, date(2024, 1, 31), date(2024, 1, 31), date(2024, 1, 31))
    assert map_column(col).normalize("0000-00-00") is None


def test_year() -> None:
    assert_same_landing(column("year"), 2024, 2024, 2024)


# -- floating point ----------------------------------------------------------------------------


def test_float_lands_identically_as_float32() -> None:
    binlog = struct.unpack("<f", struct.pack("<f", 1.1))[0]  # 1.100000023841858
    mapping = map_column(column("float"))
    cells = pa.array([mapping.normalize(1.1), mapping.normalize(binlog)], mapping.arrow)
    assert cells[0] == cells[1]


# -- JSON --------------------------------------------------------------------------------------


def test_json_text_equals_decoded_binary_json() -> None:
    col = column("json")
    assert map_column(col).spark == T.StringType()
    text = '{"b": 1, "aa": [1, 2.5, null, true], "n": {"k": "v"}}'
    binlog = {b"b": 1, b"aa": [1, 2.5, None, True], b"n": {b"k": b"v"}}
    assert_same_landing(col, text, binlog, text)


def test_json_non_ascii_is_not_escaped() -> None:
    assert_same_landing(
        column("json"), '{"name": "Zoë"}', {b"name": "Zoë".encode()}, '{"name": "Zoë"}'
    )


def test_json_array_and_literal() -> None:
    assert_same_landing(column("json"), "[1, 2]", [1, 2], "[1, 2]")
    assert_same_landing(column("json"), "true", True, "true")


def test_json_top_level_string_keeps_its_quotes() -> None:
    """BUG: python-mysql-replication decodes a top-level JSON string scalar to bytes (b'abc');
    `_json_text` treats bytes as already-serialised JSON text and lands 'abc' while the snapshot
    lands '"abc"'."""
    assert_same_landing(column("json"), '"abc"', b"abc", '"abc"')


def test_json_decimal_member_is_rendered() -> None:
    """BUG: binary JSON may hold DECIMAL values (JSON_OBJECT('p', 1.50)); python-mysql-replication
    decodes them to Decimal and json.dumps raises TypeError: the binlog path fails."""
    assert_same_landing(column("json"), '{"p": 1.50}', {b"p": Decimal("1.50")}, '{"p": 1.50}')


# -- NULL and unsupported types ----------------------------------------------------------------


@pytest.mark.parametrize(
    "col",
    [
        column("int"),
        column("bigint", "bigint unsigned"),
        column("decimal", "decimal(10,2)", precision=10, scale=2),
        column("decimal", "decimal(65,30)", precision=65, scale=30),
        column("float"),
        column("bit", "bit(3)"),
        column("year"),
        column("date"),
        column("datetime"),
        column("timestamp"),
        column("time", datetime_precision=0),
        column("set", "set('a')"),
        column("enum", "enum('a')"),
        column("json"),
        column("varchar", "varchar(3)"),
        column("binary", "binary(4)"),
        column("blob"),
    ],
    ids=lambda c: c.column_type,
)
def test_null_lands_as_none_for_every_type(col: Column) -> None:
    assert map_column(col).normalize(None) is None


@pytest.mark.parametrize(
    "col",
    [column("int"), column("enum", "enum('a','b')"), column("varchar", "varchar(3)")],
    ids=lambda c: c.column_type,
)
def test_a_split_step_past_the_last_key_is_none_for_every_split_key(col: Column) -> None:
    """The stepping queries answer NULL (or no row) past the last key: no bound, not an error."""
    assert split_key(col).normalize(None) is None


def test_mapping_keeps_the_column_name() -> None:
    assert map_column(Column("price", "int", "int", False)).name == "price"


def test_unsupported_type_is_refused_naming_the_column() -> None:
    with pytest.raises(SourceError, match=r"'c'.*vector.*source.tables"):
        map_column(column("vector"))
