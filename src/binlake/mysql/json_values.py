"""MySQL's binary JSON (the value of a JSON column in a row image or a partial update's diff)
as Python values, read the one way both binlog readers read it: the stream's row decoder
(`row_images`) and the file reader (`binlog_files`); and a partial update's diffs
(`binlog_row_value_options=PARTIAL_JSON`) applied to the value before it, as MySQL applies them.

python-mysql-replication's `parse_json` reads most of the format, but not MySQL's temporal
values inside a document (opaque values, `CAST(... AS JSON)` of a DATE, DATETIME, TIMESTAMP or
TIME column): it makes a TIME a `datetime.time`, which fails from 24 hours on and drops the
sign (MySQL's TIME spans ±838:59:59), reads a DATE as a midnight `datetime`, which MySQL's JSON
text does not show as one, and a TIMESTAMP as garbled text. Here objects and arrays are walked
to reach those values, which become `timedelta`, `date` and `datetime`: what `typemap.json_text`
renders as MySQL renders the document. Other opaque values (a BLOB or BIT cast to JSON), which
the library decodes as UTF-8 text, are MySQL's text of them (`base64:type15:...`). Everything
else is the library's value (object keys and strings as bytes, DECIMAL as `Decimal`).
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Iterable, Iterator
from datetime import date, datetime, time, timedelta
from typing import Any

from pymysqlreplication import json_binary as jb
from pymysqlreplication.constants import FIELD_TYPE
from pymysqlreplication.json_binary import JsonDiff, JsonDiffOperation, parse_json
from pymysqlreplication.util.bytes import (
    decode_count,
    decode_uint,
    decode_variable_length,
    length_encoded_int,
)

_OBJECTS = (jb.JSONB_TYPE_SMALL_OBJECT, jb.JSONB_TYPE_LARGE_OBJECT)
_CONTAINERS = (*_OBJECTS, jb.JSONB_TYPE_SMALL_ARRAY, jb.JSONB_TYPE_LARGE_ARRAY)
_SMALL = (jb.JSONB_TYPE_SMALL_OBJECT, jb.JSONB_TYPE_SMALL_ARRAY)
_TIMES = (FIELD_TYPE.TIME, FIELD_TYPE.TIME2)
_DATETIMES = (
    FIELD_TYPE.DATETIME, FIELD_TYPE.DATETIME2, FIELD_TYPE.TIMESTAMP, FIELD_TYPE.TIMESTAMP2,
)  # fmt: skip
_DATES = (FIELD_TYPE.DATE, FIELD_TYPE.NEWDATE)
_DECIMALS = (FIELD_TYPE.DECIMAL, FIELD_TYPE.NEWDECIMAL)


def json_value(type_code: int, data: bytes) -> Any:
    """The binary JSON value of type `type_code` held in `data` (the bytes after the type byte):
    the library's value, but an opaque value anywhere in it as `_opaque_temporal` or
    `_opaque_text` reads it (a DECIMAL stays the library's `Decimal`)."""
    if type_code in _CONTAINERS:
        return _container(type_code, data)
    if type_code != jb.JSONB_TYPE_OPAQUE or data[0] in _DECIMALS:
        return parse_json(type_code, data)
    if data[0] in (*_TIMES, *_DATETIMES, *_DATES):
        return _opaque_temporal(data)
    return _opaque_text(data)


def _container(type_code: int, data: bytes) -> Any:
    """A binary JSON object (keys as bytes, as the library keys them) or array: a count and
    size, key entries (offset, length), then value entries (type, and the value inline or its
    offset), each offset from the container's start."""
    small, is_object = type_code in _SMALL, type_code in _OBJECTS
    offset_size = 2 if small else 4
    count = decode_count(data, small)
    key_entry, value_entry = offset_size + 2, offset_size + 1
    keys = []
    for i in range(count if is_object else 0):
        at = 2 * offset_size + key_entry * i
        start = decode_count(data[at:], small)
        keys.append(data[start : start + decode_uint(data[at + offset_size :])])
    values = []
    for i in range(count):
        at = 2 * offset_size + key_entry * len(keys) + value_entry * i
        value_type = data[at]
        if jb.is_json_inline_value(value_type, small):
            values.append(parse_json(value_type, data[at + 1 : at + value_entry]))
        else:
            values.append(json_value(value_type, data[decode_count(data[at + 1 :], small) :]))
    return dict(zip(keys, values, strict=True)) if is_object else values


def _opaque_temporal(data: bytes) -> timedelta | datetime | date:
    """An opaque temporal value: its field type byte, a variable length, then MySQL's packed
    temporal (an int64, negated when negative). A TIME packs hours << 36 | minutes << 30 |
    seconds << 24 | microseconds; a DATE, DATETIME or TIMESTAMP packs (year × 13 + month) << 46
    | day << 41 and the time of day below, as a TIME does."""
    _, n = decode_variable_length(data[1:])
    packed = int.from_bytes(data[1 + n : 9 + n], "little", signed=True)
    whole, microseconds = abs(packed) >> 24, abs(packed) & 0xFFFFFF
    if data[0] in _TIMES:
        value = _clock(whole, microseconds)
        return -value if packed < 0 else value
    year, month = divmod(whole >> 22, 13)
    day = date(year, month, (whole >> 17) & 0x1F)
    if data[0] in _DATES:
        return day
    return datetime.combine(day, time()) + _clock(whole & 0x1FFFF, microseconds)


def _clock(hms: int, microseconds: int) -> timedelta:
    """hours << 12 | minutes << 6 | seconds, and microseconds, as a duration."""
    return timedelta(
        hours=hms >> 12, minutes=(hms >> 6) & 0x3F, seconds=hms & 0x3F, microseconds=microseconds
    )


def _opaque_text(data: bytes) -> bytes:
    """Any other opaque value (a BLOB, a BIT, ... cast to JSON) as the JSON string MySQL's text
    shows (`Json_wrapper::to_string`): `base64:type<field type>:<its bytes in base64>`, but a
    VAR_STRING's bytes as they are; as bytes, as the library gives a JSON string, where it would
    decode any of them as UTF-8 text, dropping what does not decode."""
    length, n = decode_variable_length(data[1:])
    raw = data[1 + n : 1 + n + length]
    if data[0] == FIELD_TYPE.VAR_STRING:
        return raw
    return b"base64:type%d:%s" % (data[0], base64.b64encode(raw))


def json_diffs(data: bytes) -> Iterator[JsonDiff]:
    """The diffs of a partial JSON value (MySQL's `Json_diff_vector::write_binary`): operation
    byte, length-encoded path, and unless a REMOVE, a length-encoded binary JSON value."""
    position = 0
    while position < len(data):
        operation = JsonDiffOperation.by_index(data[position])
        path_length, _, n = length_encoded_int(data[position + 1 :])
        path_at = position + 1 + n
        path = data[path_at : path_at + path_length]
        position = path_at + path_length
        if operation == JsonDiffOperation.Remove:
            yield JsonDiff(operation, path)
            continue
        value_length, _, n = length_encoded_int(data[position:])
        value = data[position + n : position + n + value_length]
        position += n + value_length
        yield JsonDiff(operation, path, json_value(value[0], value[1:]))


def apply_json_diffs(document: Any, diffs: Iterable[JsonDiff]) -> Any:
    """`document` (as the library decodes JSON: object keys as bytes) after `diffs`, each as
    MySQL applies it: REPLACE as `JSON_REPLACE`, INSERT as `JSON_INSERT` on an object member and
    `JSON_ARRAY_INSERT` on an array element, REMOVE as `JSON_REMOVE`. `document` is not changed."""
    result = copy.deepcopy(document)
    for diff in diffs:
        legs = _path_legs(diff.path.decode())
        if not legs:
            result = diff.value  # a REPLACE of the whole document
            continue
        parent = result
        for leg in legs[:-1]:
            parent = parent[leg]
        _apply_at(parent, legs[-1], diff)
    return result


_LEG = re.compile(r'\.([^.\[\s"]+)|\."((?:[^"\\]|\\.)*)"|\[(\d+)\]|\[\s*last(?:\s*-\s*(\d+))?\s*\]')


def _path_legs(path: str) -> list[bytes | int]:
    """A JSON diff's path (`$`, `$.a`, `$."a b"[2]`, `$[last]`, `$[last-1]`) as its legs:
    member names as bytes (as the library keys objects), a quoted one read as the JSON string
    it is (escapes included), array positions as ints, `last-N` as -(N+1): Python's index of
    that element, which reads, replaces, removes and inserts before it as MySQL does."""
    if not path.startswith("$"):
        raise ValueError(f"JSON diff path {path!r} does not start at $")
    legs: list[bytes | int] = []
    position = 1
    while position < len(path):
        leg = _LEG.match(path, position)
        if leg is None:
            raise ValueError(f"JSON diff path {path!r} cannot be read at {position}")
        member, quoted, index, back = leg.groups()
        if index is not None:
            legs.append(int(index))
        elif member is not None:
            legs.append(member.encode())
        elif quoted is not None:
            legs.append(json.loads(f'"{quoted}"').encode())
        else:
            legs.append(-1 - int(back or 0))
        position = leg.end()
    return legs


def _apply_at(parent: Any, leg: bytes | int, diff: JsonDiff) -> None:
    if diff.op == JsonDiffOperation.Remove:
        del parent[leg]
    elif isinstance(parent, list):
        if diff.op == JsonDiffOperation.Insert:
            parent.insert(int(leg), diff.value)
        else:
            parent[int(leg)] = diff.value
    elif leg in parent:
        parent[leg] = diff.value
    else:
        # MySQL stores an object's members by key length, then key bytes, and shows them so:
        # a member inserted takes its place among them, not the last one.
        members = sorted([*parent.items(), (leg, diff.value)], key=_member_order)
        parent.clear()
        parent.update(members)


def _member_order(member: tuple[bytes, Any]) -> tuple[int, bytes]:
    return len(member[0]), member[0]
