"""Issue 24: the schema history of one lake is written by every stream job on it and by the
snapshot, each at its own place in the binlog. One writer must never take back what another
recorded: a job behind another meets DDL the other recorded already, and a job and a snapshot
follow DDL at once. Before versions, the job behind dropped every later entry, and racing
writers kept one writer's entries."""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path
from typing import Any

from binlake.lake.files import ArrowFiles
from binlake.model.offsets import BinlogOffset
from binlake.model.schema import Column, TableSchema
from binlake.mysql.schema_history import SchemaEntry, SchemaHistory, entry_at

TABLE = "db.orders"
RECORDS = 12


def _schema(columns: int) -> TableSchema:
    names = tuple(Column(f"c{i}", "int", "int(11)", i > 0) for i in range(columns))
    return TableSchema("db", "orders", names, ("c0",), "c0")


def _entry(position: int) -> SchemaEntry:
    """The schema after the DDL at `position`: one column more than before it."""
    return SchemaEntry(
        BinlogOffset("binlog.000001", position * 1000),
        _schema(position + 1),
        f"ALTER TABLE orders ADD c{position} int",
    )


def _history(root: Path) -> SchemaHistory:
    return SchemaHistory(str(root), ArrowFiles())


def test_a_job_behind_keeps_the_entries_a_job_ahead_recorded(tmp_path: Path) -> None:
    """Job A met DDL at 1, 2 and 3; job B, behind it on the same lake, meets DDL 1 and records it
    again. A's next batch, past 3, must still decode with the schema after 3."""
    history = _history(tmp_path)
    history.reset(TABLE, SchemaEntry(BinlogOffset("binlog.000001", 4), _schema(1)))
    for position in (1, 2, 3):
        history.record(TABLE, _entry(position))
    history.record(TABLE, _entry(1))
    assert [e.offset.pos for e in history.entries(TABLE)] == [4, 1000, 2000, 3000]
    assert entry_at(history.entries(TABLE), BinlogOffset("binlog.000001", 3500)) == _entry(3)


def _record_mine(root: str, writer: int, start: Any) -> None:
    """`RECORDS` entries of its own (offsets `writer`, `writer + writers`, ...)."""
    history = SchemaHistory(root, ArrowFiles())
    start.wait()
    for index in range(RECORDS):
        history.record(TABLE, _entry(1 + writer + index * 4))


def _recorded(root: Path) -> list[int]:
    return [e.offset.pos // 1000 for e in _history(root).entries(TABLE)]


def test_entries_recorded_at_once_by_threads_are_all_kept(tmp_path: Path) -> None:
    start = threading.Barrier(4)
    threads = [
        threading.Thread(target=_record_mine, args=(str(tmp_path), w, start)) for w in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert _recorded(tmp_path) == list(range(1, 4 * RECORDS + 1))


def test_entries_recorded_at_once_by_processes_are_all_kept(tmp_path: Path) -> None:
    """Processes (two jobs, or a job and a snapshot) share no lock."""
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(4)
    processes = [
        context.Process(target=_record_mine, args=(str(tmp_path), w, start)) for w in range(4)
    ]
    for process in processes:
        process.start()
    for process in processes:
        process.join()
    assert [p.exitcode for p in processes] == [0] * 4
    assert _recorded(tmp_path) == list(range(1, 4 * RECORDS + 1))


def test_a_history_from_before_versions_is_read_and_carried_on(tmp_path: Path) -> None:
    """Lakes written before versions hold one file per table, `<db>/<table>.json`."""
    old = _history(tmp_path)
    base = SchemaEntry(BinlogOffset("binlog.000001", 4), _schema(1))
    legacy = json.dumps([base.to_json()])
    old.files.write_text(str(tmp_path / "db" / "orders.json"), legacy)
    assert old.entries(TABLE) == [base]
    old.record(TABLE, _entry(1))
    assert old.entries(TABLE) == [base, _entry(1)]


def test_many_tables_reset_and_read_at_once_each_keep_their_own_entries(tmp_path: Path) -> None:
    """A snapshot resets and reads its tables' histories several at once (`reset_all`,
    `entries_of`): more tables than threads, each with a base of its own, one that had DDL
    recorded (the reset drops it), and one never recorded."""
    history = _history(tmp_path)
    history.record("db.t000", _entry(5))
    tables = [f"db.t{i:03d}" for i in range(30)]
    bases = {
        name: SchemaEntry(BinlogOffset("binlog.000002", 4 + i), _schema(1 + i % 5))
        for i, name in enumerate(tables)
    }
    history.reset_all(bases)

    read = history.entries_of([*reversed(tables), "db.never", tables[3]])

    assert list(read) == [*reversed(tables), "db.never"]
    assert read == {**{name: [base] for name, base in bases.items()}, "db.never": []}
