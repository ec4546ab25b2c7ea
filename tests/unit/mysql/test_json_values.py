"""MySQL's binary JSON values the library misreads, read by `json_values` and rendered as
MySQL's JSON text (`typemap.json_text`): opaque temporal values of any range and sign, and other
opaque values as MySQL shows them."""

from __future__ import annotations

import struct
from datetime import date, datetime, timedelta
from decimal import Decimal

import pytest
from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.json_binary import JSONB_TYPE_OPAQUE

from binlake.model.typemap import json_text
from binlake.mysql.json_values import json_value


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
