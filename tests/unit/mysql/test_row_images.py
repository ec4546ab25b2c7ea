"""The generated row-image decoder on hand-built images (the integration test compares it with
the snapshot path on a real binlog)."""

from __future__ import annotations

import random
import struct
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal

import pytest

from binlake.errors import SourceError
from binlake.model.schema import Column, TableSchema
from binlake.mysql.row_images import (
    LONG,
    LONGLONG,
    NEWDECIMAL,
    TIME2,
    VARCHAR,
    count_images,
    decode_images,
    image_decoder,
    image_widths,
    partial_update_images,
)


@dataclass
class Mapped:
    """A TABLE_MAP column as python-mysql-replication parses it."""

    type: int
    max_length: int = 0
    precision: int = 0
    decimals: int = 0
    fsp: int = 0
    length_size: int = 0


def table(*columns: Column) -> TableSchema:
    return TableSchema("db", "t", columns, (columns[0].name,), columns[0].name)


ID = Column("id", "bigint", "bigint(20)", False)


def test_not_null_run_nullable_columns_and_strings() -> None:
    schema = table(
        ID,
        Column("n", "int", "int(11)", True),
        Column("s", "varchar", "varchar(300)", True, charset="utf8mb4"),
    )
    decode = image_decoder(schema, [Mapped(LONGLONG), Mapped(LONG), Mapped(VARCHAR, 1200)])
    word = "héllo".encode()
    first = b"\x00" + struct.pack("<qi", 7, -3) + struct.pack("<H", len(word)) + word
    second = bytes([0b110]) + struct.pack("<q", 8)  # n and s NULL: no bytes for them
    assert list(decode_images(decode, first + second)) == [(7, -3, "héllo"), (8, None, None)]


def test_a_decoder_is_generated_once_per_schema_and_layout() -> None:
    """Reads share decoders: an equal schema and layout (new map objects, as each read parses its
    own) get the decoder generated first; a layout that differs in an attribute the image depends
    on (here the length bytes of a VARCHAR) gets its own, which reads its own bytes; so does
    another schema of the same layout."""
    schema = table(ID, Column("s", "varchar", "varchar(300)", True, charset="utf8mb4"))
    wide = image_decoder(schema, [Mapped(LONGLONG), Mapped(VARCHAR, 1200)])
    assert image_decoder(schema, [Mapped(LONGLONG), Mapped(VARCHAR, 1200)]) is wide
    narrow = image_decoder(schema, [Mapped(LONGLONG), Mapped(VARCHAR, 200)])  # one length byte
    assert narrow is not wide
    image = b"\x00" + struct.pack("<q", 1) + bytes([2]) + b"ab"
    assert list(decode_images(narrow, image)) == [(1, "ab")]
    latin = table(ID, Column("s", "varchar", "varchar(300)", True, charset="latin1"))
    assert image_decoder(latin, [Mapped(LONGLONG), Mapped(VARCHAR, 1200)]) is not wide


def test_unsigned_columns_decode_unsigned_and_bigint_unsigned_as_decimal() -> None:
    schema = table(
        Column("u", "bigint", "bigint(20) unsigned", False),
        Column("i", "int", "int(10) unsigned", False),
    )
    decode = image_decoder(schema, [Mapped(LONGLONG), Mapped(LONG)])
    image = b"\x00" + struct.pack("<QI", 2**64 - 1, 2**32 - 1)
    assert list(decode_images(decode, image)) == [(Decimal(2**64 - 1), 2**32 - 1)]


@pytest.mark.parametrize(
    ("precision", "scale", "packed", "value"),
    [
        # MySQL's documented example: DECIMAL(14,4) 1234567890.1234 → 0x810DFB38D204D2
        (14, 4, bytes.fromhex("810DFB38D204D2"), "1234567890.1234"),
        (14, 4, bytes.fromhex("7EF204C72DFB2D"), "-1234567890.1234"),
        (10, 0, bytes.fromhex("8000000001"), "1"),
        (4, 4, bytes.fromhex("8001"), "0.0001"),
    ],
)
def test_packed_decimal(precision: int, scale: int, packed: bytes, value: str) -> None:
    schema = table(Column("d", "decimal", f"decimal({precision},{scale})", False, precision, scale))
    decode = image_decoder(schema, [Mapped(NEWDECIMAL, precision=precision, decimals=scale)])
    assert list(decode_images(decode, b"\x00" + packed)) == [(Decimal(value),)]


