"""One process at a time per ledger and per stream job: a second `binlake snapshot` (a scheduled
job while a manual one runs) or a second `binlake stream` on one checkpoint refuses at once,
naming the holder, before it opens a binlog connection that would evict the running job's
reader. The running job finishes exactly: silver equals the source, each change once."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from binlake.errors import LeaseError
from binlake.jobs import commands

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .items import running_stream, seed_items
from .replay import subprocess_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def _cli(config: Any, tmp_path: Path, *args: str) -> list[str]:
    path = tmp_path / "binlake.yml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", exclude_none=True)))
    return [sys.executable, "-m", "binlake", *args, "--config", str(path)]


def _refused(command: list[str], holder_pid: int) -> None:
    """`command` ends at once with the lease's exit code and one line naming the holder."""
    started = time.monotonic()
    done = subprocess.run(
        command, env=subprocess_env(), capture_output=True, text=True, cwd=ROOT, timeout=300
    )
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == LeaseError.exit_code, done.stderr[-3000:]
    assert len(lines) == 1 and "running already" in lines[0], done.stderr[-3000:]
    assert f"pid {holder_pid} " in lines[0]
    assert time.monotonic() - started < 30, "refused before Spark starts"


def test_a_second_snapshot_refuses_while_one_runs(
    spark: Any, sql: Any, make_config: Any, racer: Any, tmp_path: Path
) -> None:
    """On the parent commit the second process planned the same ledger and died with exit 70,
    DELTA_PROTOCOL_CHANGED (or both ran, writing two plans of one table)."""
    seed_items(sql, 3000)
    config = make_config(snapshot={"chunk_size": 40, "parallelism": 1})
    command = _cli(config, tmp_path, "snapshot")
    log = tmp_path / "first.log"
    with racer(), log.open("w") as out:
        first = subprocess.Popen(
            command, env=subprocess_env(), stdout=out, stderr=subprocess.STDOUT, cwd=ROOT
        )
        try:
            deadline = time.monotonic() + 120
            while "chunks, 0 already finished" not in log.read_text():
                assert first.poll() is None, log.read_text()[-3000:]
                assert time.monotonic() < deadline, "the first snapshot never started reading"
                time.sleep(0.1)
            _refused(command, first.pid)
            assert first.poll() is None, "the refusal disturbed the running snapshot"
            assert first.wait(timeout=300) == 0, log.read_text()[-3000:]
        finally:
            if first.poll() is None:
                first.kill()
    commands.stream(spark, config, available_now=True)
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")


def test_a_second_stream_on_one_checkpoint_refuses_while_one_runs(
    spark: Any, sql: Any, make_config: Any, racer: Any, tmp_path: Path
) -> None:
    """The bundle's continuous `silver_stream` runs; its `silver_catchup` (same job name) is
    started too: it refuses, and the running stream's binlog reader is not evicted."""
    seed_items(sql, 400)
    config = make_config(stream={"trigger_interval": "1s"})
    commands.snapshot(spark, config)
    with racer(), running_stream(spark, config) as stream:
        _refused(_cli(config, tmp_path, "stream", "--available-now"), os.getpid())
        _refused(_cli(config, tmp_path, "run"), os.getpid())
        assert stream.is_alive()
    commands.stream(spark, config, available_now=True)
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")
