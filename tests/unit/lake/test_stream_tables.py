"""Issue 24: a stream job's table list (`StreamTables`) takes every change made at once, from
threads (CREATEs applied side by side, a join) and from processes (`snapshot --reset`): none is
lost. Before versions, 8 threads × 20 adds kept about 30 of 160 tables."""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path
from typing import Any

from binlake.lake.files import KEPT_VERSIONS, ArrowFiles
from binlake.lake.paths import TABLES_FOLDER
from binlake.lake.stream_tables import StreamTables
from binlake.model.offsets import BinlogOffset

ADDS = 20


def _add_tables(path: str, writer: int, start: Any) -> None:
    """`ADDS` tables of its own, one change each, as `_apply_ddl` adds a created table; all
    writers start together (`start`: a barrier)."""
    registry = StreamTables(path, ArrowFiles())
    start.wait()
    for index in range(ADDS):
        name = f"db.t{writer}_{index}"
        registry.update(lambda tables, name=name: {**tables, name: None})


def _expected(writers: int) -> set[str]:
    return {f"db.t{w}_{i}" for w in range(writers) for i in range(ADDS)}


def test_changes_from_many_threads_are_all_kept(tmp_path: Path) -> None:
    path = str(tmp_path / TABLES_FOLDER)
    start = threading.Barrier(8)
    threads = [threading.Thread(target=_add_tables, args=(path, w, start)) for w in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert set(StreamTables(path, ArrowFiles()).read()) == _expected(8)


def test_changes_from_many_processes_are_all_kept(tmp_path: Path) -> None:
    """Processes share no lock: only the versions' create-if-absent keeps them apart."""
    path = str(tmp_path / TABLES_FOLDER)
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(4)
    processes = [context.Process(target=_add_tables, args=(path, w, start)) for w in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    assert [p.exitcode for p in processes] == [0] * 4
    assert set(StreamTables(path, ArrowFiles()).read()) == _expected(4)


def test_the_file_from_before_versions_is_read_and_carried_on(tmp_path: Path) -> None:
    offset = BinlogOffset("mysql-bin.000003", 4711)
    (tmp_path / f"{TABLES_FOLDER}.json").write_text(
        json.dumps({"db.a": None, "db.b": offset.to_dict()})
    )
    registry = StreamTables(str(tmp_path / TABLES_FOLDER), ArrowFiles())
    assert registry.exists() and registry.read() == {"db.a": None, "db.b": offset}
    before = registry.update(lambda tables: {t: o for t, o in tables.items() if t != "db.a"})
    assert before == {"db.a": None, "db.b": offset}
    assert registry.read() == {"db.b": offset}
    assert [p.name for p in (tmp_path / TABLES_FOLDER).iterdir()] == [f"{1:020d}.json"]


def test_no_change_writes_nothing_and_old_versions_go(tmp_path: Path) -> None:
    path = tmp_path / TABLES_FOLDER
    registry = StreamTables(str(path), ArrowFiles())
    assert not registry.exists() and registry.read() == {}
    registry.update(lambda tables: {k: v for k, v in tables.items() if k != "db.x"})
    assert not registry.exists()  # a reset of a job without tables creates no empty list
    for index in range(KEPT_VERSIONS + 5):
        registry.update(lambda tables, index=index: {**tables, f"db.t{index}": None})
    assert len(registry.read()) == KEPT_VERSIONS + 5
    assert sorted(int(p.stem) for p in path.iterdir()) == list(range(6, KEPT_VERSIONS + 6))
