"""What `TableApply` knows of a table's row changes in a batch before it writes them: their
count, key and offset bounds and, for a one-column key, its distinct values and whether one
repeats. Computed by one Spark aggregate (`summary_of_changes`), or on the driver from the
change records a small batch's summary collected (`summary_of_records`); the MERGE names the
batch's keys by it (`keys_of_batch`), so Delta skips the silver files that cannot hold them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson
from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.lake.tables import column_name
from binlake.model.schema import TableSchema
from binlake.model.typemap import exact_key, key_literal

#: A batch with at most this many distinct keys of a single-column key MERGEs with `key IN
#: (...)`, which Delta's data skipping resolves to the files holding them; larger batches use
#: the key range.
MERGE_KEY_LIST_LIMIT = 1000

#: Key types whose value in a change record's JSON image (`change_record`) is the value
#: `summary_of_changes` collects: integers as JSON numbers, text as JSON strings. Others
#: (decimals as text, dates, instants, bytes, floats) are summarised by Spark.
_KEYS_AS_JSON = (T.ByteType, T.ShortType, T.IntegerType, T.LongType, T.StringType)


def summary_of_changes(
    typed: DataFrame, table: TableSchema, columns: T.StructType
) -> dict[str, Any]:
    """The summary of `typed` (`table`'s change records, images typed as `columns`) from one
    Spark aggregate."""
    limit = MERGE_KEY_LIST_LIMIT + 1
    key = table.key
    bounds = [
        exact_key(agg(_key_of(k)), columns[k].dataType).alias(f"{name}_{j}")
        for j, k in enumerate(key)
        for name, agg in (("lo", F.min), ("hi", F.max))
    ]
    # One key past the limit tells a list that fits from one that was cut short. Keys as
    # many as changes: each key changed once, and the MERGE needs no collapse. Not counted
    # (always collapsed): a composite key, and a floating-point one, whose -0.0 and 0.0 are
    # one key to SQL and two to a list.
    if len(key) == 1:
        kind = columns[key[0]].dataType
        distinct = F.array_distinct(F.collect_list(exact_key(_key_of(key[0]), kind)))
        countable = not isinstance(kind, T.FloatType | T.DoubleType)
        keys = [
            F.slice(distinct, 1, limit).alias("keys"),
            (F.lit(countable) & (F.size(distinct) == F.count(F.lit(1)))).alias("unique_keys"),
        ]
    else:
        keys = [F.lit(False).alias("unique_keys")]
    offsets = [F.min("_offset").alias("offset_lo"), F.max("_offset").alias("offset_hi")]
    inserts = F.coalesce(F.bool_and(F.col("_op") == "insert"), F.lit(False))
    row = typed.agg(
        F.count(F.lit(1)).alias("count"), *bounds, *offsets, *keys,
        inserts.alias("inserts_only"),
    ).collect()[0]  # fmt: skip
    return row.asDict()


def summary_of_records(
    records: Sequence[Row], table: TableSchema, columns: T.StructType
) -> dict[str, Any] | None:
    """What `summary_of_changes` computes, from `table`'s change records themselves (their
    `_offset`, `_before` and `_after`): the count, key and offset bounds and, for a one-column
    key, its distinct values (at most `MERGE_KEY_LIST_LIMIT` + 1) and whether none repeats. None
    where a key column's type is not one whose JSON value is its typed value (`_KEYS_AS_JSON`).
    An image's keys are spelt as the source spells its columns, as `typed_changes` reads them."""
    key = table.key
    if not all(isinstance(columns[k].dataType, _KEYS_AS_JSON) for k in key):
        return None
    if not records:
        return {"count": 0}
    spelt = {name.lower(): name for name in table.column_names}
    fields = [spelt.get(k.lower(), k) for k in key]
    keys = [_record_key(r, fields) for r in records]
    offsets = [r["_offset"] for r in records]
    summary: dict[str, Any] = {
        "count": len(records), "offset_lo": min(offsets), "offset_hi": max(offsets),
        "inserts_only": all(r["_op"] == "insert" for r in records),
    }  # fmt: skip
    for j in range(len(key)):
        values = [k[j] for k in keys if k[j] is not None]
        summary[f"lo_{j}"] = min(values, default=None)
        summary[f"hi_{j}"] = max(values, default=None)
    if len(key) == 1:
        distinct = list(dict.fromkeys(k[0] for k in keys if k[0] is not None))
        summary["keys"] = distinct[: MERGE_KEY_LIST_LIMIT + 1]
        summary["unique_keys"] = len(distinct) == len(records)
    else:
        summary["unique_keys"] = False
    return summary


def keys_of_batch(
    summary: Mapping[str, Any], key: tuple[str, ...], columns: T.StructType
) -> Column:
    """A target-only predicate naming the batch's keys: their list when short, else their
    range. The values are typed literals (never SQL text; see `typemap.exact_key`), which
    Delta uses to skip files by statistics."""
    keys = summary["keys"] if len(key) == 1 else None
    if keys is not None and len(keys) <= MERGE_KEY_LIST_LIMIT:
        kind = columns[key[0]].dataType
        # NULL matches no row (IN is never true for it, and Delta's skipping leaves it out),
        # but keeps one key a list: Spark turns `k IN (v)` into `k = v` and writes v into the
        # compiled code, where a list can be a set it passes by reference
        # (`spark.KEY_SETS_BY_REFERENCE`).
        literals = [*(key_literal(k, kind) for k in keys), key_literal(None, kind)]
        return F.col(column_name(key[0])).isin(literals)
    within = F.lit(True)
    for j, k in enumerate(key):
        kind = columns[k].dataType
        low, high = (key_literal(summary[f"{e}_{j}"], kind) for e in ("lo", "hi"))
        within = within & F.col(column_name(k)).between(low, high)
    return within


def _record_key(record: Row, fields: list[str]) -> tuple[Any, ...]:
    """A change record's key values (after image; before image for deletes, as `_key_of`)."""
    after = orjson.loads(record["_after"]) if record["_after"] is not None else {}
    if all(after.get(f) is not None for f in fields):
        return tuple(after[f] for f in fields)
    before = orjson.loads(record["_before"]) if record["_before"] is not None else {}
    return tuple(after[f] if after.get(f) is not None else before.get(f) for f in fields)


def _key_of(key: str) -> Column:
    """A change's key column value (after image; before image for deletes)."""
    return F.coalesce(F.col(f"_after.{column_name(key)}"), F.col(f"_before.{column_name(key)}"))
