"""Faults of a production source, injected into real runs: the server restarts, binlake's
connections are killed, the binlog rotates, all while a writer races the snapshot and the stream.
Each run ends with silver equal to the source (chispa) and each change once in the changelog.

The source is a throwaway MariaDB (tests/integration/servers.py): the tests stop and start it,
which the shared server must never see.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
import yaml

from binlake.jobs import commands
from binlake.lake.files import ArrowFiles
from binlake.model.offsets import BinlogOffset
from binlake.snapshot.task import run_snapshot
from binlake.stream.task import checkpoint_offset

from .assertions import (
    assert_changelog_holds_each_change_once,
    assert_lands_exactly,
    assert_silver_is_source,
)
from .child_runs import KILL_POINTS, KILL_SNAPSHOT, run_killed, write_config
from .items import ITEMS, Racer, logged_events, seed_items, wait_for
from .replay import connect, subprocess_env
from .servers import PrivateServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
DATABASE = "shop"


class RestartProofRacer(Racer):
    """The racer, reconnecting whenever the server goes away, and rotating the binlog
    (`FLUSH BINARY LOGS`) every `rotate_every` statements, so files change inside chunk windows
    and micro-batches."""

    def __init__(self, server: PrivateServer, rotate_every: int = 40) -> None:
        super().__init__(server.db_env, DATABASE)
        self.rotate_every = rotate_every

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                with connect(self.db_env, self.database) as conn, conn.cursor() as cur:
                    self._write(cur)
            except pymysql.MySQLError:
                self.stop.wait(0.2)  # down or killed: try again

    def _write(self, cur: Any) -> None:
        while not self.stop.is_set():
            statement, args = self._statement()
            with contextlib.suppress(pymysql.err.IntegrityError):
                cur.execute(statement, args)
            self.statements += 1
            if self.statements % self.rotate_every == 0:
                cur.execute("FLUSH BINARY LOGS")
            self.stop.wait(0.01)


def _create_items(server: PrivateServer, rows: int) -> None:
    with connect(server.db_env) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{DATABASE}`")
        cur.execute(f"USE `{DATABASE}`")
        cur.execute(ITEMS)
        cur.execute("SET SESSION max_recursive_iterations = %s", (rows,))
        cur.execute(
            "INSERT INTO items (id, name, qty, price) WITH RECURSIVE s(n) AS (SELECT 1 UNION ALL "
            "SELECT n + 1 FROM s WHERE n < %s) SELECT n, CONCAT('item', n), n %% 17, n + 0.25 "
            "FROM s",
            (rows,),
        )


def kill_binlake_connections(server: PrivateServer) -> int:
    """`KILL` every connection of the `binlake` user but this one (the racer's too): what a DBA,
    a proxy failover or an idle timeout does to a job's sessions."""
    with connect(server.db_env) as conn, conn.cursor() as cur:
        return _kill_others(cur)


def _kill_others(cur: Any) -> int:
    """`KILL` the `binlake` user's connections but `cur`'s own; how many there were."""
    cur.execute(
        "SELECT id FROM information_schema.processlist "
        "WHERE user = 'binlake' AND id <> CONNECTION_ID()"
    )
    ids = [row[0] for row in cur.fetchall()]
    for thread in ids:
        with contextlib.suppress(pymysql.MySQLError):  # gone meanwhile
            cur.execute("KILL CONNECTION %s", (thread,))
    return len(ids)


def restart(server: PrivateServer, down_s: float = 2.0) -> None:
    server.stop()
    time.sleep(down_s)
    server.start()


def _check(spark: Any, server: PrivateServer, config: Any) -> None:
    assert_lands_exactly(spark, server.db_env, config, "items")


@contextlib.contextmanager
def running(target: Callable[[], Any]) -> Iterator[tuple[threading.Thread, list[BaseException]]]:
    """Run `target` in a thread; the list receives what it raised."""
    failures: list[BaseException] = []

    def run() -> None:
        try:
            target()
        except BaseException as exc:  # reported by the test
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield thread, failures
    finally:
        thread.join(timeout=600)


def _committed_versions(table: Path) -> int:
    return len(list((table / "_delta_log").glob("*.json")))


def test_snapshot_survives_a_source_restart_and_killed_connections(
    spark: Any, private_mariadb: Any, make_private_config: Any
) -> None:
    """The snapshot's reads reconnect with bounded backoff: a restart of the source between
    commits and `KILL`s of its connections mid-chunk cost retries, not the run."""
    server = private_mariadb({})
    _create_items(server, 3000)
    config = make_private_config(
        server,
        DATABASE,
        snapshot={"chunk_size": 40, "parallelism": 2, "chunks_per_commit": 8},
    )
    bronze = Path(config.lake.path("bronze", DATABASE, "items"))
    faults = 0
    started = time.monotonic()
    with (
        RestartProofRacer(server),
        running(lambda: run_snapshot(spark, config)) as (
            snapshot,
            failures,
        ),
    ):
        deadline = time.monotonic() + 240
        while _committed_versions(bronze) < 2 and snapshot.is_alive():
            assert time.monotonic() < deadline, "no bronze commit"
            time.sleep(0.1)
        assert snapshot.is_alive(), f"the snapshot ended before any fault: {failures}"
        restart(server)
        faults += 1
        for _ in range(4):
            time.sleep(1.5)
            if snapshot.is_alive() and kill_binlake_connections(server):
                faults += 1
    assert not failures, f"the snapshot failed: {failures[0]!r}"
    assert faults >= 3, f"only {faults} faults hit the snapshot"
    print(f"snapshot done in {time.monotonic() - started:.0f} s through {faults} faults")
    commands.stream(spark, config, available_now=True)
    _check(spark, server, config)


def _config_file(config: Any, path: Path) -> Path:
    """The config as a file for a child process: the password through an environment variable
    (the dump masks an inline one)."""
    raw = config.model_dump(mode="json", exclude_none=True)
    raw["source"].pop("password", None)
    raw["source"]["password_env"] = "BINLAKE_FAULTS_PASSWORD"
    raw["stream"]["trigger_interval"] = "1s"
    path.write_text(yaml.safe_dump(raw))
    return path


def _head(server: PrivateServer) -> tuple[str, int]:
    with connect(server.db_env) as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        file, pos = cur.fetchone()[:2]
    return file, int(pos)


def test_continuous_stream_survives_source_restarts_and_killed_connections(
    spark: Any, private_mariadb: Any, make_private_config: Any, tmp_path: Path
) -> None:
    """A continuous `binlake stream` keeps running through killed connections (its binlog reader
    and its metadata queries), binlog rotations and two restarts of the source, then catches
    up: silver equals the source and the changelog holds each change once."""
    server = private_mariadb({})
    _create_items(server, 400)
    config = make_private_config(server, DATABASE, snapshot={"chunk_size": 100})
    commands.snapshot(spark, config)
    checkpoint = Path(config.lake.path("_system", "checkpoints", config.stream.job_name))
    log_file = tmp_path / "stream.log"
    env = {**subprocess_env(), "BINLAKE_FAULTS_PASSWORD": server.password}
    command = [
        sys.executable, "-m", "binlake", "stream", "--config",
        str(_config_file(config, tmp_path / "binlake.yml")),
    ]  # fmt: skip
    with log_file.open("w") as log, RestartProofRacer(server) as racer:
        process = subprocess.Popen(
            command, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            cwd=ROOT,
        )  # fmt: skip
        try:
            deadline = time.monotonic() + 240
            while not list((checkpoint / "commits").glob("[0-9]*")):
                assert process.poll() is None, log_file.read_text()[-3000:]
                assert time.monotonic() < deadline, "the stream committed no batch"
                time.sleep(0.2)
            _kill_until_the_stream_reconnects(server, log_file)
            restart(server)
            time.sleep(3)
            kill_binlake_connections(server)
            restart(server, down_s=6.0)  # longer than a trigger interval and a read deadline
            time.sleep(3)
            racer.stop.set()
            racer.thread.join()
            head = _head(server)
            assert process.poll() is None, f"the stream died:\n{log_file.read_text()[-3000:]}"
            _await_stream_at(checkpoint, head, process, log_file)
        finally:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)
    assert racer.statements > 100
    assert "reconnecting" in log_file.read_text(), "no fault reached the stream"
    _check(spark, server, config)


