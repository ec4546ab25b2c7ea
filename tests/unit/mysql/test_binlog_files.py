"""Binlog files read without a server: every event of real servers' files (fixtures/mysql-binlogs,
README there) decoded by python-mysql-replication's classes, with what binlake adds: compressed
transactions, tagged GTIDs, PREVIOUS_GTIDS text, whole JSON after partial updates, MINIMAL table
maps, and truncated or corrupt files refused at their byte offset."""

from __future__ import annotations

import struct
import zlib
from collections import Counter
from datetime import date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pymysqlreplication.json_binary import JsonDiffOperation

from binlake.errors import SourceError
from binlake.mysql.binlog_files import FileEvent, read_binlog_file
from binlake.mysql.json_values import apply_json_diffs

FIXTURES = Path(__file__).resolve().parents[3] / "fixtures" / "mysql-binlogs"
#: The GPL-licensed truncated files, read where the reference set is (not vendored here).
SHARED = Path("/work/shared/mysql-binlog-fixtures/rust_mysql_common")

#: Events per type code, in the file and inside its TRANSACTION_PAYLOADs: the output of the
#: reference set's stdlib walker (`inventory.py`, /work/shared/mysql-binlog-fixtures), which
#: frames events on its own, for each file.
INVENTORY: dict[str, tuple[dict[int, int], dict[int, int]]] = {
    "binlog-invisible-columns.000001": (
        {2: 5, 3: 1, 15: 1, 16: 3, 19: 3, 30: 2, 31: 1, 33: 5, 35: 1},
        {},
    ),
    "binlog_small_test": ({4: 1, 15: 1, 35: 1}, {}),
    "binlog_transaction_previous_GTID_no_tag.000001": ({4: 1, 15: 1, 35: 1}, {}),
    "binlog_transaction_with_GTID_TAG.000001": (
        {2: 1, 4: 1, 15: 1, 16: 1, 19: 1, 30: 1, 35: 1, 42: 1},
        {},
    ),
    "json-opaque.binlog": ({2: 3, 15: 1, 16: 1, 19: 8, 30: 8, 34: 3, 35: 1}, {}),
    "json.binlog.000001": ({2: 8, 15: 1, 16: 6, 19: 6, 30: 4, 31: 1, 34: 8, 35: 1, 39: 1}, {}),
    "mariadb-bin.000001": ({15: 1, 16: 2, 19: 2, 23: 2, 160: 2, 161: 1, 162: 2, 163: 1}, {}),
    "minimal_row_metadata.000001": ({2: 1, 4: 1, 15: 1, 16: 1, 19: 1, 30: 1, 34: 1, 35: 1}, {}),
    "mysql-bin.000057": (
        {2: 1, 15: 1, 33: 3, 35: 1, 40: 2},
        {2: 2, 16: 2, 19: 3, 29: 3, 30: 2, 31: 1},
    ),
    "mysql-bin.000080": ({2: 10, 15: 1, 16: 5, 19: 5, 30: 3, 32: 2, 33: 10, 35: 1}, {}),
    "mysql-bin.aurora-padding": ({2: 1, 15: 1, 34: 1, 35: 1, 100: 1}, {}),
    "mysql-bin.checksum-crc32": (
        {2: 60, 4: 1, 15: 1, 16: 60, 19: 60, 30: 34, 31: 20, 32: 6, 34: 60, 35: 1},
        {},
    ),
    "mysql-bin.checksum-none": (
        {2: 40, 3: 1, 15: 1, 16: 36, 19: 36, 30: 34, 31: 2, 34: 40, 35: 1},
        {},
    ),
    "mysql-bin.compressed": ({4: 1, 15: 1, 34: 1, 35: 1, 40: 1}, {2: 1, 16: 1, 19: 1, 31: 1}),
    "mysql-enum-string-set.000001": (
        {2: 5, 15: 1, 16: 3, 19: 3, 30: 1, 31: 1, 32: 1, 33: 5, 35: 1},
        {},
    ),
    "mysql_type_bit.000001": ({2: 3, 15: 1, 16: 1, 19: 1, 30: 1, 33: 3, 35: 1}, {}),
    "time_issue.000001": ({2: 1, 4: 1, 15: 1, 16: 1, 19: 1, 30: 1, 34: 1, 35: 1}, {}),
    "transaction_compression.000001": (
        {4: 1, 15: 1, 34: 1, 35: 1, 40: 1},
        {2: 1, 16: 1, 19: 1, 30: 1},
    ),
    "vector.binlog": ({2: 10, 3: 1, 15: 1, 16: 3, 19: 6, 30: 5, 32: 1, 34: 10, 35: 1}, {}),
}

