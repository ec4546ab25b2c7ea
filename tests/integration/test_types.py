"""Every column type and every orderable key type lands exactly as the source holds it.

`fixtures/types.sql` holds every MySQL/MariaDB column type with its edge values, and tables keyed
by every orderable type. Each run snapshots them while writers race the snapshot, then rewrites
every row (binlog_row_image=FULL: every value passes through the binlog decoder), inserts rows
that exist only in the binlog and deletes some, and streams. Silver must then equal the source.

The oracle is the server itself, never binlake's normalisers: each source column is rendered by
SQL (`CAST(… AS CHAR)`, `HEX(…)`, `DATE_FORMAT(…)`, `CAST(FLOAT AS DOUBLE)`), silver's values are
rendered the same way in Python, and the two DataFrames of text are compared with chispa.
Zero dates are the one documented difference: they land as NULL.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from chispa import assert_df_equality
from pyspark.sql import types as T

from binlake.jobs import commands

from .connect_server import run_remote
from .replay import connect
from .type_tables import TABLES, load_type_tables

pytestmark = pytest.mark.integration

#: Rows that exist only in the binlog (inserted after the snapshot), per table.
BINLOG_INSERTS = {
    "key_datetime": "INSERT INTO key_datetime VALUES ('2001-10-28 02:30:00.000003', 11), "
    "('2001-10-28 03:30:00', 12)",
    "key_timestamp": "INSERT INTO key_timestamp VALUES ('2001-10-28 06:00:00.002', 11), "
    "('2001-10-28 07:30:00', 12)",
    "key_decimal": "INSERT INTO key_decimal VALUES (-0.000002, 11), (1.500001, 12)",
    "key_enum": "INSERT INTO key_enum VALUES ('gamma', 11)",
    "key_unsigned": "INSERT INTO key_unsigned VALUES (9223372036854775806, 11), "
    "(18446744073709551613, 12)",
    "key_date": "INSERT INTO key_date VALUES ('1000-01-02', 11), ('2001-10-29', 12)",
    "key_binary": "INSERT INTO key_binary VALUES (_binary 0x0001, 11), (_binary 0xFE, 12)",
    "key_latin1": "INSERT INTO key_latin1 VALUES (_binary 0x8D, 11), (_binary 0x90, 12)",
    "key_composite": "INSERT INTO key_composite VALUES ('2001-10-28 02:30:00', 'high', 'b', 1, 11)",
}
#: Seconds between the racing writer's rounds (19 changes each).
WRITE_PAUSE = 0.02
_TEMPORAL = {"date": "%Y-%m-%d", "datetime": "%Y-%m-%d %H:%i:%s.%f", "timestamp": None}
_BINARY = {
    "binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob", "geometry", "point",
    "linestring", "polygon", "multipoint", "multilinestring", "multipolygon",
    "geometrycollection",
}  # fmt: skip


def _columns(db_env: dict[str, str], database: str, table: str) -> list[tuple[str, str, bool]]:
    """(name, data type, in the primary key) of each column, in order."""
    with connect(db_env) as conn, conn.cursor() as cur:
        cur.execute(
            "SELECT column_name, data_type, column_key = 'PRI' FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
            (database, table),
        )
        return [(str(n), str(t), bool(k)) for n, t, k in cur.fetchall()]


def _rendered_by_server(name: str, data_type: str) -> str:
    """SQL that renders a column as the text silver's value must render to."""
    column = f"`{name}`"
    if data_type in ("float", "double"):
        return f"CAST({column} AS DOUBLE)"  # the exact stored value (FLOAT's text keeps 6 digits)
    if data_type in ("bit", "year"):
        return f"CAST({column} + 0 AS CHAR)"  # as numbers: YEAR 0000 is 0
    if data_type in _BINARY:
        return f"HEX({column})"
    if data_type in _TEMPORAL:
        fmt = _TEMPORAL[data_type] or "%Y-%m-%d %H:%i:%s.%f"
        # Zero dates have no Spark value: binlake lands them as NULL
        # (docs/lakehouse.md#how-each-type-lands).
        return f"IF(YEAR({column}) = 0, NULL, DATE_FORMAT({column}, '{fmt}'))"
    return f"CONVERT({column} USING utf8mb4)"


def _rendered(value: Any) -> str | None:
    """A silver value (as PySpark collects it) rendered like `_rendered_by_server`."""
    if value is None:
        return None
    if isinstance(value, bool):
        return str(int(value))
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, Decimal):
        return format(value, "f")
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC).replace(tzinfo=None)
        return value.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex().upper()
    return str(value)


def _text_frame(spark: Any, names: list[str], rows: list[tuple[Any, ...]]) -> Any:
    schema = T.StructType([T.StructField(n, T.StringType(), True) for n in names])
    return spark.createDataFrame([tuple(_rendered(v) for v in r) for r in rows], schema)


