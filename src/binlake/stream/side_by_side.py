"""Tables applied side by side: a few threads at once, the tables of one silver table in turn."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from binlake.config.settings import Config
from binlake.silver.routes import group_by_silver

_T = TypeVar("_T")


#: Tables applied at once: each is a few small Spark jobs and Delta commits, mostly waiting on
#: the JVM's driver-side work, so more threads than cores keep the cores busy.
APPLY_THREADS = 8


def side_by_side(step: Callable[[str], _T], names: list[str], config: Config) -> list[_T]:
    """`step` of each table ("db.table"), up to `APPLY_THREADS` at once, but one after another
    for the tables of one silver (a route's members: two writes into one Delta table
    conflict); the first failure is raised."""

    def in_turn(group: list[str]) -> list[_T]:
        return [step(name) for name in group]

    groups = group_by_silver(config, names)
    with ThreadPoolExecutor(max_workers=max(min(len(groups), APPLY_THREADS), 1)) as pool:
        return [done for group in pool.map(in_turn, groups) for done in group]
