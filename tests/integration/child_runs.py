"""binlake's CLI in a child process: its config as a file, and the process killed at a chosen point
of its work (crash.py) for a rerun to finish."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from .replay import ROOT, subprocess_env

#: Where the process dies: (function, when, which call). The snapshot commits chunks to bronze
#: and then to the ledger; the stream MERGEs each table's silver, then appends its changelog
#: (a small batch; a large one does both at once), then Spark writes the batch's commit to the
#: checkpoint.
KILL_POINTS = {
    "snapshot_after_planning": ("binlake.snapshot.ledger:Ledger.record_plans", "after", 1),
    "snapshot_while_reading": ("binlake.snapshot.task:read_chunks", "during:0.5", 2),
    "snapshot_between_bronze_and_ledger": (
        "binlake.snapshot.ledger:Ledger.mark_finished",
        "before",
        2,
    ),
    "stream_after_changelog_append": (
        "binlake.silver.merge:TableApply.append_changelog",
        "after",
        1,
    ),
    "stream_after_merge": ("binlake.silver.merge:TableApply.merge_silver", "after", 1),
    "stream_before_checkpoint_commit": ("binlake.stream.sink:BatchSink.__call__", "after", 1),
}


#: Chunking of the kill-point runs' 600 rows: 12 chunks, 3 commits (so a second call exists).
KILL_SNAPSHOT = {"chunk_size": 50, "parallelism": 2, "chunks_per_commit": 4}


def write_config(config: Any, path: Path) -> Path:
    """The config as a file for a child process (the password stays an environment variable)."""
    path.write_text(yaml.safe_dump(config.model_dump(mode="json", exclude_none=True)))
    return path


def run_killed(config_file: Path, point: str) -> None:
    """`binlake snapshot` or `binlake stream --available-now` in a child process, killed at
    `point` (`KILL_POINTS`)."""
    args = ["snapshot"] if point.startswith("snapshot") else ["stream", "--available-now"]
    run_killed_at(config_file, KILL_POINTS[point], args)


def run_killed_at(config_file: Path, point: tuple[str, str, int], args: list[str]) -> None:
    """`binlake ARGS` in a child process, killed at `point`: (function, when, which call)."""
    target, when, call = point
    crashed = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "integration" / "crash.py"),
         target, when, str(call), "--", *args, "--config", str(config_file)],
        env=subprocess_env(), capture_output=True, text=True, cwd=ROOT, timeout=600,
    )  # fmt: skip
    assert crashed.returncode == 137, crashed.stderr[-3000:]
    assert "crash: killed" in crashed.stderr
