"""Issue 12: catalog tables and URI lake roots, against a real MariaDB, its binlog and Delta.

With `lake.catalog` set to the test session's own catalog (`spark_catalog`: Delta's catalog,
managed tables in the session's temporary warehouse), bronze, the changelog and silver are
catalog tables `spark_catalog.bronze_<db>.<table>` and `spark_catalog.silver_<db>.<table>`, and
only `_system` (ledger, schema history, checkpoints) is written under `lake.root`. With a
`file://` URI as `lake.root`, the snapshot and the stream are killed and resume exactly once.
"""

from __future__ import annotations

import json
import random
import time
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import types as T

from binlake.jobs import commands
from binlake.lake.files import ArrowFiles, HadoopFiles, join
from binlake.lake.tables import PathTable, local_frame
from binlake.model.offsets import BinlogOffset
from binlake.snapshot.chunk_states import FINISHED, MARK, PENDING
from binlake.snapshot.chunks import ChunkRange
from binlake.snapshot.ledger import SCHEMA as LEDGER_SCHEMA
from binlake.snapshot.ledger import ChunkResult, Ledger

from .assertions import (
    assert_changelog_holds_each_change_once,
    assert_silver_equals_source,
    assert_silver_is_source,
)
from .child_runs import KILL_SNAPSHOT, run_killed, write_config
from .items import Racer, seed_items
from .replay import Writers, connect
from .workload import Workload, create_tables, seed

pytestmark = pytest.mark.integration

CATALOG = "spark_catalog"
ROWS = 120
#: Captured: an INT key, a composite key, column names that need column mapping (the workload's
#: writers also write `accounts`, which is left out to keep the test short).
CAPTURED = ["items", "order_lines", "notes"]
#: A table whose column names Delta takes only with column mapping.
NOTES = "CREATE TABLE notes (id INT PRIMARY KEY, `unit price` DECIMAL(8,2), `the note` TEXT)"


