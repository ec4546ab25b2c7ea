"""The bundle's jobs, run on this machine by `binlake bundle run-local`, against the real MariaDB
and Delta: the same tasks (python_wheel_task → `binlake.jobs.cli.main`) a workspace would run."""

from __future__ import annotations

import itertools
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from binlake.bundle.definition import load_bundle
from binlake.bundle.local import TaskFailed, run_job
from binlake.config.settings import parse_config
from binlake.jobs import cli
from binlake.snapshot.ledger import Ledger

from .items import logged_events

ROOT = Path(__file__).resolve().parents[2]


def _silver(spark: Any, lake: Path, database: str) -> list[tuple[Any, ...]]:
    rows = spark.read.format("delta").load(str(lake / "silver" / database / "items")).collect()
    return sorted((r["id"], r["label"]) for r in rows)


def _source(sql: Callable[..., list[tuple[Any, ...]]]) -> list[tuple[Any, ...]]:
    return sorted(sql("SELECT id, label FROM items"))


def _wait_for(predicate: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(1)
    return predicate()


def test_bundle_jobs_snapshot_catch_up_and_stream_locally(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    sql: Callable[..., list[tuple[Any, ...]]],
    tmp_path: Path,
) -> None:
    sql("CREATE TABLE items (id INT PRIMARY KEY, label VARCHAR(40) NOT NULL)")
    sql("INSERT INTO items VALUES " + ", ".join(f"({i * 3}, 'item {i}')" for i in range(1, 301)))
    lake = tmp_path / "lake"
    first_id = 7000 + uuid.uuid4().int % 500 * 10
    bundle = load_bundle(
        ROOT,
        "local",
        {
            "source_port": db_env["BINLAKE_DB_PORT"],
            "source_database": database,
            "source_server_id_range": f"[{first_id}, {first_id + 9}]",
            "snapshot_chunk_size": "40",
            "snapshot_parallelism": "2",
            "lake_root": str(lake),
            "stream_trigger_interval": "1s",
        },
    )

    run_job(bundle, "bronze_snapshot", execute=cli.main)
    config = parse_config({"source": {"database": database}, "lake": {"root": str(lake)}})
    chunks = Ledger(spark, config.lake.path("_system", "chunks")).chunks()
    assert len(chunks) >= 8 and all(c.finished for c in chunks)
    assert sum(c.rows or 0 for c in chunks) == 300

    sql("UPDATE items SET label = 'renamed' WHERE id < 100")
    sql("DELETE FROM items WHERE id BETWEEN 300 AND 400")
    sql("INSERT INTO items VALUES (1, 'below the minimum'), (5000, 'above the maximum')")
    run_job(
        bundle, "silver_catchup", execute=cli.main
    )  # snapshot (a no-op now), then stream --available-now
    assert _silver(spark, lake, database) == _source(sql)

    # The continuous job runs until stopped: apply a change while it runs, then stop it.
    outcome: list[BaseException] = []

    def continuous() -> None:
        try:
            run_job(bundle, "silver_stream", execute=cli.main)
        except BaseException as exc:  # surfaced to the test below
            outcome.append(exc)

    runner = threading.Thread(target=continuous, daemon=True)
    runner.start()
    assert _wait_for(lambda: bool(spark.streams.active) or bool(outcome), 120), "no stream"
    assert not outcome, outcome
    sql("UPDATE items SET label = 'seen by the continuous job' WHERE id = 5000")
    seen = _wait_for(
        lambda: (5000, "seen by the continuous job") in _silver(spark, lake, database), 120
    )
    for query in spark.streams.active:
        query.stop()
    runner.join(60)
    assert seen, "the continuous stream never applied the update"
    assert not outcome, outcome
    assert _silver(spark, lake, database) == _source(sql)

    # The remedy job: snapshot `items` again while a writer races it, then catch up.
    with pytest.raises(TaskFailed) as missing:
        run_job(bundle, "reset_tables", execute=cli.main)  # no `tables` given
    assert missing.value.exit_code == 2
    stop = threading.Event()

    def writer() -> None:
        for n in itertools.count():
            if stop.is_set():
                return
            sql("UPDATE items SET label = %s WHERE id = %s", (f"raced {n}", 3 * (n % 90 + 1)))
            time.sleep(0.02)

    racing = threading.Thread(target=writer, daemon=True)
    racing.start()
    try:
        run_job(bundle, "reset_tables", {"tables": "items"}, execute=cli.main)
    finally:
        stop.set()
        racing.join(30)
    run_job(bundle, "silver_catchup", execute=cli.main)
    assert _silver(spark, lake, database) == _source(sql)
    assert [e["kind"] for e in logged_events(spark, config, "table_reset")] == ["table_reset"]
