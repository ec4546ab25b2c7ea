"""The checks the integration tests share: silver (and bronze, chunk by chunk) equal to the
source as the oracle of tests/integration/replay.py reads it, and the password found nowhere.

Rows are compared by (collation-folded) key, value by value: the source is read with PyMySQL and
normalised with `binlake.model.typemap` (the spec of how a value lands in Delta). TIMESTAMP values
are compared as aware UTC instants on both sides: the normaliser makes the source's aware, and
Spark returns naive datetimes in the Python process's local zone, which `astimezone` turns into
the same instant. The chispa checks compare silver with the source column by column, as
information_schema types them, and the changelog's changes by offset and operation.
"""

from __future__ import annotations

import base64
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.lake.paths import ledger_path
from binlake.lake.tables import lake_table
from binlake.model.typemap import spark_schema
from binlake.snapshot.ledger import Ledger

from .replay import Oracle, connect, fold_ci, identity, offset_of, read_binlog, states_at

ORACLE_SERVER_ID = 990_000  # outside every make_config range (6000..25999)
FOLDS: dict[str, Callable[[Any], Any]] = {"accounts": fold_ci}


# ---------------------------------------------------------------------------------------------
# Silver equals the source


def source_oracle(db_env: dict[str, str], database: str, table: str) -> Oracle:
    with connect(db_env, database) as conn:
        return Oracle.load(conn, database, table, fold=FOLDS.get(table, identity))


def instant_columns(oracle: Oracle) -> set[int]:
    fields = spark_schema(oracle.schema).fields
    return {i for i, f in enumerate(fields) if isinstance(f.dataType, T.TimestampType)}


def canonical(row: tuple[Any, ...], instants: set[int]) -> tuple[Any, ...]:
    """TIMESTAMP values as aware UTC instants (naive ones are in this process's local zone)."""
    return tuple(
        v.astimezone(UTC) if i in instants and isinstance(v, datetime) else v
        for i, v in enumerate(row)
    )


def source_rows(db_env: dict[str, str], oracle: Oracle) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    instants = instant_columns(oracle)
    with connect(db_env, oracle.schema.database) as conn:
        return {k: canonical(r, instants) for k, r in oracle.rows(conn).items()}


def silver_rows(
    spark: Any, config: Any, oracle: Oracle, version: int | None = None
) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """Silver's data columns keyed by (collation-folded) row key; asserts keys are unique."""
    options = {"versionAsOf": str(version)} if version is not None else {}
    silver = lake_table(config.lake, "silver", config.source.database, oracle.schema.name)
    frame = silver.read(spark, **options)
    instants = instant_columns(oracle)
    # By field name: names may hold dots and backticks.
    rows = [canonical(tuple(r[c] for c in oracle.columns), instants) for r in frame.collect()]
    keys = Counter(oracle.key(r) for r in rows)
    duplicated = [k for k, n in keys.items() if n > 1]
    assert not duplicated, f"silver {oracle.schema.name} holds keys twice: {duplicated[:5]}"
    return {oracle.key(r): r for r in rows}


def describe_difference(actual: dict[Any, Any], expected: dict[Any, Any], what: str) -> str:
    missing = sorted(set(expected) - set(actual), key=repr)
    extra = sorted(set(actual) - set(expected), key=repr)
    differing = [k for k in expected if k in actual and actual[k] != expected[k]]
    lines = [
        f"{what}: {len(actual)} rows vs {len(expected)} expected",
        f"missing {len(missing)} keys {missing[:5]}",
        f"extra {len(extra)} keys {extra[:5]}",
        f"{len(differing)} rows differ",
    ]
    lines += [f"  key {k}: got {actual[k]} expected {expected[k]}" for k in differing[:3]]
    return "\n".join(lines)


def assert_silver_equals_source(
    spark: Any, db_env: dict[str, str], config: Any, table: str
) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    oracle = source_oracle(db_env, config.source.database, table)
    expected = source_rows(db_env, oracle)
    actual = silver_rows(spark, config, oracle)
    assert actual == expected, describe_difference(actual, expected, f"silver {table}")
    return actual


# ---------------------------------------------------------------------------------------------
# Bronze: each chunk as of its high watermark, and the whole table


def bronze_path(config: Any, table: str) -> str:
    return config.lake.path("bronze", config.source.database, table)