WRITE, UPDATE, DELETE = 30, 31, 32


def events(name: str, **options: Any) -> list[FileEvent]:
    return list(read_binlog_file(FIXTURES / name, **options))


def row_images(name: str, type_code: int) -> list[dict[str, Any]]:
    return [r for e in events(name) if e.type_code == type_code for r in e.decoded.rows]


def test_every_vendored_file_is_in_the_inventory() -> None:
    vendored = {p.name for p in FIXTURES.iterdir() if p.name != "README.md"}
    assert vendored == set(INVENTORY)


@pytest.mark.parametrize("name", sorted(INVENTORY))
def test_each_file_decodes_every_event_inventory_counts(name: str) -> None:
    found = events(name)
    in_file = Counter(e.type_code for e in found if not e.in_payload)
    in_payloads = Counter(e.type_code for e in found if e.in_payload)
    assert (dict(in_file), dict(in_payloads)) == INVENTORY[name]
    rows_events = [e for e in found if e.type_code in (23, 30, 31, 32, 39)]
    assert all(e.decoded.rows for e in rows_events)
    assert {e.type_code for e in found if e.skipped} <= {100}  # only Aurora's padding


def test_aurora_padding_is_skipped_with_its_type_recorded() -> None:
    (padding,) = [e for e in events("mysql-bin.aurora-padding") if e.skipped]
    assert (padding.type_code, padding.decoded) == (100, None)


def test_compressed_transactions_decode_in_order_inside_their_payload() -> None:
    # rust_mysql_common src/binlog/mod.rs, binlog_event_roundtrip: transaction_compression's
    # payload holds QUERY, TABLE_MAP, WRITE_ROWS, XID, in that order.
    found = events("transaction_compression.000001")
    (payload,) = [e for e in found if e.type_code == 40]
    inner = [e for e in found if e.in_payload]
    assert [e.type_code for e in inner] == [2, 19, 30, 16]
    assert {e.offset for e in inner} == {payload.offset}
    assert inner[2].decoded.rows == [{"values": {"@1": 1}, "none_sources": {}}]


def test_rows_query_and_rows_inside_payloads_agree_with_their_statements() -> None:
    # apecloud/mysql-binlog-connector-rust's mysql-bin.000057 (its README in the reference set):
    # ROWS_QUERY `insert into b values(1)`, then `update test_table_3 set enum_field='large',
    # set_field='c', product_item_2='product_3_value' where product_id=55555`.
    found = events("mysql-bin.000057")
    queries = [e.decoded.query for e in found if e.type_code == 29]
    assert queries[0] == "insert into b values(1)"
    assert queries[1].startswith("update test_table_3 set enum_field='large', set_field='c'")
    (update,) = [r for e in found if e.type_code == UPDATE for r in e.decoded.rows]
    before, after = update["before_values"], update["after_values"]
    assert (after["@1"], before["@11"], after["@11"]) == (
        55555,
        "product_item_2_value",
        "product_3_value",
    )
    # MINIMAL metadata has no ENUM/SET strings: member numbers. The insert after it writes
    # enum 'large', set 'd'; the update keeps 'large' and sets 'c', the member before 'd'.
    assert (before["@7"], after["@7"], before["@8"], after["@8"]) == (4, 4, {4}, {3})
    # the file's transactions continue the set its PREVIOUS_GTIDS names
    uuid = "76f3e7be-6720-11ed-9cad-0242ac110002"
    assert [e.gtid_set for e in found if e.type_code == 35] == [f"{uuid}:1-10"]
    assert [e.gtid for e in found if e.type_code == 33] == [f"{uuid}:{n}" for n in (11, 12, 13)]


