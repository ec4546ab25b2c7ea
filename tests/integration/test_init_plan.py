"""The first five minutes against the real server: `binlake init` writes a config that loads and
that `binlake plan` takes; `plan` shows the snapshot planner's own chunks and the ledger's
progress without importing pyspark; bad input ends in one line. Spark-free, so fast."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from deltalake import write_deltalake

from binlake.config.settings import load_config
from binlake.lake.paths import ledger_path
from binlake.mysql.connection import connection
from binlake.mysql.discovery import load_schema
from binlake.snapshot.chunk_states import FINISHED, MARK, PENDING
from binlake.snapshot.chunks import encode_key
from binlake.snapshot.planner import plan_table

from .replay import subprocess_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]


def binlake(
    cwd: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python -m binlake ARGS` in `cwd`, stdin not a terminal."""
    return subprocess.run(
        [sys.executable, "-m", "binlake", *args],
        cwd=cwd,
        env=env or subprocess_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def init(cwd: Path, db_env: dict[str, str], database: str, *more: str) -> Any:
    port = db_env["BINLAKE_DB_PORT"]
    return binlake(cwd, "init", "--port", port, "--database", database, *more)


def config_file(config: Any, path: Path) -> Path:
    """A validated config written as YAML (the password stays in the environment)."""
    raw = config.model_dump(mode="json", exclude_none=True)
    raw["source"].pop("password", None)
    path.write_text(yaml.safe_dump(raw))
    return path


def plan_rows(stdout: str, database: str) -> dict[str, list[str]]:
    """The plan's rows of `database`'s tables by table: their cells (two spaces or more part
    them)."""
    rows = [re.split(r" {2,}", line) for line in stdout.splitlines()]
    return {cells[0]: cells for cells in rows if cells[0].startswith(f"{database}.")}


def one_error_line(done: subprocess.CompletedProcess[str], code: int) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith("binlake: error: "), lines[0]
    assert done.returncode == code, (done.returncode, lines[0])
    assert done.stdout == ""
    return lines[0]


def test_init_writes_a_config_that_loads_and_plan_takes(
    db_env: dict[str, str], database: str, sql: Callable[..., Any], tmp_path: Path
) -> None:
    sql("CREATE TABLE items (id INT PRIMARY KEY, v INT)")
    sql("CREATE TABLE order_lines (order_id INT, line_no INT, PRIMARY KEY (order_id, line_no))")
    sql("CREATE TABLE codes (code VARCHAR(8) NOT NULL, note TEXT, UNIQUE KEY (code))")
    sql("CREATE TABLE raw_log (a INT, b INT)")
    sql("CREATE VIEW item_view AS SELECT id FROM items")
    sql("INSERT INTO items VALUES (1, 1), (2, 2), (3, 3)")

    done = init(tmp_path, db_env, database)

    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [
        "wrote binlake.yml: 3 tables; left out, refused (the file says why): raw_log",
        "next: binlake plan --config binlake.yml",
    ]
    text = (tmp_path / "binlake.yml").read_text()
    assert db_env["BINLAKE_SOURCE_PASSWORD"] not in text + done.stdout + done.stderr
    config = load_config(tmp_path / "binlake.yml")
    assert config.source.database == database
    assert config.source.password is None
    assert config.source.password_env == "BINLAKE_SOURCE_PASSWORD"
    assert config.source.tables == ["codes", "items", "order_lines"]  # no view, no raw_log
    assert config.snapshot.split_keys == {"codes": "code"}
    lines = text.splitlines()
    assert any(re.match(r"\s+- items\s+# key id, ~\d+ rows$", line) for line in lines), text
    composite = "# key order_id, line_no, split by order_id"
    assert any("- order_lines" in line and composite in line for line in lines), text
    split = "# split by code (snapshot.split_keys)"
    assert any("- codes" in line and split in line for line in lines), text
    refused = " ".join(line.strip(" #") for line in lines[lines.index(_line(lines, "raw_log")) :])
    assert "has no primary key: set snapshot.split_keys.raw_log" in refused, text

    planned = binlake(tmp_path, "plan", "--config", "binlake.yml")

    assert planned.returncode == 0, planned.stderr
    rows = plan_rows(planned.stdout, database)
    assert set(rows) == {f"{database}.{t}" for t in ("codes", "items", "order_lines")}
    assert rows[f"{database}.order_lines"][1:3] == ["order_id, line_no", "order_id"]
    assert rows[f"{database}.codes"][1:3] == ["code", "code"]
    items = rows[f"{database}.items"]
    assert (items[4], items[6]) == ("1 chunk", "planned now")
    assert "no plan recorded" in planned.stdout
    assert planned.stderr == ""


def test_init_splits_by_the_key_column_binlake_can_use_and_refuses_what_the_jobs_refuse(
    db_env: dict[str, str], database: str, sql: Callable[..., Any], tmp_path: Path
) -> None:
    """A composite key led by a FLOAT is split by its next column; a UUID key with no other
    column to split by, and a column name silver cannot address, are refused in the jobs' own
    words."""
    sql("CREATE TABLE measures (f FLOAT NOT NULL, n INT NOT NULL, PRIMARY KEY (f, n))")
    sql("CREATE TABLE tokens (u UUID PRIMARY KEY, v INT)")
    sql("CREATE TABLE odd (id INT PRIMARY KEY, `a``b` INT)")

    done = init(tmp_path, db_env, database)

    assert done.returncode == 0, done.stderr
    config = load_config(tmp_path / "binlake.yml")
    assert config.source.tables == ["measures"]
    assert config.snapshot.split_keys == {"measures": "n"}
    lines = (tmp_path / "binlake.yml").read_text().splitlines()
    measures = next(line for line in lines if "- measures" in line)
    assert re.search(r"# key f, n, split by n \(snapshot.split_keys\), ~\d+ rows$", measures)
    text = " ".join(line.strip(" #") for line in lines)
    assert "split key 'u'" in text and "binary form" in text, text
    assert "has a backtick in its name" in text, text


def _line(lines: list[str], table: str) -> str:
    return next(line for line in lines if f"- {table}" in line)


def test_init_refuses_to_overwrite_a_file_unless_forced(
    db_env: dict[str, str], database: str, sql: Callable[..., Any], tmp_path: Path
) -> None:
    sql("CREATE TABLE t (id INT PRIMARY KEY)")
    existing = tmp_path / "mine.yml"
    existing.write_text("# my own config\n")

    refused = init(tmp_path, db_env, database, "--output", "mine.yml")

    line = one_error_line(refused, 2)
    assert "'mine.yml' exists" in line and "--force" in line, line
    assert existing.read_text() == "# my own config\n"

    forced = init(tmp_path, db_env, database, "--output", "mine.yml", "--force")

    assert forced.returncode == 0, forced.stderr
    assert load_config(existing).source.tables == ["t"]


def test_init_without_a_password_or_a_terminal_says_which_variable(
    db_env: dict[str, str], database: str, tmp_path: Path
) -> None:
    env = subprocess_env()
    env.pop("BINLAKE_TEST_UNSET", None)
    done = binlake(
        tmp_path,
        "init",
        "--port",
        db_env["BINLAKE_DB_PORT"],
        "--database",
        database,
        "--password-env",
        "BINLAKE_TEST_UNSET",
        env=env,
    )
    line = one_error_line(done, 2)
    assert "'BINLAKE_TEST_UNSET'" in line and "not set" in line, line
    assert not (tmp_path / "binlake.yml").exists()


@pytest.mark.parametrize(
    ("table", "rows"),
    [
        # Evenly spread keys: the arithmetic split.
        ("CREATE TABLE t (id INT PRIMARY KEY)", "SELECT n FROM seq"),
        # Gaps far beyond the distribution factor's bound: the uneven split, a query per chunk.
        ("CREATE TABLE t (id BIGINT PRIMARY KEY)", "SELECT n * n * n * 1000 FROM seq"),
        # A string key under a _ci collation.
        (
            "CREATE TABLE t (k VARCHAR(16) PRIMARY KEY)",
            "SELECT CONCAT(IF(n % 2, 'a', 'B'), n) FROM seq",
        ),
    ],
    ids=["even", "uneven", "collated-string"],
)
def test_plan_counts_the_chunks_the_snapshot_planner_plans(
    table: str,
    rows: str,
    database: str,
    sql: Callable[..., Any],
    make_config: Callable[..., Any],
    tmp_path: Path,
) -> None:
    sql(table)
    sql(
        "INSERT INTO t WITH RECURSIVE seq(n) AS "
        f"(SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < 900) {rows}"
    )
    config = make_config(snapshot={"chunk_size": 100})
    with connection(config.source) as conn:
        expected = plan_table(
            conn, load_schema(conn, config.source.database, "t", {}), config.snapshot
        )

    done = binlake(tmp_path, "plan", "--config", str(config_file(config, tmp_path / "c.yml")))

    assert done.returncode == 0, done.stderr
    [cells] = plan_rows(done.stdout, database).values()
    assert cells[4] == f"{len(expected)} chunks"
    assert len(expected) > 1


def test_plan_shows_what_the_ledger_holds(
    database: str, sql: Callable[..., Any], make_config: Callable[..., Any], tmp_path: Path
) -> None:
    """A recorded plan is what the snapshot reuses: its chunks, finished ones skipped."""
    sql("CREATE TABLE a (id INT PRIMARY KEY)")
    sql("CREATE TABLE b (id INT PRIMARY KEY)")
    sql("INSERT INTO a VALUES (1), (2)")
    config = make_config(snapshot={"parallelism": 2, "concurrent_tables": 3})
    _record(ledger_path(config), f"{database}.a", chunks=3, finished=1)
    _record(ledger_path(config), f"{database}.b", chunks=1, finished=1)

    done = binlake(tmp_path, "plan", "--config", str(config_file(config, tmp_path / "c.yml")))

    assert done.returncode == 0, done.stderr
    rows = plan_rows(done.stdout, database)
    a, b = rows[f"{database}.a"], rows[f"{database}.b"]
    assert (a[4], a[6]) == ("3 chunks", "recorded, 1/3 finished")
    assert (b[4], b[6]) == ("1 chunk", "finished: skipped")
    low = config.source.server_id_range[0]
    assert "2 tables, 4 chunks (snapshot.chunk_size: 100 rows, more where one key value " in (
        done.stdout
    )
    # b is finished: one table is read, with two of its chunks at once.
    assert "source reads at once: up to 2 chunk SELECTs (1 table at once" in done.stdout
    assert f"server ids: snapshot readers {low}-{low + 1}, stream " in done.stdout
    assert "2 tables planned, 2 of 4 chunks finished" in done.stdout


def _record(path: str, table: str, chunks: int, finished: int) -> None:
    """A ledger's plan rows for `table` and mark rows for its first `finished` chunks, written
    with delta-rs as the snapshot's Spark job would write them."""
    now = datetime.now(UTC)
    plans = [
        {"table": table, "chunk_id": i, "split_column": "id", "start": encode_key(i * 10 or None),
         "end": encode_key((i + 1) * 10 if i + 1 < chunks else None), "status": PENDING,
         "lw_file": None, "lw_pos": None, "hw_file": None, "hw_pos": None, "rows": None,
         "updated_at": now, "hw_gtid": None}
        for i in range(chunks)
    ]  # fmt: skip
    marks = [
        {**plan, "split_column": MARK, "start": None, "end": None, "status": FINISHED,
         "lw_file": "b.000001", "lw_pos": 4, "hw_file": "b.000001", "hw_pos": 8, "rows": 10}
        for plan in plans[:finished]
    ]  # fmt: skip
    schema = pa.schema(
        [("table", pa.string()), ("chunk_id", pa.int32()), ("split_column", pa.string()),
         ("start", pa.string()), ("end", pa.string()), ("status", pa.string()),
         ("lw_file", pa.string()), ("lw_pos", pa.int64()), ("hw_file", pa.string()),
         ("hw_pos", pa.int64()), ("rows", pa.int64()), ("updated_at", pa.timestamp("us", "UTC")),
         ("hw_gtid", pa.string())]
    )  # fmt: skip
    write_deltalake(path, pa.Table.from_pylist(plans + marks, schema), mode="append")


def test_plan_imports_no_pyspark(
    sql: Callable[..., Any], make_config: Callable[..., Any], tmp_path: Path
) -> None:
    """The plan answers without Spark: pyspark is never imported (so no JVM either)."""
    sql("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(8), ts TIMESTAMP NULL)")
    path = config_file(make_config(), tmp_path / "c.yml")
    probe = (
        "import json, sys; from binlake.jobs.cli import main; "
        f"code = main(['plan', '--config', {str(path)!r}]); "
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'); "
        "print(json.dumps([code, loaded]), file=sys.stderr)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=subprocess_env(), capture_output=True, text=True,
        timeout=120, check=True,
    )  # fmt: skip
    code, loaded = json.loads(done.stderr.strip().splitlines()[-1])
    assert code == 0, done.stderr
    assert loaded == []


@pytest.mark.parametrize(
    ("override", "code", "words"),
    [
        ("source.tables=t,nowhere", 4, ["table", ".nowhere does not exist", "source.tables"]),
        ("source.password=not-the-password", 3, ["access denied", "'binlake'"]),
        ("source.database=no_such_database_70", 4, ["'no_such_database_70' does not exist"]),
    ],
)
def test_plan_refuses_bad_input_in_one_line(
    override: str,
    code: int,
    words: list[str],
    db_env: dict[str, str],
    sql: Callable[..., Any],
    make_config: Callable[..., Any],
    tmp_path: Path,
) -> None:
    sql("CREATE TABLE t (id INT PRIMARY KEY)")
    path = config_file(make_config(), tmp_path / "c.yml")

    done = binlake(tmp_path, "plan", "--config", str(path), "--set", override)

    line = one_error_line(done, code)
    for word in words:
        assert word in line, line
    assert db_env["BINLAKE_SOURCE_PASSWORD"] not in done.stderr
    assert "not-the-password" not in done.stderr