def _kill_until_the_stream_reconnects(server: PrivateServer, log: Path) -> None:
    """`KILL` the stream's connections as soon as they appear (every 5 ms) until it logs a
    reconnect. A batch holds its connections for milliseconds (the head, the binlog read) and
    then applies for seconds: kills far apart keep falling between the reads."""
    deadline = time.monotonic() + 90
    with connect(server.db_env) as conn, conn.cursor() as cur:
        while "reconnecting" not in log.read_text():
            assert time.monotonic() < deadline, "no kill reached the stream"
            _kill_others(cur)
            time.sleep(0.005)


def _await_stream_at(
    checkpoint: Path, head: tuple[str, int], process: subprocess.Popen[bytes], log: Path
) -> None:
    """Wait until the stream has committed a batch ending at or past `head`."""
    deadline = time.monotonic() + 180
    while True:
        assert process.poll() is None, f"the stream died:\n{log.read_text()[-3000:]}"
        commits = sorted(int(p.name) for p in (checkpoint / "commits").glob("[0-9]*"))
        if commits and _batch_end(checkpoint, commits[-1]) >= head:
            return
        assert time.monotonic() < deadline, f"the stream did not reach {head}"
        time.sleep(0.5)


def _batch_end(checkpoint: Path, batch: int) -> tuple[str, int]:
    from binlake.lake.files import ArrowFiles
    from binlake.stream.sink import batch_end

    end = batch_end(ArrowFiles(), str(checkpoint), batch)
    assert end is not None
    return end.file, end.pos