def test_tagged_gtids_and_previous_gtids_are_text() -> None:
    # rust_mysql_common 9.6.0 files (gtid_tagged_log_event_from_binlog,
    # untagged_previous_gtids_event_from_binlog); the tagged transaction follows the set it
    # continues (mytag:1-2, then mytag:3).
    tagged = events("binlog_transaction_with_GTID_TAG.000001")
    uuid = "55778904-0299-11f1-b1b8-4ef0c4956feb"
    assert [e.gtid_set for e in tagged if e.type_code == 35] == [f"{uuid}:1-13:mytag:1-2"]
    assert [e.gtid for e in tagged if e.type_code == 42] == [f"{uuid}:mytag:3"]
    untagged = events("binlog_transaction_previous_GTID_no_tag.000001")
    assert [e.gtid_set for e in untagged if e.type_code == 35] == [
        "b9b88c66-0755-11f1-9899-4a9da94c4d71:1-2"
    ]
    assert [e.gtid_set for e in events("json.binlog.000001") if e.type_code == 35] == [""]


def test_gtid_events_give_uuid_and_number_and_anonymous_ones_none() -> None:
    found = events("mysql_type_bit.000001")
    assert [e.gtid for e in found if e.type_code == 33] == [
        f"fbda2ad0-7c46-11ec-ae30-4ef7efc81a2a:{n}" for n in (1, 2, 3)
    ]
    assert {e.gtid for e in events("json.binlog.000001") if e.type_code == 34} == {None}


def test_enum_string_set_values_are_upstreams() -> None:
    # rust_mysql_common src/binlog/mod.rs, binlog_event_roundtrip, mysql-enum-string-set.000001:
    # the write's ENUM is member 1 and SET 0b101; the update's after image and the delete's
    # before image are ("field1", "field_2", member 2, 0b1010, the 300-character text).
    digits = "0123456789" * 10
    (write,) = row_images("mysql-enum-string-set.000001", WRITE)
    assert write["values"]["f1"] == digits
    assert (write["values"]["f3"], write["values"]["f4"], write["values"]["f5"]) == (
        "var1",
        {"one", "three"},
        "0123456789",
    )
    (update,) = row_images("mysql-enum-string-set.000001", UPDATE)
    (delete,) = row_images("mysql-enum-string-set.000001", DELETE)
    for image in (update["after_values"], delete["values"]):
        assert (image["f1"], image["f2"], image["f3"], image["f4"]) == (
            "field1",
            "field_2",
            "variant2",
            {"two", "four"},
        )
        assert image["f5"] == write["values"]["f2"]
    assert update["before_values"] == write["values"]


def test_bit_values_are_upstreams() -> None:
    # rust_mysql_common src/binlog/mod.rs, binlog_event_roundtrip, mysql_type_bit.000001:
    # [Bytes([0b100]), Bytes(b"foo"), Bytes([0b100000])]; the library reads BIT as bit text.
    (write,) = row_images("mysql_type_bit.000001", WRITE)
    a, b, c = write["values"].values()
    assert (int(a, 2), b, int(c, 2)) == (0b100, "foo", 0b100000)


def test_minimal_metadata_columns_are_numbered_signed_and_named_by_the_caller() -> None:
    # rust_mysql_common src/binlog/mod.rs (minimal_row_metadata, ≈ line 1168): the row's
    # column 4 counted from 0 (mysqlbinlog's @5), an INT UNSIGNED, is 3230202323.
    (write,) = row_images("minimal_row_metadata.000001", WRITE)
    assert write["values"]["@5"] == 3230202323
    assert write["none_sources"] == {"@2": "cols bitmap", "@4": "cols bitmap"}
    names = {("noria", "t1"): ["id", "b", "c", "d", "e"]}
    (named,) = [
        e for e in events("minimal_row_metadata.000001", column_names=names) if e.type_code == WRITE
    ]
    assert named.decoded.rows[0]["values"] == {
        "id": 1,
        "b": None,
        "c": "a",
        "d": None,
        "e": 3230202323,
    }


