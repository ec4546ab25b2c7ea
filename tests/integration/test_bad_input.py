"""Bad input through the real CLI, as a user meets it: `python -m binlake snapshot --config F`
against a real server. Each case ends in exactly one `binlake: error:` line naming the problem,
the exit code of its kind, no traceback, no secret, nothing in the lake, and no JVM: the checks
run before Spark starts (a fake `java` first on the PATH records any start)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from .replay import connect, subprocess_env
from .servers import PrivateServer, free_port, private_server

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
WRONG_PASSWORD = "definitely-not-the-password"
#: Config values only the running test knows (a free port, its database, its tmp_path).
CLOSED_PORT, MISSING_DATABASE, LAKE_UNDER_A_FILE = "<closed>", "<missing db>", "<under a file>"


@dataclass(frozen=True)
class Case:
    code: int
    words: list[str]
    table: str = "CREATE TABLE t (id INT PRIMARY KEY, v INT)"
    #: Config sections merged over the test defaults (make_config's).
    sections: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Extra `snapshot` arguments.
    args: list[str] = field(default_factory=list)
    #: The case must end this fast (seconds): a timeout, not a hang.
    within_s: float = 60.0


_CASES: dict[str, Case] = {
    "wrong_password": Case(
        3,
        ["access denied", "'binlake'", "source.password"],
        sections={"source": {"password": WRONG_PASSWORD}},
    ),
    "closed_port": Case(
        3,
        ["cannot connect to 127.0.0.1:", "Connection refused", "source.port"],
        sections={"source": {"port": CLOSED_PORT}},
        within_s=15,
    ),
    "unroutable_host": Case(
        3,
        ["cannot connect to 10.255.255.1:", "source.host"],
        sections={"source": {"host": "10.255.255.1", "connect_timeout_s": 1}},
        within_s=10,
    ),
    "database_missing": Case(
        4,
        ["database", "_missing'", "does not exist", "source.database"],
        sections={"source": {"database": MISSING_DATABASE}},
    ),
    "table_missing": Case(
        4,
        ["nowhere", "does not exist", "source.tables"],
        sections={"source": {"tables": ["t", "nowhere"]}},
    ),
    "no_replication_privileges": Case(
        4, ["REPLICATION", "GRANT"], sections={"source": {"user": "binlake_ro"}}
    ),
    "no_key_and_no_split_key": Case(
        4, ["has no primary key", "snapshot.split_keys.t"], table="CREATE TABLE t (a INT, b INT)"
    ),
    "split_key_nullable": Case(
        4,
        ["snapshot.split_keys.t", "'a'", "nullable", "NOT NULL"],
        table="CREATE TABLE t (a INT NULL, b INT, UNIQUE KEY (a))",
        sections={"snapshot": {"split_keys": {"t": "a"}}},
    ),
    "split_key_not_unique": Case(
        4,
        ["snapshot.split_keys.t", "'a'", "no single-column UNIQUE index", "candidates: b"],
        table="CREATE TABLE t (a INT NOT NULL, b INT NOT NULL, KEY (a), UNIQUE KEY (b))",
        sections={"snapshot": {"split_keys": {"t": "a"}}},
    ),
    "split_key_float": Case(
        4,
        ["split key 'f'", "float", "floating-point", "snapshot.split_keys.t"],
        table="CREATE TABLE t (f FLOAT NOT NULL, b INT, UNIQUE KEY (f))",
        sections={"snapshot": {"split_keys": {"t": "f"}}},
    ),
    # MariaDB 10.11 has no column type typemap refuses; UUID is one it refuses as a split key.
    "split_key_of_an_unorderable_type": Case(
        4,
        ["split key 'u'", "uuid", "binary form", "snapshot.split_keys.t"],
        table="CREATE TABLE t (u UUID NOT NULL PRIMARY KEY, v INT)",
    ),
    "lake_root_under_a_file": Case(
        5,
        ["lake.root", "afile is a file", "not a directory"],
        sections={"lake": {"root": LAKE_UNDER_A_FILE}},
    ),
    "server_id_range_holds_the_sources_id": Case(
        4,
        ["source.server_id_range [1, 20]", "1 (the source's own @@server_id)", "choose another"],
        sections={"source": {"server_id_range": [1, 20]}},
    ),
    "tables_option_names_an_uncaptured_table": Case(
        2, ["--tables names nope", "captured: t"], args=["--tables", "nope"]
    ),
    "password_env_not_set": Case(
        2,
        ["source.password_env", "'BINLAKE_TEST_UNSET_PASSWORD'", "not set"],
        sections={"source": {"password_env": "BINLAKE_TEST_UNSET_PASSWORD"}},
    ),
    "unknown_key": Case(
        2,
        ["snapshot.chunksize: unknown key", "did you mean 'chunk_size'?"],
        sections={"snapshot": {"chunksize": 100}},
    ),
}


@dataclass(frozen=True)
class Outcome:
    code: int
    stdout: str
    stderr: str
    seconds: float
    jvm_started: bool


def _fake_java(tmp_path: Path) -> tuple[Path, Path]:
    """A `java` that records being run and fails: PySpark's launcher finds it first."""
    bin_dir, marker = tmp_path / "fakebin", tmp_path / "java-was-run"
    bin_dir.mkdir()
    java = bin_dir / "java"
    java.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    java.chmod(0o755)
    return bin_dir, marker


