"""Issue 3, "Must show": the silver stream (high-watermark filter + MERGE) against a real MariaDB,
Spark and Delta.

Silver is compared with the source row by row and column by column: the source is read with
PyMySQL and normalised with `binlake.model.typemap` (the spec of how a value lands in Delta),
silver's data columns are collected (tables are small). TIMESTAMP columns are compared as aware UTC
instants on both sides: the normaliser makes the source's aware, and Spark returns naive
datetimes in the Python process's local zone, which `astimezone` turns into the same instant.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pymysql
import pytest
import yaml
from delta.tables import DeltaTable
from pyspark.sql import functions as F

from binlake.errors import BinlogPurgedError, SnapshotIncompleteError, SourceError
from binlake.jobs import commands
from binlake.jobs.verify import verify_silver
from binlake.lake.tables import lake_table
from binlake.model.offsets import BinlogOffset, position_token
from binlake.mysql.server import current_offset
from binlake.snapshot.ledger import Ledger

from .assertions import (
    assert_silver_equals_source,
    canonical,
    describe_difference,
    instant_columns,
    silver_rows,
    source_oracle,
    source_rows,
)
from .items import running_stream, wait_for
from .replay import (
    Oracle,
    Writers,
    connect,
    offset_of,
    read_binlog,
    subprocess_env,
)
from .workload import DDL, TABLES, Workload, create_tables, seed, seed_items

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
BINLOG_SERVER_ID = 991_000  # the test's own binlog reads; outside every make_config range


# ---------------------------------------------------------------------------------------------
# Helpers


@pytest.fixture
def configure(make_config: Any) -> Callable[..., Any]:
    """`make_config` with a 1 s trigger interval (an available-now run polls at that rate)."""

    def build(**sections: dict[str, Any]) -> Any:
        sections["stream"] = {"trigger_interval": "1s", **sections.get("stream", {})}
        return make_config(**sections)

    return build


def _silver(config: Any, table: str) -> str:
    return config.lake.path("silver", config.source.database, table)


def _changelog(config: Any, table: str) -> str:
    return config.lake.path("bronze", config.source.database, table + "__changelog")


def _checkpoint(config: Any) -> Path:
    return Path(config.lake.path("_system", "checkpoints", config.stream.job_name))


def changelog_rows(spark: Any, config: Any, table: str) -> list[tuple[Any, ...]]:
    name = f"{table}__changelog"
    frame = lake_table(config.lake, "bronze", config.source.database, name).read(spark)
    columns = ["_op", "_binlake_offset", "_file", "_pos", "_row", "_commit_ts", "_before", "_after"]
    return [tuple(r) for r in frame.select(*columns).collect()]


def filtered_changes(
    spark: Any, db_env: dict[str, str], config: Any, table: str
) -> tuple[int, int, int]:
    """(chunks with HW > LW, changes in (min HW, max HW], of those how many the stream dropped).

    A key-changing update counts twice (binlake splits it into delete + insert).
    """
    database = config.source.database
    chunks = Ledger(spark, config.lake.path("_system", "chunks")).chunks(f"{database}.{table}")
    raced = sum(1 for c in chunks if c.hw is not None and c.lw is not None and c.hw > c.lw)
    low = min(c.hw for c in chunks if c.hw is not None)
    high = max(c.hw for c in chunks if c.hw is not None)
    oracle = source_oracle(db_env, database, table)
    binary = Oracle(oracle.schema)  # binlake splits key changes by the binary key
    changes = read_binlog(
        db_env, binary, (low.file, low.pos), offset_of(high.file, high.pos), BINLOG_SERVER_ID
    )
    in_window = sum(
        2 if c.before and c.after and binary.key(c.before) != binary.key(c.after) else 1
        for c in changes
    )
    high_token = position_token(high, 10**7)
    applied = sum(1 for r in changelog_rows(spark, config, table) if r[1] <= high_token)
    return raced, in_window, in_window - applied


def _setup_tables(sql: Any, rows: int) -> None:
    """The three workload tables with `rows` seeded rows each."""
    with_cursor(sql, lambda cur: (create_tables(cur), seed(cur, rows, random.Random(1))))


def tolerant(step: Callable[[Any, random.Random], None], cur: Any, rng: random.Random) -> None:
    """One random statement; a duplicate key (a random insert or key change) is expected."""
    with contextlib.suppress(pymysql.err.IntegrityError):
        step(cur, rng)


def with_cursor(sql: Any, action: Callable[[Any], Any]) -> None:
    """Run `action(cursor)` on a connection to the test's database (the `sql` fixture's)."""
    database = sql("SELECT DATABASE()")[0][0]
    with connect(_db_env(), database) as conn, conn.cursor() as cur:
        action(cur)


def _db_env() -> dict[str, str]:
    return {
        "BINLAKE_DB_PORT": os.environ["BINLAKE_DB_PORT"],
        "BINLAKE_SOURCE_PASSWORD": os.environ["BINLAKE_SOURCE_PASSWORD"],
    }


# ---------------------------------------------------------------------------------------------
# 1. Concurrent writes during the snapshot and the stream


def test_silver_equals_source_after_concurrent_writes_during_snapshot_and_stream(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, configure: Any
) -> None:
    """Writers run random inserts (keys below the minimum and above the maximum), updates,
    primary-key changes and deletes while the snapshot reads its chunks and while two
    available-now stream runs catch up; after the writers stop, one more run catches up and
    silver must equal the source exactly, and `verify` must agree."""
    rows = 600
    _setup_tables(sql, rows)
    # Two chunks per commit: the chunks' HWs spread over several commits while writers run,
    # so the stream must drop changes that later chunks already hold.
    config = configure(snapshot={"chunk_size": 100, "parallelism": 2, "chunks_per_commit": 2})
    workload = Workload(rows)

    # Paced by time, not by count: Spark's phases take seconds to minutes on a busy machine, and
    # the writers must outlast each phase. `max_ops` only bounds a runaway.
    during_snapshot = Writers(db_env, database, workload.step, threads=2, max_ops=4000,
                              pause_s=0.03)  # fmt: skip
    with during_snapshot:
        summary = commands.snapshot(spark, config)
    assert summary.chunks_read == summary.chunks >= 3 * rows // 100

    during_stream = Writers(db_env, database, workload.step, threads=2, max_ops=2000, pause_s=0.05)
    with during_stream:
        first = commands.stream(spark, config, available_now=True)
        second = commands.stream(spark, config, available_now=True)
    last = commands.stream(spark, config, available_now=True)
    print(
        f"writers: {during_snapshot.ops} ops during the snapshot ({during_snapshot.conflicts} "
        f"key conflicts), {during_stream.ops} during the stream; stream runs applied "
        f"{first.changes}, {second.changes}, {last.changes} changes"
    )
    assert during_snapshot.ops < 2 * 4000 and during_stream.ops < 2 * 2000, "writers ran out"
    assert first.changes > 0 and second.changes + last.changes > 0

    for table in TABLES:
        assert_silver_equals_source(spark, db_env, config, table)
    report = verify_silver(spark, config)
    assert report.identical, report.differences
    assert set(report.tables) == {f"{database}.{t}" for t in TABLES}

    # The race happened: the stream had to drop changes the chunks already held. (A chunk whose
    # read itself raced a write, HW > LW, is printed but not required: a chunk's read takes
    # milliseconds, so whether a paced writer lands inside one is chance. The snapshot tests
    # check those chunks against a binlog replay.)
    evidence = {t: filtered_changes(spark, db_env, config, t) for t in TABLES}
    print(f"(chunks with HW > LW, changes in (min HW, max HW], dropped by the filter): {evidence}")
    assert any(dropped > 0 for _, _, dropped in evidence.values())
    assert all(dropped >= 0 for _, _, dropped in evidence.values())


# ---------------------------------------------------------------------------------------------
# 2. A stream killed mid-batch replays to the same silver and changelog


def _write_config(config: Any, path: Path, **stream: Any) -> Path:
    raw = config.model_dump(mode="json", exclude_none=True)
    raw["stream"].update(stream)
    path.write_text(yaml.safe_dump(raw))
    return path


def _in_flight(checkpoint: Path) -> int | None:
    """A batch whose offsets are logged but not committed (the query is processing it)."""
    offsets = {int(p.name) for p in (checkpoint / "offsets").glob("[0-9]*")}
    commits = {int(p.name) for p in (checkpoint / "commits").glob("[0-9]*")}
    pending = offsets - commits
    return max(pending) if pending else None


def _burst(db_env: dict[str, str], database: str, workload: Workload, seed_value: int,
           ops: int) -> None:  # fmt: skip
    rng = random.Random(seed_value)
    with connect(db_env, database) as conn, conn.cursor() as cur:
        for _ in range(ops):
            tolerant(workload.step, cur, rng)


@pytest.mark.soak  # the same guarantee, fast: test_faults' kill points and the torture test
def test_killed_stream_replays_to_the_same_silver_and_changelog(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, configure: Any, tmp_path: Path
) -> None:
    """SIGKILL a continuous `binlake stream` process while a micro-batch is in flight (its offsets
    are logged, its commit is not, and a changelog already exists), restart it with available-now
    after more changes, and compare with an uninterrupted reference.

    The reference lake is a copy of the killed lake taken right after the snapshot (bronze and
    the chunk ledger, before any stream ran), so both streams start from the same chunk high
    watermarks and filter the same binlog identically. The reference streams in-process, once,
    after all writes. Then:
    - silver (data columns *and* `_binlake_offset`) is identical in both lakes and equals the
      source;
    - the killed lake's changelog has no duplicate change (`_binlake_offset` is unique per
      `_op`: a key-changing update is a delete and an insert at the same position), and as a
      multiset equals the reference's: the replayed batch was appended exactly once.
    """
    rows = 400
    _setup_tables(sql, rows)
    config = configure(snapshot={"chunk_size": 100, "parallelism": 2})
    commands.snapshot(spark, config)
    reference_root = tmp_path / "reference-lake"
    shutil.copytree(config.lake.root, reference_root)
    reference = configure(lake={"root": str(reference_root)})

    workload = Workload(rows)
    checkpoint = _checkpoint(config)
    config_file = _write_config(config, tmp_path / "binlake.yml", trigger_interval="1s")
    log_file = tmp_path / "stream.log"
    command = [sys.executable, "-m", "binlake", "stream", "--config", str(config_file)]
    killed = threading.Event()
    bursts = 0

    def write_bursts() -> None:
        nonlocal bursts
        deadline = time.monotonic() + 240
        while not (checkpoint / "metadata").exists() and time.monotonic() < deadline:
            if killed.wait(0.2):
                return
        while not killed.is_set() and bursts < 30 and time.monotonic() < deadline:
            _burst(db_env, database, workload, 100 + bursts, 150)
            bursts += 1
            killed.wait(1.5)

    with log_file.open("w") as log:
        process = subprocess.Popen(
            command, env=subprocess_env(), stdout=log, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=ROOT,
        )  # fmt: skip
        writer = threading.Thread(target=write_bursts, daemon=True)
        writer.start()
        victim = None
        try:
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline and process.poll() is None:
                changelog_started = any(
                    Path(_changelog(config, t), "_delta_log").exists() for t in TABLES
                )
                victim = _in_flight(checkpoint) if changelog_started else None
                if victim is not None:
                    break
                time.sleep(0.02)
            assert process.poll() is None, f"stream exited early:\n{log_file.read_text()[-3000:]}"
            assert victim is not None, f"no batch in flight:\n{log_file.read_text()[-3000:]}"
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)
            killed.set()
            writer.join(timeout=120)
    assert not (checkpoint / "commits" / str(victim)).exists()
    # More changes after the crash; then the restart (the CLI's entry point, in this process to
    # spare a second JVM start) catches up to the binlog head from the killed query's checkpoint.
    _burst(db_env, database, workload, 999, 150)
    commands.stream(spark, config, available_now=True)
    assert (checkpoint / "commits" / str(victim)).exists()

    commands.stream(spark, reference, available_now=True)

    print(f"killed batch {victim} after {bursts} bursts")
    for table in TABLES:
        ours = assert_silver_equals_source(spark, db_env, config, table)
        oracle = source_oracle(db_env, database, table)
        theirs = silver_rows(spark, reference, oracle)
        assert ours == theirs, describe_difference(ours, theirs, f"killed vs reference {table}")
        with_offsets = [
            Counter(tuple(r) for r in spark.read.format("delta").load(_silver(c, table)).collect())
            for c in (config, reference)
        ]
        assert with_offsets[0] == with_offsets[1], f"silver {table} offsets differ"

        changes = changelog_rows(spark, config, table)
        positions = Counter((r[0], r[1]) for r in changes)
        repeated = [p for p, n in positions.items() if n > 1]
        assert not repeated, f"changelog {table} holds changes twice: {repeated[:5]}"
        expected = Counter(changelog_rows(spark, reference, table))
        assert Counter(changes) == expected, (
            f"changelog {table}: {sum((Counter(changes) - expected).values())} extra, "
            f"{sum((expected - Counter(changes)).values())} missing"
        )
    assert verify_silver(spark, config).identical


# ---------------------------------------------------------------------------------------------
# 3. Change Data Feed


def test_change_data_feed_replays_to_the_final_table(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, configure: Any
) -> None:
    """Silver version 0 is the snapshot; its CDF from version 1 shows an update as
    update_preimage + update_postimage and a delete as delete, and replaying the feed over
    version 0 (by commit version, then `_binlake_offset`) gives exactly the source's table."""
    sql(DDL["items"])
    rng = random.Random(3)
    with_cursor(sql, lambda cur: seed_items(cur, rng, 300))
    config = configure(source={"tables": ["items"]})
    commands.snapshot(spark, config)
    oracle = source_oracle(db_env, database, "items")
    initial = source_rows(db_env, oracle)

    updated, deleted, moved, inserted = 1_003, 1_006, 1_009, 777
    sql("UPDATE items SET note = 'cdf update', qty = 42 WHERE id = %s", (updated,))
    sql("DELETE FROM items WHERE id = %s", (deleted,))
    sql("UPDATE items SET id = 5 WHERE id = %s", (moved,))
    sql("INSERT INTO items (id, price, created) VALUES (%s, 1.50, '2024-01-02 03:04:05.678901')",
        (inserted,))  # fmt: skip
    commands.stream(spark, config, available_now=True)
    workload = Workload(300)
    with_cursor(sql, lambda cur: [tolerant(workload._items, cur, rng) for _ in range(150)])
    commands.stream(spark, config, available_now=True)

    path = _silver(config, "items")
    table = DeltaTable.forPath(spark, path)
    assert table.detail().collect()[0]["properties"].get("delta.enableChangeDataFeed") == "true"
    assert silver_rows(spark, config, oracle, version=0) == initial

    feed = spark.read.format("delta").option("readChangeFeed", "true").option("startingVersion", 1)
    changes = feed.load(path).collect()
    assert changes and min(r["_commit_version"] for r in changes) >= 1
    first = min(r["_commit_version"] for r in changes)
    by_type = {(r["_change_type"], r["id"]): r for r in changes if r["_commit_version"] == first}
    pre, post = by_type[("update_preimage", updated)], by_type[("update_postimage", updated)]
    assert pre["note"] == initial[(updated,)][5] and pre["note"] != "cdf update"
    assert (post["note"], post["qty"]) == ("cdf update", 42)
    assert post["_binlake_offset"] > pre["_binlake_offset"]
    assert ("delete", deleted) in by_type and ("insert", inserted) in by_type
    assert ("delete", moved) in by_type and ("insert", 5) in by_type

    # Replay the feed over version 0.
    instants = instant_columns(oracle)
    state = silver_rows(spark, config, oracle, version=0)
    order = {"update_preimage": 0, "delete": 1, "insert": 2, "update_postimage": 3}
    changes.sort(
        key=lambda r: (r["_commit_version"], r["_binlake_offset"], order[r["_change_type"]])
    )
    for change in changes:
        row = canonical(tuple(change[c] for c in oracle.columns), instants)
        key, kind = oracle.key(row), change["_change_type"]
        if kind == "update_preimage":
            assert state.get(key) == row, f"preimage of {key} is not the current row"
        elif kind == "delete":
            assert state.pop(key, None) == row, f"delete of {key} is not the current row"
        elif kind == "insert":
            assert key not in state, f"insert of existing key {key}"
            state[key] = row
        else:
            assert key in state, f"postimage of missing key {key}"
            state[key] = row
    expected = source_rows(db_env, oracle)
    assert state == expected, describe_difference(state, expected, "CDF replay")


