"""`summary_of_records`: a small batch's per-table summary computed from its collected
change records on the driver, in place of `TableApply.summarise`'s Spark job. The cases are the
ones that would make the MERGE miss or double a row if the summary were wrong: deletes (the key
is in the before image), a batch of inserts alone told from one with another change (its MERGE
drops the matched clauses), a key changed twice (the batch then needs collapsing), a key spelt
in another case by the image, a composite key, more keys than the MERGE lists, text keys
ordered as Spark orders them, and the key types Python cannot type as Spark does (left to Spark).
Its equality with the Spark summary on the same batch is in tests/integration/test_silver_apply.py.
Which batches are collected at all (`batch_summary.collectable`): those of a small binlog range.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from pyspark.sql import Row
from pyspark.sql import types as T

from binlake.model.offsets import BinlogOffset, position_token
from binlake.model.schema import Column, TableSchema
from binlake.model.typemap import spark_schema
from binlake.silver import change_summary
from binlake.silver.change_summary import summary_of_records
from binlake.stream import batch_summary as summaries

ITEMS = TableSchema(
    "shop",
    "items",
    (Column("id", "bigint", "bigint(20)", False), Column("name", "varchar", "varchar(20)", True)),
    ("id",),
    "id",
)
LINES = TableSchema(
    "shop",
    "lines",
    (
        Column("order_id", "int", "int(11)", False),
        Column("sku", "varchar", "varchar(10)", False, charset="utf8mb4"),
        Column("qty", "int", "int(11)", True),
    ),
    ("order_id", "sku"),
    "order_id",
)


def _record(pos: int, op: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> Row:
    def image(values: dict[str, Any] | None) -> str | None:
        return None if values is None else orjson.dumps(values).decode()

    offset = position_token(BinlogOffset("bin.000001", pos), 0)
    return Row(_offset=offset, _op=op, _before=image(before), _after=image(after))


def test_a_deleted_key_is_read_from_the_before_image() -> None:
    records = [
        _record(400, "insert", None, {"id": 7, "name": "a"}),
        _record(300, "delete", {"id": 3, "name": "b"}, None),
        _record(500, "update", {"id": 5, "name": "c"}, {"id": 5, "name": "d"}),
    ]
    summary = summary_of_records(records, ITEMS, spark_schema(ITEMS))
    assert summary is not None
    assert summary["count"] == 3
    assert sorted(summary["keys"]) == [3, 5, 7]
    assert (summary["lo_0"], summary["hi_0"]) == (3, 7)
    assert summary["unique_keys"] is True
    assert summary["offset_lo"] == records[1]["_offset"]
    assert summary["offset_hi"] == records[2]["_offset"]
    assert summary["inserts_only"] is False


@pytest.mark.parametrize(
    ("ops", "inserts_only"),
    [
        (["insert", "insert", "insert"], True),
        (["insert", "update", "insert"], False),  # an update: the MERGE needs matched clauses
        (["insert", "insert", "delete"], False),  # the last one: all of them are looked at
    ],
)
def test_a_batch_is_inserts_only_when_every_change_is_an_insert(
    ops: list[str], inserts_only: bool
) -> None:
    records = [
        _record(
            100 + n,
            op,
            None if op == "insert" else {"id": n},
            None if op == "delete" else {"id": n},
        )
        for n, op in enumerate(ops)
    ]
    summary = summary_of_records(records, ITEMS, spark_schema(ITEMS))
    assert summary is not None and summary["inserts_only"] is inserts_only


def test_a_key_changed_twice_is_listed_once_and_the_batch_is_not_unique() -> None:
    records = [
        _record(100, "insert", None, {"id": 1, "name": "a"}),
        _record(200, "delete", {"id": 1, "name": "a"}, None),
        _record(300, "insert", None, {"id": 2, "name": "b"}),
    ]
    summary = summary_of_records(records, ITEMS, spark_schema(ITEMS))
    assert summary is not None
    assert sorted(summary["keys"]) == [1, 2]
    assert summary["unique_keys"] is False


def test_an_image_spelling_the_key_in_another_case_is_read_by_the_sources_spelling() -> None:
    # The source renamed `id` to `ID`: one column to MySQL, Spark and Delta (silver keeps `id`),
    # but the images spell it as the source does now, and JSON keys are case-sensitive.
    renamed = TableSchema(
        "shop", "items", (Column("ID", "bigint", "bigint(20)", False),), ("id",), "id"
    )
    columns = T.StructType([spark_schema(ITEMS)["id"]])
    records = [
        _record(100, "update", {"ID": 9}, {"ID": 9}),
        _record(200, "delete", {"ID": 4}, None),
    ]
    summary = summary_of_records(records, renamed, columns)
    assert summary is not None
    assert sorted(summary["keys"]) == [4, 9]


def test_a_composite_key_has_bounds_per_column_and_no_list() -> None:
    records = [
        _record(100, "insert", None, {"order_id": 2, "sku": "b", "qty": 1}),
        _record(200, "update", {"order_id": 1, "sku": "z", "qty": 1}, {"order_id": 1, "sku": "z"}),
        _record(300, "delete", {"order_id": 3, "sku": "a", "qty": 1}, None),
    ]  # fmt: skip
    summary = summary_of_records(records, LINES, spark_schema(LINES))
    assert summary is not None
    assert (summary["lo_0"], summary["hi_0"], summary["lo_1"], summary["hi_1"]) == (1, 3, "a", "z")
    assert "keys" not in summary and summary["unique_keys"] is False


def test_text_keys_are_ordered_as_spark_orders_them_by_their_utf8_bytes() -> None:
    text = TableSchema(
        "shop", "tags", (Column("tag", "varchar", "varchar(10)", False, charset="utf8mb4"),),
        ("tag",), "tag",
    )  # fmt: skip
    tags = ["Z", "a", "é", "𝄞", "\uffff"]  # below and above the BMP: UTF-16 would misorder 𝄞
    records = [_record(100 + i, "insert", None, {"tag": t}) for i, t in enumerate(tags)]
    summary = summary_of_records(records, text, spark_schema(text))
    assert summary is not None
    ordered = sorted(tags, key=lambda t: t.encode())
    assert (summary["lo_0"], summary["hi_0"]) == (ordered[0], ordered[-1])


def test_keys_past_the_list_limit_are_cut_one_past_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(change_summary, "MERGE_KEY_LIST_LIMIT", 3)
    records = [_record(100 + k, "insert", None, {"id": k, "name": None}) for k in range(10)]
    summary = summary_of_records(records, ITEMS, spark_schema(ITEMS))
    assert summary is not None
    assert len(summary["keys"]) == 4  # one past the limit: the MERGE names the range instead
    assert (summary["lo_0"], summary["hi_0"]) == (0, 9)
    assert summary["unique_keys"] is True


@pytest.mark.parametrize(
    ("data_type", "column_type"),
    [
        ("decimal", "decimal(10,2)"),  # JSON text, typed by Spark
        ("datetime", "datetime(6)"),
        ("timestamp", "timestamp"),  # epoch microseconds in JSON, an instant in silver
        ("varbinary", "varbinary(8)"),  # base64 in JSON
        ("double", "double"),  # -0.0 and 0.0: one key to SQL, two to a list
        ("bigint", "bigint(20) unsigned"),  # a decimal in silver
    ],
)
def test_a_key_python_would_type_otherwise_than_spark_is_left_to_spark(
    data_type: str, column_type: str
) -> None:
    table = TableSchema("shop", "t", (Column("k", data_type, column_type, False),), ("k",), "k")
    records = [_record(100, "insert", None, {"k": 1})]
    assert summary_of_records(records, table, spark_schema(table)) is None


def test_no_records_count_none() -> None:
    assert summary_of_records([], ITEMS, spark_schema(ITEMS)) == {"count": 0}


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (BinlogOffset("bin.000007", 4), BinlogOffset("bin.000007", 4 + 2**20), True),
        (BinlogOffset("bin.000007", 4), BinlogOffset("bin.000007", 5 + 2**20), False),
        # Across a rotation the bytes need the files' sizes: summarised by Spark.
        (BinlogOffset("bin.000007", 900), BinlogOffset("bin.000008", 300), False),
        (None, BinlogOffset("bin.000007", 300), False),  # the query's first batch
    ],
)
def test_only_a_batch_of_a_small_binlog_range_is_collected(
    start: BinlogOffset | None, end: BinlogOffset, expected: bool
) -> None:
    assert summaries.SMALL_BATCH_BYTES == 2**20
    assert summaries.collectable(start, end) is expected