def _time2(micros: int, fsp: int) -> bytes:
    """TIME2 packing as MySQL's my_time_packed_to_binary does it."""
    negative, micros = micros < 0, abs(micros)
    seconds, fraction = divmod(micros, 1_000_000)
    hours, rest = divmod(seconds, 3600)
    whole = hours << 12 | (rest // 60) << 6 | rest % 60
    size = (fsp + 1) // 2
    frac_units = fraction // 10 ** (6 - 2 * size) if size else 0
    packed = (whole << (8 * size)) | frac_units
    packed = -packed if negative else packed
    return (packed + (1 << (8 * (3 + size) - 1))).to_bytes(3 + size, "big")


@pytest.mark.parametrize("fsp", [0, 2, 3, 6])
@pytest.mark.parametrize(
    "micros", [0, 1_000_000, -1_000_000, -500_000, 3_020_000_000 + 999_999, -3_020_000_000]
)
def test_time2_round_trips_signed_fractional_times(fsp: int, micros: int) -> None:
    size = (fsp + 1) // 2
    micros -= (
        micros % (10 ** (6 - 2 * size)) if micros >= 0 else -((-micros) % 10 ** (6 - 2 * size))
    )
    schema = table(Column("t", "time", f"time({fsp})", False, datetime_precision=fsp))
    decode = image_decoder(schema, [Mapped(TIME2, fsp=fsp)])
    (row,) = decode_images(decode, b"\x00" + _time2(micros, fsp))
    sign = "-" if micros < 0 else ""
    value = abs(timedelta(microseconds=micros))
    hours, rest = divmod(int(value.total_seconds()), 3600)
    text = f"{sign}{hours:02d}:{rest // 60:02d}:{rest % 60:02d}"
    if fsp:
        text += f".{value.microseconds:06d}"[: fsp + 1]
    assert row == (text,)


def test_changed_layout_and_unsupported_encodings_are_refused() -> None:
    schema = table(Column("id", "int", "int(11)", False))
    with pytest.raises(SourceError, match="schema changed"):
        image_decoder(schema, [Mapped(VARCHAR, 40)])  # VARCHAR where the schema says INT
    with pytest.raises(SourceError, match="2 columns in the binlog"):
        image_decoder(schema, [Mapped(LONG), Mapped(LONG)])
    renamed = Mapped(LONG)
    renamed.name = "other"  # type: ignore[attr-defined]  # names logged (row metadata FULL)
    with pytest.raises(SourceError, match="named 'other' in the binlog"):
        image_decoder(schema, [renamed])


def test_mysql_binary_json_decodes_to_mysql_text() -> None:
    """MySQL's binary JSON {"a": 1}: a small object, one key entry, one inline int16 value."""
    document = bytes([0x00]) + struct.pack("<HHHHBH", 1, 12, 11, 1, 0x05, 1) + b"a"
    schema = table(Column("j", "json", "json", False))
    decode = image_decoder(schema, [Mapped(245, length_size=4)])
    image = b"\x00" + struct.pack("<I", len(document)) + document
    assert list(decode_images(decode, image)) == [('{"a": 1}',)]


def _object(**members: int) -> bytes:
    """MySQL's binary JSON of a small object of int16 values, keys in MySQL's order."""
    keys = sorted(members, key=lambda k: (len(k), k))
    head = 4 + 4 * len(keys) + 3 * len(keys)
    entries, at = b"", head
    for key in keys:
        entries += struct.pack("<HH", at, len(key))
        at += len(key)
    values = b"".join(struct.pack("<Bh", 0x05, members[k]) for k in keys)
    body = entries + values + "".join(keys).encode()
    return b"\x00" + struct.pack("<HH", len(keys), 4 + len(body)) + body


def _json_column(raw: bytes) -> bytes:
    return struct.pack("<I", len(raw)) + raw


def test_a_partial_json_update_is_applied_to_the_before_images_document() -> None:
    """Two JSON columns, the second one flagged (bit 1 of the partial bits): its diffs are
    applied in order to the before image's document, a member inserted taking its place by
    MySQL's order (key length, then bytes); the first column, not flagged, is its whole new
    value. An after image whose options lack PARTIAL_JSON has no partial bits."""
    schema = table(ID, Column("a", "json", "json", True), Column("b", "json", "json", True))
    mapped = [Mapped(LONGLONG), Mapped(245, length_size=4), Mapped(245, length_size=4)]
    diffs = (
        b"\x01\x04$.zz" + b"\x03\x05\x07\x00"  # INSERT zz: 7
        + b"\x00\x03$.b" + b"\x03\x05\x09\x00"  # REPLACE b: 9
        + b"\x02\x03$.c"  # REMOVE c
        + b"\x01\x03$.a" + b"\x03\x05\x01\x00"  # INSERT a: 1, before b by MySQL's order
    )  # fmt: skip
    before = (
        b"\x00"
        + struct.pack("<q", 5)
        + _json_column(_object(b=2))
        + _json_column(_object(c=3, b=2, bb=4))
    )
    after = b"\x01\x02" + b"\x00" + struct.pack("<q", 5) + _json_column(_object(x=1))
    after += _json_column(diffs)
    whole = b"\x00" + b"\x00" + struct.pack("<q", 6) + _json_column(_object(x=2))
    whole += _json_column(_object(y=3))
    images = list(partial_update_images(schema, mapped, before + after + before + whole))
    assert images == [
        (5, '{"b": 2}', '{"b": 2, "c": 3, "bb": 4}'),
        (5, '{"x": 1}', '{"a": 1, "b": 9, "bb": 4, "zz": 7}'),
        (5, '{"b": 2}', '{"b": 2, "c": 3, "bb": 4}'),
        (6, '{"x": 2}', '{"y": 3}'),
    ]


def test_a_partial_json_update_that_does_not_fit_its_document_is_refused() -> None:
    """A diff removing a member the document lacks (the before image is not what MySQL
    changed): a clear error naming the column, not a KeyError."""
    schema = table(ID, Column("a", "json", "json", True))
    mapped = [Mapped(LONGLONG), Mapped(245, length_size=4)]
    before = b"\x00" + struct.pack("<q", 5) + _json_column(_object(b=2))
    after = b"\x01\x01\x00" + struct.pack("<q", 5) + _json_column(b"\x02\x03$.c")
    with pytest.raises(SourceError, match=r"update of db\.t\.a cannot be applied .* --reset"):
        list(partial_update_images(schema, mapped, before + after))


def test_a_partial_json_update_of_a_null_document_is_refused() -> None:
    schema = table(ID, Column("a", "json", "json", True))
    mapped = [Mapped(LONGLONG), Mapped(245, length_size=4)]
    before = bytes([0b10]) + struct.pack("<q", 5)  # a NULL
    after = b"\x01\x01\x00" + struct.pack("<q", 5) + _json_column(b"\x02\x03$.c")
    with pytest.raises(SourceError, match=r"db\.t\.a has no document before it"):
        list(partial_update_images(schema, mapped, before + after))


def test_null_in_a_not_null_column_is_a_schema_change_not_a_misread() -> None:
    schema = table(ID, Column("n", "int", "int(11)", False))
    decode = image_decoder(schema, [Mapped(LONGLONG), Mapped(LONG)])
    image = bytes([0b10]) + struct.pack("<q", 1)  # n NULL: its 4 bytes are absent
    with pytest.raises(SourceError, match="NULL in a column captured as NOT NULL"):
        list(decode_images(decode, image))


def test_images_are_counted_from_widths_alone_with_nulls_long_lengths_and_absent_columns() -> None:
    """`count_images` walks what the decoder reads without a schema: a NULL takes no bytes, a
    VARCHAR wider than 255 bytes has a two-byte length, a decimal its packed width, and a
    column absent from the image (a non-FULL image) neither a null bit nor bytes."""
    columns = [
        Mapped(LONGLONG),
        Mapped(VARCHAR, 1200),
        Mapped(NEWDECIMAL, precision=14, decimals=4),
        Mapped(VARCHAR, 40),
    ]
    widths = image_widths(columns)
    assert widths == (8, -2, 7, -1)
    text = b"x" * 300
    full = b"\x00" + struct.pack("<q", 1) + struct.pack("<H", 300) + text + b"\x80" * 7 + b"\x02ab"
    nulls = bytes([0b1110]) + struct.pack("<q", 2)  # only the key
    assert count_images(widths, b"\x0f", full + nulls + full) == 3
    # Columns 0 and 3 present: a 1-byte null bitmap over two columns, then their values.
    partial = b"\x00" + struct.pack("<q", 3) + b"\x01z"
    assert count_images(widths, b"\x09", partial * 4) == 4
    assert count_images(widths, b"\x0f", b"") == 0


def test_images_of_many_null_bitmaps_are_counted_whatever_their_order() -> None:
    """Images of one event with random null bitmaps, lengths of one and two bytes and a random
    set of columns present, built value by value: each image's walk is planned once per
    bitmap (`count_images`), and a plan reused for a later image of the same bitmap must walk
    its own lengths."""
    rng = random.Random(28)
    for _ in range(200):
        widths = tuple(rng.choice((1, 2, 4, 8, 7, -1, -2)) for _ in range(rng.randint(1, 20)))
        present = [rng.random() < 0.8 for _ in widths]
        present[rng.randrange(len(widths))] = True  # an image holds one column at least
        columns = [w for w, p in zip(widths, present, strict=True) if p]
        null_bytes = (len(columns) + 7) // 8
        body, built = b"", rng.randint(0, 30)
        for _ in range(built):
            nulls = rng.getrandbits(len(columns)) if rng.random() < 0.5 else 0
            body += nulls.to_bytes(null_bytes, "little")
            for i, width in enumerate(columns):
                if nulls >> i & 1:
                    continue
                if width > 0:
                    body += bytes(rng.getrandbits(8) for _ in range(width))
                else:
                    length = rng.randint(0, 300 if width == -2 else 255)
                    body += length.to_bytes(-width, "little") + b"v" * length
        mask = sum(1 << i for i, p in enumerate(present) if p)
        bitmap = mask.to_bytes((len(widths) + 7) // 8, "little")
        assert count_images(widths, bitmap, body) == built
