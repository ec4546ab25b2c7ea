"""The Spark tasks a session runs at once, which the snapshot's rate cap divides among the
readers that can run: a local session's threads, not its default parallelism (binlake sets
that to 4 for shuffles, and a cap split over 4 readers on 2 threads ran at half its setting)."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest

from binlake.runtime.spark import task_slots


def _session(master: str, default_parallelism: int = 4) -> object:
    context = SimpleNamespace(master=master, defaultParallelism=default_parallelism)
    return SimpleNamespace(sparkContext=context)


@pytest.mark.parametrize(
    ("master", "slots"),
    [
        ("local[2]", 2),
        ("local[16]", 16),
        ("local[3, 2]", 3),  # local[N, maxFailures]
        ("local", 1),
        ("local[*]", os.cpu_count()),
        ("spark://host:7077", 48),  # a cluster: its default parallelism, its executors' cores
        ("yarn", 48),
    ],
)
def test_task_slots(master: str, slots: int) -> None:
    assert task_slots(_session(master, 48)) == slots  # type: ignore[arg-type]