def test_a_schema_of_another_width_is_refused() -> None:
    with pytest.raises(SourceError, match=r"2 column names were given for noria\.t1"):
        events("minimal_row_metadata.000001", column_names={("noria", "t1"): ["id", "b"]})


def test_time_beyond_a_day_and_negative_is_upstreams() -> None:
    # rust_mysql_common src/binlog/mod.rs (time_issue, ≈ line 1196): Value::Time(true, 21, 3,
    # 48, 27, 0), i.e. -507:48:27.
    (write,) = row_images("time_issue.000001", WRITE)
    assert write["values"]["@1"] == -timedelta(hours=507, minutes=48, seconds=27)


def test_json_opaque_values_decode_a_time_beyond_a_day() -> None:
    # json-opaque.binlog (9.0.1, `test(a json)`): opaque DATE/DATETIME/TIME/DECIMAL members.
    # Values as decoded here (upstream's assertions are not in the reference set); the TIME is
    # 87:31:46.654321, which the library's own JSON decoder cannot make a datetime.time of.
    values = [r["values"]["a"] for r in row_images("json-opaque.binlog", WRITE)]
    assert values[1:5] == [
        {b"b": date(2012, 3, 18)},  # an opaque DATE: a date, as MySQL's JSON text shows it
        {b"c": datetime(2012, 3, 18, 11, 30, 45)},
        {b"c": timedelta(hours=87, minutes=31, seconds=46, microseconds=654321)},
        {b"d": Decimal("123.456")},
    ]
    assert values[6:] == [{b"e": [0, 1, True, False]}, {b"e": None}]


def test_vector_columns_read_as_their_float32_bytes() -> None:
    # vector.binlog (9.0.1, `foo(id SERIAL, vector_column VECTOR(3))`, `bar(id, VECTOR(2),
    # foo TEXT, VECTOR(4))`). Values as decoded here: upstream's are not in the reference set.
    writes = row_images("vector.binlog", WRITE)
    vector = writes[0]["values"]["vector_column"]
    assert [round(x, 5) for x in struct.unpack("<3f", vector)] == [1.1, 2.2, 3.3]
    bar = writes[3]["values"]  # the TEXT between VECTORs keeps its own charset: text, not bytes
    assert (bar["foo"], len(bar["vector_column"]), len(bar["vector_column2"])) == ("bar", 8, 16)


def test_a_partial_json_update_gives_the_json_a_full_update_would() -> None:
    # json.binlog.000001 (8.0.22, MINIMAL row image): `t(id, json_col JSON, name AS
    # (json_col->>'$.name'), age AS (json_col->'$.age'))`. The UPDATE_ROWS before it leaves each
    # row's JSON whole; the PARTIAL_UPDATE_ROWS then holds, per row, the key in its before image
    # and the diffs in its after image, beside the generated `age` a full update writes.
    (update,) = [e for e in events("json.binlog.000001") if e.type_code == UPDATE]
    held = {r["after_values"]["@1"]: r["after_values"]["@2"] for r in update.decoded.rows}
    (partial,) = [e for e in events("json.binlog.000001") if e.type_code == 39]
    for row in partial.decoded.rows:
        key, after = row["before_values"]["@1"], row["after_values"]
        diffs = after["@2"]
        assert [(d.op, d.path) for d in diffs] == [(JsonDiffOperation.Replace, b"$.age")]
        whole = apply_json_diffs(held[key], diffs)
        assert whole == {**held[key], b"age": after["@4"]}
        assert after["@4"] == held[key][b"age"] + 1
    assert len(partial.decoded.rows) == 6


