"""`startup.*`: how long a local `binlake` command takes from a new process to its first Delta
write, its JVM started from the class archive `make setup` writes
(`binlake.runtime.spark.class_archive`) against the same start without it. Every local command
(`binlake snapshot`, `stream`, `verify`, each task of the bundle run locally) pays this once;
a job on Databricks does not (the runtime's JVM is already up).

Each round starts one child of each kind, in alternating order, so the machine's drift hits
both alike; the figures are medians.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from typing import Any

#: The child: a local session as binlake builds it (`with_delta`), the archive's JVM option
#: removed for the baseline; then one small Delta write, as each command's first step does.
CHILD = """
import json, sys, tempfile, time
started = time.monotonic()
from pyspark.sql import SparkSession
from binlake.runtime.spark import with_delta
builder = with_delta(SparkSession.builder.master("local[2]").appName("bench-startup"))
if sys.argv[1] == "without":
    builder = builder.config("spark.driver.extraJavaOptions", "")
spark = builder.getOrCreate()
ready = time.monotonic()
spark.range(1000).write.format("delta").save(tempfile.mkdtemp() + "/t")
written = time.monotonic()
print(json.dumps({"session_s": ready - started, "first_write_s": written - started}))
"""


def _start(kind: str) -> dict[str, float]:
    """One child process of `kind` ("with" or "without" the archive): its own timings and the
    wall time from its spawn to its exit (the JVM's shutdown included)."""
    spawned = time.monotonic()
    child = subprocess.run(
        [sys.executable, "-c", CHILD, kind], capture_output=True, text=True, timeout=300
    )
    if child.returncode != 0:
        raise RuntimeError(f"start-up child ({kind}) failed: {child.stderr[-2000:]}")
    return {**json.loads(child.stdout.splitlines()[-1]), "process_s": time.monotonic() - spawned}


def startup(rounds: int = 5) -> dict[str, Any]:
    """Medians over `rounds` of each kind; `first_write_speedup` is without / with."""
    from binlake.runtime.spark import class_archive

    if not class_archive().is_file():
        return {"skipped": f"no class archive at {class_archive()} (run `make setup`)"}
    samples: dict[str, list[dict[str, float]]] = {"with": [], "without": []}
    for index in range(rounds):
        for kind in ("with", "without") if index % 2 == 0 else ("without", "with"):
            samples[kind].append(_start(kind))
    figures: dict[str, Any] = {"rounds": rounds, "samples": samples}
    for kind, runs in samples.items():
        for key in ("session_s", "first_write_s", "process_s"):
            figures[f"{kind}_archive_{key}"] = round(statistics.median(r[key] for r in runs), 2)
    figures["first_write_speedup"] = round(
        figures["without_archive_first_write_s"] / figures["with_archive_first_write_s"], 3
    )
    return figures


def markdown(figures: dict[str, Any]) -> list[str]:
    """The start-up table: medians with the archive and without it."""
    if "skipped" in figures:
        return [f"Start-up: skipped, {figures['skipped']}.", ""]
    rows = [("session ready", "session_s"), ("first Delta write done", "first_write_s"),
            ("process exited", "process_s")]  # fmt: skip
    lines = [
        f"Local start-up, a new process to its first Delta write (median of {figures['rounds']}):",
        "",
        "| from process start | with class archive s | without s |",
        "|---|---:|---:|",
    ]
    for label, key in rows:
        with_, without = figures[f"with_archive_{key}"], figures[f"without_archive_{key}"]
        lines.append(f"| {label} | {with_:.2f} | {without:.2f} |")
    return [
        *lines,
        f"| first write, without / with | {figures['first_write_speedup']:.2f}× | |",
        "",
    ]