def _bronze_rows(spark: Any, config: Any, oracle: Oracle) -> list[tuple[tuple[Any, ...], Any]]:
    """(data row, Spark row) for every bronze row of the oracle's table."""
    frame = spark.read.format("delta").load(bronze_path(config, oracle.schema.name))
    columns = oracle.columns
    result = []
    for r in frame.collect():  # by field name: names may hold dots and backticks
        result.append((tuple(r[c] for c in columns), r))
    return result


def describe_bronze_difference(actual: dict[Any, Any], expected: dict[Any, Any]) -> str:
    missing = sorted(set(expected) - set(actual), key=repr)[:5]
    extra = sorted(set(actual) - set(expected), key=repr)[:5]
    differing = [k for k in expected if k in actual and actual[k] != expected[k]][:3]
    lines = [f"missing keys {missing}", f"extra keys {extra}"]
    lines += [f"key {k}: bronze {actual[k]} != source {expected[k]}" for k in differing]
    return "; ".join(lines)


def assert_chunks_match_replay(
    spark: Any,
    db_env: dict[str, str],
    config: Any,
    oracle: Oracle,
    initial: dict[Any, Any],
    start: tuple[str, int],
) -> dict[str, int]:
    """Every chunk's bronze rows equal the source's rows of its range as of its HW, exactly."""
    table = f"{oracle.schema.database}.{oracle.schema.name}"
    chunks = Ledger(spark, ledger_path(config)).chunks(table)
    assert chunks, "the ledger has no chunks"
    assert all(c.finished for c in chunks), [c for c in chunks if not c.finished]
    by_id = {c.chunk_id: c for c in chunks}
    hws = {c.chunk_id: offset_of(c.hw.file, c.hw.pos) for c in chunks}
    assert min(hws.values()) >= offset_of(*start), "a chunk HW precedes the initial offset"
    changes = read_binlog(db_env, oracle, start, max(hws.values()), ORACLE_SERVER_ID)
    states = states_at(initial, changes, hws.values(), oracle)

    by_chunk: dict[int, dict[Any, Any]] = {c.chunk_id: {} for c in chunks}
    seen: Counter[Any] = Counter()
    for row, spark_row in _bronze_rows(spark, config, oracle):
        chunk_id = spark_row["_chunk_id"]
        assert chunk_id in by_chunk, f"bronze row of unknown chunk {chunk_id}"
        key = oracle.key(row)
        assert key not in by_chunk[chunk_id], f"key {key} twice in chunk {chunk_id}"
        by_chunk[chunk_id][key] = row
        seen[key] += 1
        chunk = by_id[chunk_id]
        assert (spark_row["_hw_file"], spark_row["_hw_pos"]) == (chunk.hw.file, chunk.hw.pos)
    twice = [k for k, n in seen.items() if n > 1]
    assert not twice, f"keys in more than one chunk: {twice[:10]}"

    raced = replayed = 0
    for chunk in chunks:
        hw = hws[chunk.chunk_id]
        lw = offset_of(chunk.lw.file, chunk.lw.pos)
        expected = {
            k: r
            for k, r in states[hw].items()
            if oracle.in_range(r[oracle.split_index], chunk.range.start, chunk.range.end)
        }
        actual = by_chunk[chunk.chunk_id]
        assert actual == expected, (
            f"chunk {chunk.chunk_id} {chunk.range} (LW {chunk.lw}, HW {chunk.hw}) differs from "
            f"the source at its HW: {describe_bronze_difference(actual, expected)}"
        )
        assert chunk.rows == len(expected), (chunk.chunk_id, chunk.rows, len(expected))
        raced += hw > lw
        replayed += any(lw < c.offset <= hw for c in changes)
    summary = {
        "chunks": len(chunks),
        "rows": sum(len(v) for v in by_chunk.values()),
        "chunks_with_hw_after_lw": raced,
        "chunks_that_replayed_binlog": replayed,
        "binlog_changes_replayed_by_oracle": len(changes),
    }
    print(f"\n{table}: {summary}")
    return summary


def assert_bronze_equals_source(
    spark: Any, db_env: dict[str, str], config: Any, oracle: Oracle
) -> None:
    with connect(db_env) as conn:
        source = oracle.rows(conn)
    keys = Counter(oracle.key(row) for row, _ in _bronze_rows(spark, config, oracle))
    assert [k for k, n in keys.items() if n > 1] == []
    bronze = {oracle.key(row): row for row, _ in _bronze_rows(spark, config, oracle)}
    assert bronze == source, describe_bronze_difference(bronze, source)