def test_small_batches_merge_only_the_files_holding_their_keys(
    spark: Any,
    db_env: dict[str, str],
    sql: Any,
    configure: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Silver starts in key order, one narrow key range per file; a batch of a few keys MERGEs
    with their key list, so it marks rows in their files only (deletion vectors, no file
    rewritten) and the layout survives. A batch over the list limit MERGEs by key range."""
    from binlake.silver import change_summary, file_sizes
    from binlake.stream import batch_settings

    monkeypatch.setattr(file_sizes, "SILVER_FILE_ROWS", 100)
    # As a large batch into a large silver: this one would rewrite (`batch_settings.REWRITE_BYTES`).
    monkeypatch.setattr(batch_settings, "SMALL_SILVER_BYTES", -1)
    monkeypatch.setattr(batch_settings, "REWRITE_BYTES", -1)
    rng = random.Random(11)
    config, path = _items_silver(spark, sql, configure, rng)
    files = _silver_files(spark, path)
    assert len(files) >= 12
    assert all(a["hi"] < b["lo"] for a, b in itertools.pairwise(files)), files

    sql("UPDATE items SET qty = qty + 1 WHERE id IN (%s, %s)", (files[2]["lo"], files[7]["hi"]))
    sql("DELETE FROM items WHERE id = %s", (files[4]["lo"],))
    commands.stream(spark, config, available_now=True)
    merge = DeltaTable.forPath(spark, path).history(1).collect()[0]
    metrics = merge["operationMetrics"]
    assert merge["operation"] == "MERGE"
    assert (metrics["numTargetRowsUpdated"], metrics["numTargetRowsDeleted"]) == ("2", "1")
    assert metrics["numTargetRowsCopied"] == "0" and metrics["numTargetFilesRemoved"] == "0"
    assert int(metrics["numTargetDeletionVectorsAdded"]) == 3  # the three keys' files only
    assert_silver_equals_source(spark, db_env, config, "items")

    monkeypatch.setattr(change_summary, "MERGE_KEY_LIST_LIMIT", 2)
    workload = Workload(1200)
    with_cursor(sql, lambda cur: [tolerant(workload._items, cur, rng) for _ in range(60)])
    commands.stream(spark, config, available_now=True)
    assert_silver_equals_source(spark, db_env, config, "items")


def _items_silver(spark: Any, sql: Any, configure: Any, rng: random.Random) -> tuple[Any, str]:
    """`items` seeded with 1,200 rows, snapshotted and its silver created: the config and
    silver's path."""
    sql(DDL["items"])
    with_cursor(sql, lambda cur: seed_items(cur, rng, 1200))
    config = configure(source={"tables": ["items"]})
    commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    return config, _silver(config, "items")


def _silver_files(spark: Any, path: str) -> list[Any]:
    """Silver's live files at `path`, each with its row count and key range, in key order."""
    return (
        spark.read.format("delta").load(path)
        .groupBy(F.input_file_name())
        .agg(F.count("*").alias("rows"), F.min("id").alias("lo"), F.max("id").alias("hi"))
        .orderBy("lo").collect()
    )  # fmt: skip


def test_rewriting_merges_keep_silver_files_to_their_size(
    spark: Any,
    db_env: dict[str, str],
    sql: Any,
    configure: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A batch of few changes rewrites the silver files holding its keys (`REWRITE_BYTES`).
    Delta writes a MERGE's output as one file per task, and a small rewrite is one task: three
    touched files came back as one, which the next batch touching any of its keys rewrote again
    with more, until a file held most of the table and every MERGE rewrote it, slower batch after
    batch (bench/results/rewrite-drift-2026-12-05-cap.md). Rewriting MERGEs write at most
    `SILVER_FILE_ROWS` rows per file, key-sorted per task, so a batch rewrites no more than the
    files its keys are in, however long the stream has run, with writes racing it."""
    from binlake.silver import file_sizes

    monkeypatch.setattr(file_sizes, "SILVER_FILE_ROWS", 100)
    config, path = _items_silver(spark, sql, configure, random.Random(12))
    files = _silver_files(spark, path)
    assert len(files) >= 12 and max(f["rows"] for f in files) <= 100

    sql("UPDATE items SET qty = qty + 1 WHERE id IN (%s, %s)", (files[2]["lo"], files[7]["hi"]))
    sql("DELETE FROM items WHERE id = %s", (files[4]["lo"],))
    commands.stream(spark, config, available_now=True)
    metrics = DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"]
    assert metrics["numTargetDeletionVectorsAdded"] == "0"  # a small silver: rewritten
    assert metrics["numTargetFilesRemoved"] == "3"
    assert int(metrics["numTargetFilesAdded"]) == 3  # 299 rows, 100 per file
    kept = {f[0] for f in files}
    written = [f[0] for f in _silver_files(spark, path) if f[0] not in kept]
    ids = [r["id"] for f in written for r in spark.read.parquet(f).select("id").collect()]
    assert len(written) == 3 and len(ids) == 299 and ids == sorted(ids)  # in key order

    workload, stop = Workload(1200), threading.Event()

    def race() -> None:
        writer = random.Random(13)
        with connect(db_env, config.source.database) as conn, conn.cursor() as cur:
            while not stop.wait(0.005):
                tolerant(workload._items, cur, writer)

    racer = threading.Thread(target=race, daemon=True)
    racer.start()
    try:
        for _ in range(4):
            commands.stream(spark, config, available_now=True)
    finally:
        stop.set()
        racer.join()
    commands.stream(spark, config, available_now=True)
    rewrites = [
        h["operationMetrics"]
        for h in DeltaTable.forPath(spark, path).history(6).collect()
        if h["operation"] == "MERGE"
    ]
    assert len(rewrites) >= 4 and all(m["numTargetDeletionVectorsAdded"] == "0" for m in rewrites)
    assert max(f["rows"] for f in _silver_files(spark, path)) <= 100
    assert_silver_equals_source(spark, db_env, config, "items")


def test_small_table_silver_starts_as_one_file_in_key_order(
    spark: Any, db_env: dict[str, str], sql: Any, configure: Any
) -> None:
    """A bronze the ledger counts within one silver file is sorted in one task: one file in key
    order, not one per shuffle partition (which range partitioning makes of a small table)."""
    sql(DDL["items"])
    with_cursor(sql, lambda cur: seed_items(cur, random.Random(5), 1200))
    config = configure(source={"tables": ["items"]})
    commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    (single,) = DeltaTable.forPath(spark, _silver(config, "items")).toDF().inputFiles()
    ids = [r["id"] for r in spark.read.parquet(single).select("id").collect()]
    assert ids == sorted(ids) and len(ids) == 1200
    assert_silver_equals_source(spark, db_env, config, "items")


def test_query_progress_reports_the_binlog_head(
    spark: Any, sql: Any, configure: Any, db_env: dict[str, str]
) -> None:
    """Issue 25: each batch's progress carries the source's latest offset, the binlog head
    (`reportLatestOffset`), so Spark's progress and Databricks' backlog metrics show how far
    behind the stream is. Before, `latestOffset` was empty in every progress."""
    sql(DDL["items"])
    with_cursor(sql, lambda cur: seed_items(cur, random.Random(6), 300))
    config = configure(source={"tables": ["items"]}, stream={"trigger_interval": "1s"})
    commands.snapshot(spark, config)

    def reported() -> dict[str, Any] | None:
        progress = [p for q in spark.streams.active for p in q.recentProgress]
        return next((p["sources"][0].get("latestOffset") for p in reversed(progress)), None)

    with running_stream(spark, config):
        sql("UPDATE items SET qty = qty + 1 WHERE id % 3 = 0")
        with connect(db_env) as conn:
            head = current_offset(conn)
        wait_for(lambda: reported() is not None, timeout=60)
        wait_for(lambda: BinlogOffset.from_dict(_offset(reported())) == head, timeout=60)
        assert _offset(reported())["gtid"]  # with the GTID position there


def _offset(reported: Any) -> dict[str, Any] | None:
    return json.loads(reported) if isinstance(reported, str) else reported


# ---------------------------------------------------------------------------------------------
# 4. Startup modes and table selection


def test_stream_refuses_to_start_before_snapshot_finished(
    spark: Any, sql: Any, configure: Any
) -> None:
    sql(DDL["items"])
    config = configure()
    with pytest.raises(SnapshotIncompleteError, match="binlake snapshot"):
        commands.stream(spark, config, available_now=True)
    # A recorded plan whose chunks never finished is refused too.
    from binlake.snapshot.chunks import ChunkRange

    Ledger(spark, config.lake.path("_system", "chunks")).record_plans(
        {f"{config.source.database}.items": ("id", lambda: [ChunkRange.all()])}
    )
    with pytest.raises(SnapshotIncompleteError, match=r"0/1 chunks.*binlake snapshot"):
        commands.stream(spark, config, available_now=True)
    assert not Path(_silver(config, "items")).exists()


def _stop_query(spark: Any, name: str) -> None:
    for query in spark.streams.active:
        if query.name == name:
            query.stop()


def test_stream_startup_latest_offset_applies_only_later_changes(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, configure: Any
) -> None:
    """A continuous stream started with `latest-offset` creates an empty silver (no snapshot) and
    applies the changes made after it started: inserts, updates (an update of a row written
    before the start is an upsert of its after image), deletes; untouched earlier rows stay
    absent."""
    sql(DDL["items"])
    rng = random.Random(5)
    with_cursor(sql, lambda cur: seed_items(cur, rng, 50))
    config = configure(
        source={"tables": ["items"]},
        stream={"startup_mode": "latest-offset", "trigger_interval": "1s", "job_name": "latest"},
    )
    oracle = source_oracle(db_env, database, "items")
    failure: list[BaseException] = []

    def run() -> None:
        try:
            commands.stream(spark, config)
        except BaseException as exc:
            failure.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while not DeltaTable.isDeltaTable(spark, _silver(config, "items")):
            assert not failure and time.monotonic() < deadline, [str(e) for e in failure]
            time.sleep(0.5)
        assert silver_rows(spark, config, oracle) == {}

        sql("INSERT INTO items (id, price, created, note) VALUES (1, 9.99, NOW(6), 'new')")
        sql("INSERT INTO items (id, price, created, note) VALUES (2, 1.00, NOW(6), 'gone')")
        sql("UPDATE items SET note = 'after start' WHERE id = 1000")
        sql("UPDATE items SET note = 'changed' WHERE id = 1")
        sql("DELETE FROM items WHERE id IN (2, 1003)")
        source = source_rows(db_env, oracle)
        expected = {k: source[k] for k in [(1,), (1000,)]}
        while True:
            actual = silver_rows(spark, config, oracle)
            if actual == expected or time.monotonic() > deadline:
                break
            assert not failure, [str(e) for e in failure]
            time.sleep(1)
        assert actual == expected, describe_difference(actual, expected, "silver")
    finally:
        _stop_query(spark, "latest")
        thread.join(timeout=60)
    assert not failure, [str(e) for e in failure]


def test_stream_startup_timestamp_applies_changes_committed_from_that_time(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, configure: Any
) -> None:
    """`timestamp` mode starts at the first transaction committed at or after the given time:
    rows written before it never reach silver, rows written from it on do."""
    sql(DDL["items"])
    sql("INSERT INTO items (id, price, created, note) VALUES (1, 1.00, NOW(6), 'before')")
    time.sleep(2.2)  # binlog timestamps have one-second resolution
    start = datetime.now(UTC).replace(microsecond=0)
    time.sleep(1.1)
    sql("INSERT INTO items (id, price, created, note) VALUES (2, 2.00, NOW(6), 'after')")
    sql("UPDATE items SET note = 'updated after' WHERE id = 1")
    config = configure(
        source={"tables": ["items"]},
        stream={
            "startup_mode": "timestamp",
            "startup_timestamp": start.isoformat(),
            "job_name": "from_timestamp",
        },
    )
    _assert_starts_after_the_before_row(spark, db_env, database, config)


def test_stream_startup_gtid_applies_the_transactions_after_that_position(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, configure: Any
) -> None:
    """`gtid` mode (MariaDB) starts after the given GTID position: the transaction that made it
    never reaches silver, the ones after do. A position the server never wrote is refused with
    what it holds, before anything is created."""
    sql(DDL["items"])
    sql("INSERT INTO items (id, price, created, note) VALUES (1, 1.00, NOW(6), 'before')")
    position = str(sql("SELECT @@GLOBAL.gtid_binlog_pos")[0][0])
    sql("INSERT INTO items (id, price, created, note) VALUES (2, 2.00, NOW(6), 'after')")
    sql("UPDATE items SET note = 'updated after' WHERE id = 1")
    stream = {"startup_mode": "gtid", "job_name": "from_gtid"}
    unknown = configure(source={"tables": ["items"]}, stream={**stream, "startup_gtid": "0-77-1"})
    with pytest.raises(SourceError, match="does not hold GTID position 0-77-1"):
        commands.stream(spark, unknown, available_now=True)
    assert not Path(_silver(unknown, "items")).exists()
    config = configure(source={"tables": ["items"]}, stream={**stream, "startup_gtid": position})
    _assert_starts_after_the_before_row(spark, db_env, database, config)


def _assert_starts_after_the_before_row(
    spark: Any, db_env: dict[str, str], database: str, config: Any
) -> None:
    """A catch-up from the start mode's position lands rows 1 and 2 as the source has them, and
    its changelog holds the changes after the 'before' insert, not that insert."""
    commands.stream(spark, config, available_now=True)
    oracle = source_oracle(db_env, database, "items")
    source = source_rows(db_env, oracle)
    assert silver_rows(spark, config, oracle) == {(1,): source[(1,)], (2,): source[(2,)]}
    notes = sorted(
        r["_after"]["note"]
        for r in spark.read.format("delta").load(_changelog(config, "items")).collect()
    )
    assert notes == ["after", "updated after"]


def test_specific_offset_on_purged_binlog_is_a_clear_error(
    spark: Any, sql: Any, configure: Any
) -> None:
    sql(DDL["items"])
    config = configure(
        stream={
            "startup_mode": "specific-offset",
            "startup_file": "mysql-bin.000000",
            "startup_pos": 4,
        }
    )
    with pytest.raises(BinlogPurgedError, match="re-snapshot") as caught:
        commands.stream(spark, config, available_now=True)
    assert "mysql-bin.000000" in str(caught.value)
    assert not Path(_silver(config, "items")).exists()


def test_changes_of_uncaptured_tables_are_dropped(
    spark: Any, db_env: dict[str, str], sql: Any, configure: Any
) -> None:
    sql(DDL["items"])
    sql(DDL["order_lines"])
    rng = random.Random(9)
    with_cursor(sql, lambda cur: seed_items(cur, rng, 120))
    config = configure(source={"tables": ["items"]})
    commands.snapshot(spark, config)
    workload = Workload(120)

    def writes(cur: Any) -> None:
        for _ in range(60):
            tolerant(workload._items, cur, rng)
            tolerant(workload._order_lines, cur, rng)

    with_cursor(sql, writes)
    assert sql("SELECT COUNT(*) FROM order_lines")[0][0] > 0
    summary = commands.stream(spark, config, available_now=True)
    assert summary.changes > 0
    assert_silver_equals_source(spark, db_env, config, "items")
    assert not Path(_silver(config, "order_lines")).exists()
    assert not Path(_changelog(config, "order_lines")).exists()