def test_a_full_row_image_partial_update_is_made_whole_in_the_event(tmp_path: Path) -> None:
    # No real file has a PARTIAL_UPDATE_ROWS under binlog_row_image=FULL; this one is built
    # from json.binlog.000001's own FORMAT_DESCRIPTION and TABLE_MAP (id, json_col, name, age),
    # its rows as MySQL lays them out: before image {"a": 1}; after image two diffs.
    real = fixture_bytes("json.binlog.000001")
    fde, table_map = real[4:125], real[3691:3750]
    table_id = table_map[19:25]
    small_object = bytes.fromhex("00 0100 0c00 0b00 0100 050100") + b"a"  # {"a": 1}
    diffs = b"\x00\x03$.a\x03\x05\x02\x00" + b"\x01\x03$.b\x03\x05\x03\x00"  # a=2, +b=3
    before = b"\x0c" + struct.pack("<iI", 7, len(small_object)) + small_object  # name, age NULL
    after = b"\x01\x01\x0c" + struct.pack("<iI", 7, len(diffs)) + diffs  # PARTIAL_JSON, bit 0
    body = table_id + b"\x00\x00\x02\x00" + b"\x04\x0f\x0f" + before + after
    header = struct.pack("<IBIIIH", 0, 39, 1, 19 + len(body) + 4, 0, 0)
    event = header + body + struct.pack("<I", zlib.crc32(header + body))
    built = tmp_path / "partial.000001"
    built.write_bytes(b"\xfebin" + fde + table_map + event)
    (partial,) = [e for e in read_binlog_file(built) if e.type_code == 39]
    (row,) = partial.decoded.rows
    assert row["before_values"]["@2"] == {b"a": 1}
    assert row["after_values"]["@2"] == {b"a": 2, b"b": 3}
    assert row["after_values"]["@1"] == 7


def fixture_bytes(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def fde_end(data: bytes) -> int:
    return 4 + struct.unpack_from("<I", data, 4 + 9)[0]


@pytest.mark.parametrize(
    ("cut", "offset", "what"),
    [
        (lambda d: d[:14], 4, "ends inside an event header"),  # as binlog_truncated_event
        (lambda d: d[: fde_end(d) + 9], None, "ends inside an event header"),
        (lambda d: d[: fde_end(d) + 25], None, "the event ends after 25 of its"),
        (lambda d: d[:200] + bytes([d[200] ^ 1]) + d[201:], None, "CRC32"),
    ],
    ids=["header", "after-fde", "body", "corrupt"],
)
def test_truncated_or_corrupt_files_are_refused_at_their_offset(
    tmp_path: Path, cut: Any, offset: int | None, what: str
) -> None:
    data = fixture_bytes("minimal_row_metadata.000001")
    broken = tmp_path / "broken.000001"
    broken.write_bytes(cut(data))
    at = offset if offset is not None else fde_end(data)
    if what == "CRC32":
        at = max(p for p in _event_offsets(data) if p <= 200)
    with pytest.raises(SourceError, match=rf"{broken} at byte offset {at}: .*{what}"):
        list(read_binlog_file(broken))


def _event_offsets(data: bytes) -> list[int]:
    offsets, position = [], 4
    while position < len(data):
        offsets.append(position)
        position += struct.unpack_from("<I", data, position + 9)[0]
    return offsets


def test_a_file_without_the_magic_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_bytes(b"hello world")
    with pytest.raises(SourceError, match="does not begin with"):
        list(read_binlog_file(other))


@pytest.mark.skipif(not SHARED.exists(), reason="the reference set is not on this machine")
@pytest.mark.parametrize(
    ("name", "offset"),
    [("binlog_truncated_event.000001", 4), ("binlog_truncated_prev_gtid_event.000001", 120)],
)
def test_upstreams_truncated_files_are_refused(name: str, offset: int) -> None:
    # GPL-licensed (MySQL's std_data), so read from the reference set, not vendored.
    with pytest.raises(SourceError, match=rf"{name} at byte offset {offset}: the file ends"):
        list(read_binlog_file(SHARED / name))