def test_hadoop_files_and_arrow_files_agree(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The driver's `HadoopFiles` and the planning process's `ArrowFiles` see the same files
    under a `file://` root, names holding `%`, `#`, `?` and spaces included; a replaced file
    leaves neither a temporary nor a Hadoop checksum file; a file is created only once. A
    missing file is answered without a Java exception (PySpark's classification of one cost
    ~14 ms of JVM round trips)."""
    driver, planner = HadoopFiles(spark), ArrowFiles()
    folder = join(tmp_path.as_uri(), "db `%s 'ü\"#?")
    path = join(folder, "t %20 #x.json")
    with monkeypatch.context() as absent:
        absent.setattr(HadoopFiles, "_missing", _no_java_exception)
        assert driver.read_text(path) is None and driver.modified(path) is None
        assert driver.names(folder) == []
    driver.write_text(path, "one")
    driver.write_text(path, "two")
    assert planner.read_text(path) == driver.read_text(path) == "two"
    assert driver.names(folder) == planner.names(folder) == ["t %20 #x.json"]
    modified = driver.modified(path)
    assert modified is not None and abs(modified - (planner.modified(path) or 0)) < 1
    driver.delete(path)
    driver.delete(path)
    assert not planner.exists(path) and not driver.exists(path)
    assert driver.create_text(path, "first") and not driver.create_text(path, "second")
    assert planner.read_text(path) == "first" and driver.names(folder) == ["t %20 #x.json"]


def test_a_path_table_that_is_not_there_is_answered_without_asking_delta(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No folder, or a folder without a Delta log: no table, and no Spark error raised to find
    out (PySpark classifies each through py4j, ~70 ms); an empty Delta log is no table either
    (Delta says so); a table written is found."""
    missing, bare, empty, table = (join(tmp_path.as_uri(), n) for n in ("m", "b", "e", "t"))
    (tmp_path / "b").mkdir()
    (tmp_path / "e" / "_delta_log").mkdir(parents=True)
    with monkeypatch.context() as absent:
        absent.setattr(PathTable, "_read", _no_delta_read)
        assert not PathTable(missing).exists(spark) and not PathTable(bare).exists(spark)
    assert not PathTable(empty).exists(spark)
    spark.range(3).write.format("delta").save(table)
    assert PathTable(table).exists(spark)


def test_a_local_frame_holds_what_spark_makes_of_the_same_rows(spark: Any) -> None:
    """`local_frame` (rows handed to Spark as Arrow) equals `createDataFrame(rows)` for every
    kind of column binlake writes from the driver, nulls and non-null columns included, and
    an empty frame keeps its schema."""
    schema = T.StructType(
        [
            T.StructField("k", T.IntegerType(), False),
            T.StructField("big", T.LongType()),
            T.StructField("s", T.StringType()),
            T.StructField("ts", T.TimestampType(), False),
            T.StructField("ntz", T.TimestampNTZType()),
            T.StructField("d", T.DateType()),
            T.StructField("dec", T.DecimalType(38, 9)),
            T.StructField("b", T.BinaryType()),
            T.StructField("flag", T.BooleanType()),
            T.StructField("x", T.DoubleType()),
            T.StructField("names", T.ArrayType(T.StringType())),
        ]
    )
    at = datetime(2026, 11, 29, 18, 30, 1, 123456, tzinfo=UTC)
    rows = [
        (1, 2**62, "é ✓", at, at.replace(tzinfo=None), date(1000, 1, 1),
         Decimal("-12345678901234567890123456789.123456789"), b"\x00\xff", True, -0.5,
         ["a", None]),
        (2, None, None, at, None, None, None, None, None, None, None),
    ]  # fmt: skip
    assert_df_equality(
        local_frame(spark, rows, schema), spark.createDataFrame(rows, schema), ignore_row_order=True
    )
    empty = local_frame(spark, [], schema)
    assert empty.schema == schema and empty.count() == 0


def test_the_ledger_appends_one_file_without_column_statistics(spark: Any, tmp_path: Path) -> None:
    """Each ledger commit adds one file whose statistics are its row count alone, and the
    chunks read back are the ones written."""
    ledger = Ledger(spark, str(tmp_path / "ledger"))
    ranges = [ChunkRange(None, 10), ChunkRange(10, 20), ChunkRange(20, None)]
    ledger.record_plans({"db.a": ("id", lambda: ranges), "db.b": ("id", lambda: ranges[:1])})
    lw, hw = BinlogOffset("mysql-bin.000001", 4), BinlogOffset("mysql-bin.000002", 120)
    ledger.mark_finished([ChunkResult("db.a", 1, lw, hw, 7), ChunkResult("db.b", 0, lw, hw, 3)])
    commits = sorted((tmp_path / "ledger" / "_delta_log").glob("*.json"))
    adds = [
        [json.loads(line)["add"] for line in c.read_text().splitlines() if '"add"' in line]
        for c in commits
    ]
    assert [len(a) for a in adds] == [1, 1]
    assert [json.loads(a[0]["stats"]) for a in adds] == [{"numRecords": 4}, {"numRecords": 2}]
    assert [
        (c.table, c.chunk_id, c.range, c.status, c.lw, c.hw, c.rows) for c in ledger.chunks()
    ] == [
        ("db.a", 0, ranges[0], PENDING, None, None, None),
        ("db.a", 1, ranges[1], FINISHED, lw, hw, 7),
        ("db.a", 2, ranges[2], PENDING, None, None, None),
        ("db.b", 0, ranges[0], FINISHED, lw, hw, 3),
    ]


def test_a_ledger_from_before_hw_gtid_gains_the_column_and_keeps_its_chunks(
    spark: Any, tmp_path: Path
) -> None:
    """A ledger written before each mark recorded its HW's GTID position: the next mark adds
    the column; the older mark reads back with an HW of no GTID position, the new one with its."""
    old_schema = T.StructType([f for f in LEDGER_SCHEMA.fields if f.name != "hw_gtid"])
    path = str(tmp_path / "ledger")
    lw, hw = BinlogOffset("mysql-bin.000001", 4), BinlogOffset("mysql-bin.000001", 90)
    now = datetime.now(UTC)
    rows = [
        ("db.a", 0, "id", None, "10", PENDING, None, None, None, None, None, now),
        ("db.a", 1, "id", "10", None, PENDING, None, None, None, None, None, now),
        ("db.a", 0, MARK, None, None, FINISHED, lw.file, lw.pos, hw.file, hw.pos, 5, now),
    ]
    local_frame(spark, rows, old_schema).write.format("delta").save(path)
    ledger = Ledger(spark, path)
    newer = BinlogOffset("mysql-bin.000001", 120, "0-1-7")
    ledger.mark_finished([ChunkResult("db.a", 1, lw, newer, 3)])
    first, second = ledger.chunks()
    assert first.finished and first.hw == hw and first.hw is not None and first.hw.gtid == ""
    assert second.finished and second.hw == newer and second.hw is not None
    assert second.hw.gtid == "0-1-7"


def _no_delta_read(table: PathTable, spark: Any, options: dict[str, str]) -> Any:
    raise AssertionError(f"Delta was asked for {table.path}, which has no Delta log")


def _no_java_exception(files: HadoopFiles, error: Exception) -> bool:
    raise AssertionError(f"a missing file was answered by a Java exception: {error}")


def _setup(db_env: dict[str, str], database: str) -> None:
    with connect(db_env, database) as conn, conn.cursor() as cur:
        create_tables(cur)
        seed(cur, ROWS, random.Random(1))
        cur.execute(NOTES)
        cur.executemany(
            "INSERT INTO notes VALUES (%s, %s, %s)", [(i, i + 0.5, f"n{i}") for i in range(40)]
        )


def _touch_notes(db_env: dict[str, str], database: str, round_: int) -> None:
    """Some updates, a delete and an insert on `notes`."""
    with connect(db_env, database) as conn, conn.cursor() as cur:
        cur.execute("UPDATE notes SET `the note` = %s WHERE id %% 3 = 0", (f"r{round_}",))
        cur.execute("DELETE FROM notes WHERE id = %s", (round_,))
        cur.execute("INSERT INTO notes VALUES (%s, 1.25, 'new')", (100 + round_,))


def _property(spark: Any, table: str, key: str) -> str | None:
    rows = spark.sql(f"SHOW TBLPROPERTIES {table}").collect()
    return next((r["value"] for r in rows if r["key"] == key), None)


def test_catalog_holds_bronze_changelog_and_silver(
    spark: Any, db_env: dict[str, str], database: str, make_config: Any, tmp_path: Path
) -> None:
    """Writers race the snapshot and the first stream run, more writes land before the second;
    a reset of one table is replaced in the catalog too. Every table is in the configured
    schemas, silver (read by name) equals the source, the changelog holds each change once and
    silver's Change Data Feed is on."""
    _setup(db_env, database)
    config = make_config(
        source={"tables": CAPTURED},
        lake={"catalog": CATALOG, "event_log": True},
        snapshot={"chunk_size": 100, "parallelism": 2, "chunks_per_commit": 2},
        stream={"trigger_interval": "1s"},
    )
    workload = Workload(ROWS)
    with Writers(db_env, database, workload.step, threads=2, max_ops=3000, pause_s=0.03):
        commands.snapshot(spark, config)
    with Writers(db_env, database, workload.step, threads=2, max_ops=2000, pause_s=0.05):
        _touch_notes(db_env, database, 1)
        commands.stream(spark, config, available_now=True)
    with Writers(db_env, database, workload.step, threads=2, max_ops=100, pause_s=0.01) as more:
        _touch_notes(db_env, database, 2)
        time.sleep(1.5)
    assert more.ops > 0
    commands.snapshot(spark, config, ["notes"], reset=True)
    commands.stream(spark, config, available_now=True)

    for table in CAPTURED:
        for name in (f"bronze_{database}.{table}", f"bronze_{database}.{table}__changelog",
                     f"silver_{database}.{table}"):  # fmt: skip
            assert spark.catalog.tableExists(f"{CATALOG}.{name}"), name
        assert_silver_equals_source(spark, db_env, config, table)
        assert_changelog_holds_each_change_once(spark, config, table)
    assert sorted(p.name for p in (tmp_path / "lake").iterdir()) == ["_system"]
    status = commands.status(config, lambda: spark)
    assert f"{database}.notes" in status and "stream silver: at" in status, status

    notes = f"{CATALOG}.silver_{database}.notes"
    assert _property(spark, notes, "delta.enableChangeDataFeed") == "true"
    assert _property(spark, notes, "delta.columnMapping.mode") == "name"
    bronze_notes = f"{CATALOG}.bronze_{database}.notes"
    assert _property(spark, bronze_notes, "delta.columnMapping.mode") == "name"
    items = f"{CATALOG}.silver_{database}.items"
    changes = spark.sql(f"SELECT _change_type FROM table_changes('{items}', 0)")
    assert changes.where("_change_type = 'update_postimage'").count() > 0
    # The event log is a catalog table too, beside silver, never under the lake root.
    events = spark.table(f"{CATALOG}.silver_{database}.binlake_events")
    batches = events.where("kind = 'stream_batch'").collect()
    assert batches and max(b.position for b in batches) > 0
    assert events.where("kind = 'snapshot_commit'").count() > 0
    assert not (tmp_path / "lake" / "_system" / "events").exists()


@pytest.mark.parametrize(
    "killed",
    # The same kills with a plain path root: test_faults' kill points of the same names.
    [False, pytest.param(True, marks=pytest.mark.soak)],
)
def test_file_uri_lake_root_resumes_exactly_once_after_kills(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, make_config: Any,
    tmp_path: Path, killed: bool,
) -> None:  # fmt: skip
    """`lake.root: file:///...`, a writer racing throughout: (`killed`) the snapshot killed
    between a bronze commit and its ledger commit and rerun, then the stream killed after its
    MERGE and before Spark's checkpoint commit and rerun; silver equals the source with each
    change once."""
    seed_items(sql, 600)
    config = make_config(snapshot=KILL_SNAPSHOT, lake={"root": (tmp_path / "lake").as_uri()})
    assert config.lake.root.startswith("file:///")
    config_file = write_config(config, tmp_path / "binlake.yml")
    with Racer(db_env, database):
        if killed:
            run_killed(config_file, "snapshot_between_bronze_and_ledger")
        commands.snapshot(spark, config)
        time.sleep(1)  # changes for the stream's first batch
        if killed:
            run_killed(config_file, "stream_before_checkpoint_commit")
        commands.run(spark, config)
    commands.stream(spark, config, available_now=True)
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")
    assert (tmp_path / "lake" / "silver").is_dir()