# ---------------------------------------------------------------------------------------------
# The password leaks nowhere


def leak_forms(password: str) -> list[bytes]:
    """The password as bytes, hex, and base64 wherever it starts within an encoded buffer."""
    raw = password.encode()
    forms = [raw, raw.hex().encode()]
    for shift in range(3):
        encoded = base64.b64encode(b"\0" * shift + raw)
        # Drop the characters that also encode the padding bytes before and after it.
        forms.append(encoded[(shift * 4 + 2) // 3 + 1 : -4])
    return forms


def assert_no_leak(password: str, what: str, data: bytes | str) -> None:
    blob = data.encode(errors="replace") if isinstance(data, str) else data
    for form in leak_forms(password):
        assert form not in blob, f"the password ({form!r}) leaked into {what}"


# ---------------------------------------------------------------------------------------------
# chispa checks: silver equals the source column by column, the changelog holds each change once


_SPARK_TYPES = {
    "int": T.IntegerType(),
    "bigint": T.LongType(),
    "varchar": T.StringType(),
    "longtext": T.StringType(),
    "enum": T.StringType(),
    "longblob": T.BinaryType(),
    "decimal": None,  # from the column's precision and scale
}


def source_columns(sql: Any, table: str) -> list[tuple[str, T.DataType]]:
    columns = []
    for name, kind, precision, scale in sql(
        "SELECT column_name, data_type, numeric_precision, numeric_scale "
        "FROM information_schema.columns WHERE table_schema = DATABASE() AND table_name = %s "
        "ORDER BY ordinal_position",
        (table,),
    ):
        spark = _SPARK_TYPES[kind] or T.DecimalType(precision, scale)
        columns.append((name, spark))
    return columns


def assert_silver_is_source(
    spark: Any,
    sql: Any,
    config: Any,
    table: str,
    where: str | None = None,
    layer: str = "silver",
    source_where: str = "TRUE",
    database: str | None = None,
    routed_into: tuple[str, str] | None = None,
) -> list[str]:
    """Silver's rows (or bronze's; those matching `where`, if given), projected on the source's
    columns, equal the source's (those matching `source_where`; `sql` runs in `database`, by
    default `source.database`); returns the table's column names. `routed_into`: the
    (database, table) of a route's silver, whose rows of `database`.`table` are compared."""
    columns = source_columns(sql, table)
    names = [n for n, _ in columns]
    schema = T.StructType([T.StructField(n, t, True) for n, t in columns])
    quoted = ", ".join(f"`{n}`" for n in names)
    rows = sql(f"SELECT {quoted} FROM `{table}` WHERE {source_where}")
    expected = spark.createDataFrame(rows, schema)
    database = database or config.source.database
    silver = lake_table(config.lake, layer, *(routed_into or (database, table))).read(spark)
    if routed_into is not None:
        silver = silver.where((F.col("_source_db") == database) & (F.col("_source_table") == table))
    if where is not None:
        silver = silver.where(where)
    actual = silver.select(*[silver[f"`{n}`"].cast(t).alias(n) for n, t in columns])
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
    return [f.name for f in silver.schema.fields]


def assert_changelog_holds_each_change_once(
    spark: Any, config: Any, table: str, database: str | None = None
) -> None:
    """A change is its offset and operation: a key-changing update is a delete and an insert
    at one offset."""
    name = f"{table}__changelog"
    database = database or config.source.database
    changelog = lake_table(config.lake, "bronze", database, name).read(spark)
    assert changelog.count() == changelog.select("_binlake_offset", "_op").distinct().count()


def assert_lands_exactly(spark: Any, db_env: dict[str, str], config: Any, table: str) -> None:
    """Silver equals the source's `table` (chispa) and the changelog holds each change once."""
    with connect(db_env, config.source.database) as conn, conn.cursor() as cur:

        def sql(statement: str, args: Any = None) -> list[tuple[Any, ...]]:
            cur.execute(statement, args)
            return list(cur.fetchall())

        assert_silver_is_source(spark, sql, config, table)
    assert_changelog_holds_each_change_once(spark, config, table)
