"""MySQL's binary JSON values the library misreads, read by `json_values` and rendered as
MySQL's JSON text (`typemap.json_text`): opaque temporal values of any range and sign, and other
opaque values as MySQL shows them; and a partial update's diffs, read and applied."""

from __future__ import annotations

import struct
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest
from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.json_binary import JSONB_TYPE_OPAQUE, JsonDiff, JsonDiffOperation

from binlake.model.typemap import json_text
from binlake.mysql.json_values import apply_json_diffs, json_diffs, json_value


def opaque(field_type: int, raw: bytes) -> bytes:
    """An opaque value's bytes after its JSON type byte: field type, length (one byte), bytes."""
    return bytes([field_type, len(raw)]) + raw


def packed_time(hours: int, minutes: int, seconds: int, micros: int, negative: bool) -> bytes:
    value = (hours << 36 | minutes << 30 | seconds << 24) + micros
    return struct.pack("<q", -value if negative else value)


def packed_datetime(moment: datetime) -> bytes:
    year_month = moment.year * 13 + moment.month
    day_time = moment.day << 17 | moment.hour << 12 | moment.minute << 6 | moment.second
    return struct.pack("<q", (year_month << 22 | day_time) << 24 | moment.microsecond)


@pytest.mark.parametrize(
    ("field_type", "raw", "value", "text"),
    [
        (
            FIELD_TYPE.TIME2,
            packed_time(838, 59, 59, 0, negative=True),
            -timedelta(hours=838, minutes=59, seconds=59),
            '"-838:59:59.000000"',
        ),
        (
            FIELD_TYPE.TIME,
            packed_time(1, 2, 3, 4, negative=False),
            timedelta(hours=1, minutes=2, seconds=3, microseconds=4),
            '"01:02:03.000004"',
        ),
        (
            FIELD_TYPE.DATETIME2,
            packed_datetime(datetime(2024, 2, 29, 23, 59, 58, 120000)),
            datetime(2024, 2, 29, 23, 59, 58, 120000),
            '"2024-02-29 23:59:58.120000"',
        ),
        (
            FIELD_TYPE.TIMESTAMP2,
            packed_datetime(datetime(1999, 12, 31, 1, 0, 0)),
            datetime(1999, 12, 31, 1, 0, 0),
            '"1999-12-31 01:00:00.000000"',
        ),
        (
            FIELD_TYPE.DATE,
            packed_datetime(datetime(2012, 3, 18)),
            date(2012, 3, 18),
            '"2012-03-18"',
        ),
        (FIELD_TYPE.BLOB, b"\xff\x00", b"base64:type252:/wA=", '"base64:type252:/wA="'),
        (FIELD_TYPE.VAR_STRING, "é".encode(), "é".encode(), '"é"'),
        (FIELD_TYPE.NEWDECIMAL, bytes([5, 2, 0x80, 0x09, 0]), Decimal("9.00"), "9.00"),
    ],
    ids=["negative-time", "time", "datetime", "timestamp", "date", "blob", "var-string", "decimal"],
)
def test_opaque_values_read_and_render_as_mysql_shows_them(
    field_type: int, raw: bytes, value: object, text: str
) -> None:
    read = json_value(JSONB_TYPE_OPAQUE, opaque(field_type, raw))
    assert (read, json_text(read)) == (value, text)


def test_json_diffs_apply_in_order_as_mysql_applies_them() -> None:
    document = {b"a": [1, 2, 3], b"b": {b"c": "x"}, b"key d": 4}
    diffs = [
        JsonDiff(JsonDiffOperation.Replace, b"$.b.c", "y"),
        JsonDiff(JsonDiffOperation.Insert, b"$.a[1]", 9),
        JsonDiff(JsonDiffOperation.Remove, b"$.a[0]"),
        JsonDiff(JsonDiffOperation.Insert, b"$.e", True),
        JsonDiff(JsonDiffOperation.Remove, b'$."key d"'),
    ]
    assert apply_json_diffs(document, diffs) == {b"a": [9, 2, 3], b"b": {b"c": "y"}, b"e": True}
    assert document[b"a"] == [1, 2, 3]  # not changed
    assert apply_json_diffs(document, [JsonDiff(JsonDiffOperation.Replace, b"$", 1)]) == 1


def test_every_diff_of_a_column_is_read() -> None:
    # op, path (length-encoded), value (length-encoded binary JSON: type 5 = int16)
    replace = b"\x00\x05$.age\x03\x05\x1a\x00"
    remove = b"\x02\x06$.data"
    insert = b"\x01\x05$.new\x03\x05\x01\x00"
    diffs = list(json_diffs(replace + remove + insert))
    assert [(d.op, d.path, d.value) for d in diffs] == [
        (JsonDiffOperation.Replace, b"$.age", 26),
        (JsonDiffOperation.Remove, b"$.data", None),
        (JsonDiffOperation.Insert, b"$.new", 1),
    ]


def test_diff_paths_name_members_as_mysql_quotes_them_and_the_last_element() -> None:
    """MySQL quotes a member name that is no identifier and escapes it as a JSON string
    (`$."a \\"b\\""`, `$."caf\\u00e9"`); `[last]` and `[last-N]` count from the end."""
    document = {b'a "b"': 1, "café".encode(): 2, b"arr": [1, 2, 3, 4]}
    diffs = [
        JsonDiff(JsonDiffOperation.Replace, b'$."a \\"b\\""', 10),
        JsonDiff(JsonDiffOperation.Replace, b'$."caf\\u00e9"', 20),
        JsonDiff(JsonDiffOperation.Replace, b"$.arr[last]", 40),
        JsonDiff(JsonDiffOperation.Remove, b"$.arr[last-2]"),
        JsonDiff(JsonDiffOperation.Insert, b"$.arr[last - 1]", 9),
    ]
    assert apply_json_diffs(document, diffs) == {
        b'a "b"': 10,
        "café".encode(): 20,
        b"arr": [1, 9, 3, 40],
    }
    with pytest.raises(ValueError, match=r"cannot be read at 1"):
        apply_json_diffs(document, [JsonDiff(JsonDiffOperation.Remove, b"$[*]")])