def assert_silver_renders_as_source(
    spark: Any, db_env: dict[str, str], config: Any, table: str
) -> None:
    """Silver's `table` rendered as text equals the source's as the server renders it (chispa).
    The oracle is the server, not binlake's normalisers (those of
    `assertions.assert_silver_equals_source`)."""
    columns = _columns(db_env, config.source.database, table)
    names = [n for n, _, _ in columns]
    select = ", ".join(_rendered_by_server(n, t) for n, t, _ in columns)
    with connect(db_env, config.source.database) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT {select} FROM `{table}`")
        expected = list(cur.fetchall())
    source = _text_frame(spark, names, expected)
    silver_path = config.lake.path("silver", config.source.database, table)
    frame = spark.read.format("delta").load(silver_path)
    silver = frame.select(*[f"`{n}`" for n in names]).collect()
    # TIMESTAMP values collect as naive datetimes in this process's zone: make them UTC first.
    instants = {f.name for f in frame.schema.fields if isinstance(f.dataType, T.TimestampType)}
    rows = [
        tuple(
            v.astimezone(UTC) if n in instants and isinstance(v, datetime) else v
            for n, v in zip(names, r, strict=True)
        )
        for r in silver
    ]
    actual = _text_frame(spark, names, rows)
    key = [n for n, _, in_key in columns if in_key]
    differences = _differences(actual.collect(), source.collect(), key)
    assert not differences, f"silver {table} differs from the source:\n" + "\n".join(differences)
    assert_df_equality(actual, source, ignore_row_order=True, ignore_nullable=True)


def _differences(actual: list[Any], expected: list[Any], key: list[str]) -> list[str]:
    """Readable cell-level differences (chispa's table of 80-column rows is not)."""
    ours = {tuple(r[k] for k in key): r.asDict() for r in actual}
    theirs = {tuple(r[k] for k in key): r.asDict() for r in expected}
    lines = [f"  key {k}: only in silver" for k in ours.keys() - theirs.keys()]
    lines += [f"  key {k}: missing from silver" for k in theirs.keys() - ours.keys()]
    for k in ours.keys() & theirs.keys():
        lines += [
            f"  key {k} column {c}: silver {ours[k][c]!r:.80} source {v!r:.80}"
            for c, v in theirs[k].items()
            if ours[k][c] != v
        ]
    return sorted(lines)


@contextmanager
def racing_writer(db_env: dict[str, str], database: str) -> Iterator[None]:
    """Updates of every table's rows in a loop while the caller snapshots."""
    stop = threading.Event()

    def write() -> None:
        with connect(db_env, database) as conn, conn.cursor() as cur:
            while not stop.is_set():
                cur.execute("UPDATE all_types SET f_nn = f_nn + 1 WHERE id = 1")
                for table in TABLES[1:]:
                    cur.execute(f"UPDATE `{table}` SET v = v + 1 ORDER BY v LIMIT 2")
                # Paced: a chunk read still meets many rounds, and the stream does not have to
                # replay the hundreds of thousands of changes an unpaced writer makes.
                stop.wait(WRITE_PAUSE)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


def rewrite_through_binlog(db_env: dict[str, str], database: str) -> None:
    """Every row rewritten (its full images go through the binlog), binlog-only rows, deletes."""
    with connect(db_env, database) as conn, conn.cursor() as cur:
        cur.execute("SET time_zone = '+05:30', sql_mode = 'NO_ENGINE_SUBSTITUTION'")
        cur.execute("UPDATE all_types SET f_nn = f_nn + 1")
        names = [n for n, _, _ in _columns(db_env, database, "all_types")][1:]
        copied = ", ".join(f"`{n}`" for n in names)
        cur.execute(f"INSERT INTO all_types (id, {copied}) SELECT id + 10, {copied} FROM all_types")
        cur.execute("DELETE FROM all_types WHERE id = 13")
        for table in TABLES[1:]:
            cur.execute(f"UPDATE `{table}` SET v = v + 100")
            cur.execute(BINLOG_INSERTS[table])
            cur.execute(f"DELETE FROM `{table}` ORDER BY v LIMIT 1")


def _config_file(config: Any, path: Path) -> Path:
    path.write_text(yaml.safe_dump(config.model_dump(mode="json")))
    return path


@pytest.mark.parametrize(
    "remote",
    # Spark Connect with a Paris session time zone: test_spark_connect runs the fast path.
    [False, pytest.param(True, marks=pytest.mark.soak)],
    ids=["in-process", "connect-tz-paris"],
)
def test_every_type_and_key_lands_as_the_source_holds_it(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    make_config: Callable[..., Any],
    tmp_path: Path,
    request: pytest.FixtureRequest,
    remote: bool,
) -> None:
    """In this process, and as Spark Connect clients in another time zone than the tests'
    session (the clients and the server's Python workers), through a Spark Connect server."""
    load_type_tables(db_env, database)
    # Chunks of two rows put a chunk boundary between every pair of keys of each type; the
    # Spark Connect run checks the values, which larger chunks read the same.
    chunk_size = 64 if remote else 2
    config = make_config(
        snapshot={"chunk_size": chunk_size, "parallelism": 2}, stream={"trigger_interval": "1s"}
    )
    config_file = _config_file(config, tmp_path / "binlake.yml")
    with racing_writer(db_env, database):
        if remote:
            run_remote(request.getfixturevalue("spark_remote"), config_file, "snapshot")
        else:
            commands.snapshot(spark, config)
    rewrite_through_binlog(db_env, database)
    if remote:
        run_remote(
            request.getfixturevalue("spark_remote"), config_file, "stream", "--available-now"
        )
    else:
        commands.stream(spark, config, available_now=True)
    for table in TABLES:
        assert_silver_renders_as_source(spark, db_env, config, table)