# ---------------------------------------------------------------------------------------------
# The driver killed at each point of the snapshot and of the stream, then rerun

#: Kill points `make test` runs: the snapshot's and the stream's commit boundaries. The others
#: run in `make soak`; their windows are proven faster in-process too (test_silver_apply's
#: replayed batches, test_lifecycle's reset and join killed halfway).
FAST_KILL_POINTS = {"snapshot_between_bronze_and_ledger", "stream_before_checkpoint_commit"}


@pytest.mark.parametrize(
    "point",
    [
        p if p in FAST_KILL_POINTS else pytest.param(p, marks=pytest.mark.soak)
        for p in sorted(KILL_POINTS)
    ],
)
def test_driver_killed_at_each_point_reruns_exactly(
    spark: Any, db_env: dict[str, str], database: str, sql: Any, make_config: Any,
    tmp_path: Path, point: str,
) -> None:  # fmt: skip
    """A `binlake` process killed at `point` while a writer races it; the rerun (and a stream
    after the writer stops) lands silver equal to the source with each change once."""
    seed_items(sql, 600)
    config = make_config(snapshot=KILL_SNAPSHOT)
    config_file = write_config(config, tmp_path / "binlake.yml")
    with Racer(db_env, database):
        if point.startswith("stream"):
            commands.snapshot(spark, config)
            time.sleep(1)  # changes for the stream's first batch
        run_killed(config_file, point)
        commands.run(spark, config)  # the rerun: finishes the snapshot, resumes the stream
    commands.stream(spark, config, available_now=True)
    assert_silver_is_source(spark, sql, config, "items")
    assert_changelog_holds_each_change_once(spark, config, "items")


# ---------------------------------------------------------------------------------------------
# Binlog coordinates that go backwards