def run_cli(
    tmp_path: Path, raw: dict[str, Any], args: list[str], env: dict[str, str] | None = None
) -> Outcome:
    config_file = tmp_path / "binlake.yml"
    config_file.write_text(yaml.safe_dump(raw))
    bin_dir, marker = _fake_java(tmp_path)
    child_env = {**subprocess_env(), **(env or {})}
    child_env.pop("JAVA_HOME", None)
    child_env["PATH"] = f"{bin_dir}:{child_env['PATH']}"
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "binlake", *args, "--config", str(config_file)],
        cwd=tmp_path,
        env=child_env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return Outcome(
        done.returncode, done.stdout, done.stderr, time.monotonic() - started, marker.exists()
    )


def assert_refused_cleanly(outcome: Outcome, code: int, words: list[str], secret: str) -> None:
    lines = [line for line in outcome.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one stderr line, got:\n{outcome.stderr[-3000:]}"
    line = lines[0]
    assert line.startswith("binlake: error: "), line
    assert outcome.code == code, f"exit code {outcome.code}, expected {code}: {line}"
    for word in words:
        assert word in line, f"{word!r} not in {line!r}"
    assert "Traceback" not in outcome.stderr
    assert "SparkContext" not in outcome.stderr and "WARN" not in outcome.stderr
    assert not outcome.jvm_started, "the CLI started a JVM before refusing"
    assert outcome.stdout == ""
    assert secret not in outcome.stdout + outcome.stderr


def _raw_config(config: Any, sections: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The YAML for a validated config, with `sections` written over it as given (a password
    inline, settings the model would refuse)."""
    raw: dict[str, Any] = config.model_dump(mode="json", exclude_none=True)
    raw["source"].pop("password", None)  # dumped masked
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return raw


@pytest.mark.parametrize("case", sorted(_CASES))
def test_bad_input_is_refused_before_spark_in_one_line(
    case: str,
    db_env: dict[str, str],
    database: str,
    sql: Callable[..., Any],
    make_config: Callable[..., Any],
    tmp_path: Path,
) -> None:
    spec = _CASES[case]
    sql(spec.table)
    raw = _raw_config(make_config(), spec.sections)
    (tmp_path / "afile").write_text("a file where the lake root's parent should be")
    known = {
        CLOSED_PORT: free_port(),
        MISSING_DATABASE: f"{database}_missing",
        LAKE_UNDER_A_FILE: str(tmp_path / "afile" / "lake"),
    }
    for section in raw.values():
        section.update(
            {k: known[v] for k, v in section.items() if isinstance(v, str) and v in known}
        )
    lake = Path(raw["lake"]["root"])

    outcome = run_cli(tmp_path, raw, ["snapshot", *spec.args])

    assert_refused_cleanly(outcome, spec.code, spec.words, db_env["BINLAKE_SOURCE_PASSWORD"])
    assert WRONG_PASSWORD not in outcome.stderr
    assert outcome.seconds < spec.within_s, f"took {outcome.seconds:.1f} s"
    assert not lake.exists(), "a refused start wrote to the lake"


@pytest.mark.parametrize("command", ["stream", "run", "status", "verify"])
def test_every_command_refuses_an_unreachable_source_before_spark(
    command: str, db_env: dict[str, str], make_config: Callable[..., Any], tmp_path: Path
) -> None:
    raw = _raw_config(make_config(), {"source": {"port": free_port()}})

    outcome = run_cli(tmp_path, raw, [command])

    words = ["cannot connect to 127.0.0.1:", "Connection refused", "source.port"]
    assert_refused_cleanly(outcome, 3, words, db_env["BINLAKE_SOURCE_PASSWORD"])
    assert not Path(raw["lake"]["root"]).exists(), "a refused start wrote to the lake"


def test_a_start_that_passes_the_checks_does_reach_the_jvm(
    sql: Callable[..., Any], make_config: Callable[..., Any], tmp_path: Path
) -> None:
    """The control for the cases above: a good config gets past the checks and starts Java
    (here the fake one, which fails: an unexpected error, in one line with its own code)."""
    sql("CREATE TABLE t (id INT PRIMARY KEY)")
    outcome = run_cli(tmp_path, _raw_config(make_config(), {}), ["snapshot"])
    assert outcome.jvm_started
    assert outcome.code == 70, outcome.stderr[-3000:]
    last = outcome.stderr.strip().splitlines()[-1]
    assert last.startswith("binlake: error: unexpected ") and "run with -v" in last, last
    assert "Traceback" not in outcome.stderr


# ---------------------------------------------------------------------------------------------
# Binlog settings binlake cannot work with: each on a throwaway server of its own


_BINLOG_SETTINGS: dict[str, tuple[dict[str, str], list[str]]] = {
    "binlog_off": ({"skip-log-bin": ""}, ["log_bin=OFF", "log_bin=ON"]),
    "statement_format": (
        {"binlog_format": "STATEMENT"},
        ["binlog_format=STATEMENT", "binlog_format=ROW"],
    ),
    "mixed_format": ({"binlog_format": "MIXED"}, ["binlog_format=MIXED", "binlog_format=ROW"]),
    "minimal_row_image": (
        {"binlog_row_image": "MINIMAL"},
        ["binlog_row_image=MINIMAL", "binlog_row_image=FULL"],
    ),
}


@pytest.fixture(scope="module")
def binlog_servers() -> Iterator[Callable[[str], PrivateServer]]:
    """One throwaway server per setting, started when a case first needs it and shared by the
    module's tests (each start costs seconds)."""
    started: dict[str, PrivateServer] = {}
    with ExitStack() as stack:

        def server(case: str) -> PrivateServer:
            if case not in started:
                started[case] = stack.enter_context(private_server(_BINLOG_SETTINGS[case][0]))
                with connect(started[case].db_env) as conn, conn.cursor() as cur:
                    cur.execute("CREATE DATABASE shop")
                    cur.execute("CREATE TABLE shop.t (id INT PRIMARY KEY, v INT)")
            return started[case]

        yield server


@pytest.mark.parametrize("case", sorted(_BINLOG_SETTINGS))
def test_unusable_binlog_setting_is_refused_before_spark(
    case: str,
    binlog_servers: Callable[[str], PrivateServer],
    make_private_config: Callable[..., Any],
    tmp_path: Path,
) -> None:
    server = binlog_servers(case)
    config = make_private_config(server, "shop")
    raw = _raw_config(config, {"source": {"password_env": "BINLAKE_SOURCE_PASSWORD"}})
    outcome = run_cli(tmp_path, raw, ["snapshot"], env={"BINLAKE_SOURCE_PASSWORD": server.password})
    assert_refused_cleanly(outcome, 4, _BINLOG_SETTINGS[case][1], server.password)
    assert not Path(config.lake.root).exists(), "a refused start wrote to the lake"


def test_status_reads_the_lake_without_starting_spark(
    spark: Any,
    sql: Callable[..., Any],
    make_config: Callable[..., Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`binlake status` counts silver exactly (deletion vectors included) with no JVM: the
    fake `java` fails any Spark start."""
    from binlake.jobs import commands
    from binlake.stream import batch_settings

    # Deletes marked by deletion vectors, as by a large batch: a small one rewrites.
    monkeypatch.setattr(batch_settings, "SMALL_SILVER_BYTES", -1)
    monkeypatch.setattr(batch_settings, "REWRITE_BYTES", -1)

    sql("CREATE TABLE t (id INT PRIMARY KEY, v INT)")
    sql("INSERT INTO t VALUES " + ",".join(f"({i}, {i})" for i in range(1, 301)))
    config = make_config()
    commands.snapshot(spark, config)
    commands.stream(spark, config, available_now=True)
    sql("DELETE FROM t WHERE id % 7 = 0")  # silver keeps these rows' files, marked deleted
    commands.stream(spark, config, available_now=True)
    remaining = sql("SELECT COUNT(*) FROM t")[0][0]

    outcome = run_cli(tmp_path, _raw_config(config, {}), ["status"])

    assert outcome.code == 0, outcome.stderr
    assert not outcome.jvm_started
    row = next(
        line
        for line in outcome.stdout.splitlines()
        if line.startswith(f"{config.source.database}.t ")
    )
    chunks, bronze, silver, state = row.split()[1:]
    assert (chunks, bronze, silver, state) == ("3/3", "300", f"{remaining:,}", "finished")
    assert (
        "stream silver: at mysql-bin." in outcome.stdout and "lag 0 binlog bytes" in outcome.stdout
    )

    (tmp_path / "scripted").mkdir()
    scripted = run_cli(tmp_path / "scripted", _raw_config(config, {}), ["status", "--json"])
    assert scripted.code == 0 and not scripted.jvm_started, scripted.stderr
    status = json.loads(scripted.stdout)
    (table,) = [t for t in status["tables"] if t["table"] == f"{config.source.database}.t"]
    assert table == {
        "table": f"{config.source.database}.t", "chunks_done": 3, "chunks_total": 3,
        "bronze_rows": 300, "silver_rows": remaining, "silver_versions": None,
        "snapshot": "finished",
    }  # fmt: skip
    stream = status["stream"]
    assert (stream["job"], stream["lag_bytes"], stream["lag_seconds"]) == ("silver", 0, 0.0)
    assert stream["offset"].startswith("mysql-bin.") and stream["offset"] == stream["head"]
    assert stream["binlog_expiry_seconds"] is None  # the project's server never purges


@pytest.mark.parametrize("command", ["status", "verify"])
def test_a_lake_root_that_is_a_file_is_refused_by_the_reading_commands(
    command: str, db_env: dict[str, str], make_config: Callable[..., Any], tmp_path: Path
) -> None:
    """`status` and `verify` only read the lake, and still say in one line that lake.root
    names a file (before: exit 70, "unexpected NotADirectoryError")."""
    (tmp_path / "afile").write_text("not a lake")
    raw = _raw_config(make_config(), {"lake": {"root": str(tmp_path / "afile")}})

    outcome = run_cli(tmp_path, raw, [command])

    words = ["lake.root", "afile' is a file", "not a directory"]
    assert_refused_cleanly(outcome, 5, words, db_env["BINLAKE_SOURCE_PASSWORD"])


def test_status_of_an_empty_lake_names_where_it_looked(
    sql: Callable[..., Any], make_config: Callable[..., Any], tmp_path: Path
) -> None:
    """A mistyped lake.root reads as "no snapshot yet": the line shows the ledger's path, so
    the typo is visible."""
    sql("CREATE TABLE t (id INT PRIMARY KEY)")
    mistyped = tmp_path / "lakehuose"
    outcome = run_cli(
        tmp_path, _raw_config(make_config(), {"lake": {"root": str(mistyped)}}), ["status"]
    )

    assert outcome.code == 0 and not outcome.jvm_started, outcome.stderr
    assert "no snapshot yet" in outcome.stdout
    assert f"ledger at {mistyped}/_system/chunks" in outcome.stdout, outcome.stdout
