"""Schema migrations that land while binlake works: the real `pt-online-schema-change` (Percona
Toolkit) on `items`, and DDL started in the middle of a snapshot's commit batch."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from binlake.snapshot import task as snapshot_task

#: A column added, one widened and one renamed: the tool renames on its shadow (`ALTER TABLE
#: _items_new CHANGE note remark ...`) and copies the values under the new name, so the cut-over
#: alone shows a column gone and another new. Before the shadow's ALTER was followed, silver took
#: `remark` as a new column, NULL in the 200 of 1,000 rows the source holds a value for.
ALTER = (
    "ADD COLUMN region VARCHAR(8) NOT NULL DEFAULT 'eu', MODIFY name VARCHAR(40) NOT NULL, "
    "CHANGE note remark VARCHAR(30) NULL"
)


def pt_online_schema_change(
    db_env: dict[str, str], database: str, tmp: Path, alter: str = ALTER
) -> None:
    """Run the real tool on `items`; the password travels in a 0600 option file, never argv.
    (`--no-check-alter`: the tool refuses a column rename unless told it checked the rename it
    detected, which it then copies.)"""
    tool = shutil.which("pt-online-schema-change")
    assert tool, "percona-toolkit is not installed: run `make setup`"
    options = tmp / "pt.cnf"
    options.write_text(f"[client]\nuser=binlake\npassword={db_env['BINLAKE_SOURCE_PASSWORD']}\n")
    options.chmod(0o600)
    dsn = f"F={options},h=127.0.0.1,P={db_env['BINLAKE_DB_PORT']},D={database},t=items"
    done = subprocess.run(
        [tool, "--alter", alter, "--execute", "--recursion-method=none", "--chunk-size=200",
         "--no-check-unique-key-change", "--no-check-alter", "--set-vars=lock_wait_timeout=10",
         dsn],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Swapped original and new tables OK" in done.stdout


def migrate_during_batches(monkeypatch: Any, sql: Any, migrations: dict[int, list[str]]) -> None:
    """Run `migrations[n]` while the snapshot reads its commit batch `n` (the batch's window
    crosses them): the snapshot's own batch step, wrapped, starts them a moment after it."""
    real = snapshot_task.read_and_commit
    started = 0

    def read_and_commit(*args: Any, **kwargs: Any) -> Any:
        nonlocal started
        started += 1
        if started in migrations:
            statements = migrations.pop(started)
            threading.Thread(target=run_soon, args=(sql, statements), daemon=True).start()
        return real(*args, **kwargs)

    monkeypatch.setattr(snapshot_task, "read_and_commit", read_and_commit)


def run_soon(sql: Any, statements: list[str]) -> None:
    time.sleep(0.3)
    for statement in statements:
        sql(statement)