def test_a_binlog_reset_under_a_running_stream_stops_it_with_the_remedy(
    spark: Any, private_mariadb: Any, make_private_config: Any
) -> None:
    """`RESET MASTER` while the stream runs: the source's binlog starts again at file 1, before
    the stream's position. On the parent commit the stream waited at its position forever,
    showing no lag, while the source's changes went by; now it stops (exit 6) with the remedy,
    and a start after it refuses the same way. The remedy lands silver equal to the source."""
    from binlake.errors import BinlogPurgedError

    server = private_mariadb({})
    _create_items(server, 300)
    config = make_private_config(
        server, DATABASE, snapshot={"chunk_size": 100}, stream={"trigger_interval": "1s"}
    )
    commands.run(spark, config)
    with RestartProofRacer(server, rotate_every=1000) as racer:
        while racer.statements < 300:
            time.sleep(0.1)
    with running(lambda: commands.stream(spark, config)) as (stream, failures):
        wait_for(lambda: bool(spark.streams.active) or not stream.is_alive())
        time.sleep(3)
        with connect(server.db_env, DATABASE) as conn, conn.cursor() as cur:
            cur.execute("RESET MASTER")
            cur.execute("UPDATE items SET qty = qty + 1 WHERE id <= 20")
        try:
            wait_for(lambda: not stream.is_alive(), timeout=60)
        finally:
            for query in spark.streams.active:
                query.stop()
    assert len(failures) == 1 and isinstance(failures[0], BinlogPurgedError), failures
    for refusal in (str(failures[0]), _refused_start(spark, config)):
        assert "RESET MASTER" in refusal and "binlake snapshot --tables items --reset" in refusal

    commands.snapshot(spark, config, ["items"], reset=True)
    renamed = make_private_config(
        server, DATABASE, snapshot={"chunk_size": 100}, stream={"job_name": "silver-2"}
    )
    commands.stream(spark, renamed, available_now=True)
    _check(spark, server, renamed)


def _refused_start(spark: Any, config: Any) -> str:
    from binlake.errors import BinlogPurgedError

    with pytest.raises(BinlogPurgedError) as raised:
        commands.stream(spark, config, available_now=True)
    return str(raised.value)


# ---------------------------------------------------------------------------------------------
# A resume offset the source has purged


def test_a_stream_behind_for_half_the_binlog_expiry_warns_before_the_purge(
    spark: Any,
    private_mariadb: Any,
    make_private_config: Any,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 26: a stream whose oldest unapplied change is older than half the source's
    `binlog_expire_logs_seconds` warns at its start, naming the time left and the setting;
    one whose backlog is younger, or that has caught up, does not; a running stream behind
    warns again at its batches, and each warning is an event. (The server purges only at
    a rotation, which this test never makes, so the expiry of 8 s loses nothing.)"""
    server = private_mariadb({"binlog_expire_logs_seconds": "8"})
    _create_items(server, 200)
    config = make_private_config(server, DATABASE, snapshot={"chunk_size": 100})
    commands.run(spark, config)

    def warned_after(pause: float, job: Any = config) -> list[str]:
        with RestartProofRacer(server, rotate_every=10**9) as racer:
            while racer.statements < 30:
                time.sleep(0.05)
        time.sleep(pause)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="binlake.stream.task"):
            commands.stream(spark, job, available_now=True)
        return [r.getMessage() for r in caplog.records if "purges binlogs" in r.getMessage()]

    assert warned_after(0.0) == []  # a backlog seconds old
    (warning,) = warned_after(5.0)  # older than 4 s, half the expiry
    assert "catch up within" in warning and "binlog_expire_logs_seconds" in warning, warning
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="binlake.stream.task"):
        commands.stream(spark, config, available_now=True)  # caught up: nothing left to lose
    assert not [r for r in caplog.records if "purges binlogs" in r.getMessage()]

    # A running stream checks again at its batches while it is behind (every 5 min; here every
    # batch), and the event log keeps each warning where the stream stood.
    monkeypatch.setattr("binlake.stream.sink.RETENTION_CHECK_S", 0.0)
    bounded = make_private_config(
        server,
        DATABASE,
        snapshot={"chunk_size": 100},
        stream={"max_bytes_per_batch": 2048},
        lake={"event_log": True},
    )
    start = checkpoint_offset(ArrowFiles(), bounded)
    assert warned_after(5.0, bounded)
    warnings = logged_events(spark, bounded, "retention_warning")
    assert {r.job for r in warnings} == {bounded.stream.job_name}
    behind = [BinlogOffset(r.file, r.position) for r in warnings]
    ours = [b for b in behind if start is not None and b >= start]  # the earlier runs' before
    assert ours[0] == start and max(ours) > start, behind  # the start's, then a batch's
    assert all("purges binlogs" in r.message for r in warnings)
    _check(spark, server, config)


def _purge_behind_the_stream(server: PrivateServer) -> None:
    """Writes (rotating the binlog) while the stream is stopped, then every file purged."""
    with RestartProofRacer(server, rotate_every=25) as racer:
        while racer.statements < 200:
            time.sleep(0.1)
    with connect(server.db_env) as conn, conn.cursor() as cur:
        cur.execute("FLUSH BINARY LOGS")
        cur.execute("SHOW MASTER STATUS")
        cur.execute("PURGE BINARY LOGS TO %s", (cur.fetchone()[0],))


def test_a_purged_resume_offset_starts_the_job_anew_from_a_new_snapshot(
    spark: Any, private_mariadb: Any, make_private_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26, `stream.on_binlog_purged: resnapshot` (the default): the stream's position was
    purged while it was stopped. Its start snapshots the table again and starts the job anew
    under the same name, with writes racing; a crash during that new snapshot is finished by
    the next start. Silver equals the source; the changelog holds each change once; the event
    log says what was lost, where."""
    from binlake.snapshot.task import ChunkScheduler

    server = private_mariadb({})
    _create_items(server, 300)
    config = make_private_config(
        server, DATABASE, snapshot={"chunk_size": 100}, lake={"event_log": True}
    )
    commands.run(spark, config)
    lost_at = checkpoint_offset(ArrowFiles(), config)
    _purge_behind_the_stream(server)

    def killed(self: ChunkScheduler, work: Any) -> Any:
        raise RuntimeError("the new snapshot died")

    with monkeypatch.context() as patched, RestartProofRacer(server):
        patched.setattr(ChunkScheduler, "run", killed)
        with pytest.raises(RuntimeError, match="the new snapshot died"):
            commands.stream(spark, config, available_now=True)
    with RestartProofRacer(server):  # the next start finishes it, writes racing
        commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)
    _check(spark, server, config)

    (purged,) = logged_events(spark, config, "binlog_purged")
    assert (purged.job, purged.tables) == ("silver", [f"{DATABASE}.items"])
    assert BinlogOffset(purged.file, purged.position) == lost_at
    resets = [r for r in logged_events(spark, config, "table_reset") if r.ts > purged.ts]
    assert [r.tables for r in resets] == [[f"{DATABASE}.items"]] * 2  # the killed one, then
    (error,) = logged_events(spark, config, "error")
    assert "the new snapshot died" in error.message
    starts = [r for r in logged_events(spark, config, "stream_start") if r.ts > purged.ts]
    assert starts and all("(initial)" in r.message or "(resume)" in r.message for r in starts)
    assert "(initial)" in starts[0].message  # a first start of the same job, from the snapshot
    assert not ArrowFiles().exists(config.lake.path("_system", "restarts", "silver.json"))


def test_purged_resume_offset_names_the_tables_and_its_remedy_works(
    spark: Any, private_mariadb: Any, make_private_config: Any
) -> None:
    """`stream.on_binlog_purged: stop`: the stream's checkpoint points into a binlog file the
    source purged while the stream was stopped: it refuses to start, naming the tables and the
    remedy, writes nothing; following the remedy lands silver equal to the source again."""
    from binlake.errors import BinlogPurgedError

    server = private_mariadb({})
    _create_items(server, 300)
    config = make_private_config(
        server, DATABASE, snapshot={"chunk_size": 100}, stream={"on_binlog_purged": "stop"}
    )
    commands.run(spark, config)
    _purge_behind_the_stream(server)
    silver = Path(config.lake.path("silver", DATABASE, "items"))
    versions = _committed_versions(silver)

    with pytest.raises(BinlogPurgedError) as raised:
        commands.stream(spark, config, available_now=True)
    message = str(raised.value)
    assert f"{DATABASE}.items" in message, message
    assert "binlake snapshot --tables items --reset" in message, message
    assert "binlake stream --set stream.job_name=silver-2" in message, message
    assert _committed_versions(silver) == versions, "a refused start wrote to silver"

    with RestartProofRacer(server):  # the remedy, with writes racing it
        commands.snapshot(spark, config, ["items"], reset=True)
        renamed = make_private_config(
            server, DATABASE, snapshot={"chunk_size": 100}, stream={"job_name": "silver-2"}
        )
        commands.stream(spark, renamed, available_now=True)
    commands.stream(spark, renamed, available_now=True)
    _check(spark, server, renamed)
