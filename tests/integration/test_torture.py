"""The table lifecycle under a seeded random interleaving of what production does to it: tables
created, truncated and dropped, a table added to the config, `--reset`, `snapshot`, a catch-up
stream, a continuous stream, a batch holding a TRUNCATE crashed before its checkpoint commits,
an XA transaction prepared across a snapshot's read and committed or rolled back during it, a
`CREATE TABLE IF NOT EXISTS` during a reset, a catch-up killed in its own re-snapshot, and
`binlake` processes SIGKILLed at a random moment, with writers racing throughout. After every
round the bundle's catch-up job runs (snapshot, then stream) and every captured table's silver
must equal the source, each change once in its changelog.

`make soak` runs every seed for `BINLAKE_TORTURE_ROUNDS` rounds (default 8): a random interleaving
finds what no chosen sequence did, and each guarantee it checks has its own test of a chosen
sequence in `make test` (kills at each point in test_faults, the lifecycle's steps in
test_lifecycle and test_schema_changes, replays across DDL in test_ddl_replays, XA in
test_xa_transactions). A seed that ever failed joins `SEEDS`, with the round it failed at in a
comment.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from binlake.jobs import commands

from .assertions import assert_changelog_holds_each_change_once, assert_silver_is_source
from .crash import crashed_at
from .items import ITEMS, Racer, running_stream, seed_items
from .replay import subprocess_env
from .xa import PreparedXa

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SEEDS = [1, 2, 3]
ROUNDS = int(os.environ.get("BINLAKE_TORTURE_ROUNDS", "8"))
RUNS = [pytest.param(seed, ROUNDS, id=f"seed{seed}", marks=pytest.mark.soak) for seed in SEEDS]


class Lifecycle:
    """The test's database, config and writers, and the actions a round picks from."""

    def __init__(
        self, spark: Any, sql: Any, db_env: dict[str, str], database: str,
        make_config: Callable[..., Any], tmp_path: Path, rng: random.Random,
    ) -> None:  # fmt: skip
        self.spark, self.sql, self.db_env, self.database = spark, sql, db_env, database
        self.make_config, self.tmp_path, self.rng = make_config, tmp_path, rng
        self.patterns = ["items", "other", "parts", "new_[0-9]+"]
        self.tables = ["items", "other", "parts", "new_0"]  # in the source and captured
        self.created = 0  # new_0 stays: `new_[0-9]+` must match a table
        self.config = self._config()
        self.racers: list[Racer] = []

    def _config(self) -> Any:
        return self.make_config(
            source={"tables": list(self.patterns)},
            snapshot={"chunk_size": 60},
            stream={"trigger_interval": "1s"},
        )

    def race(self) -> None:
        self.racers = [Racer(self.db_env, self.database, t) for t in self.tables]
        for index, racer in enumerate(self.racers):
            racer.rng = random.Random(self.rng.random() + index)
            racer.thread.start()

    def quiesce(self) -> None:
        for racer in self.racers:
            racer.stop.set()
            racer.thread.join()

    # The actions -------------------------------------------------------------------------

    def stream(self) -> None:
        commands.stream(self.spark, self.config, available_now=True)

    def snapshot(self) -> None:
        commands.snapshot(self.spark, self.config)

    def reset(self) -> None:
        commands.snapshot(self.spark, self.config, [self.rng.choice(self.tables)], reset=True)

    def continuous(self) -> None:
        with running_stream(self.spark, self.config):
            time.sleep(self.rng.uniform(2, 8))

    def killed_stream(self) -> None:
        self._killed(["stream", "--available-now"])

    def killed_snapshot(self) -> None:
        args = ["snapshot"]
        if self.rng.random() < 0.5:
            args += ["--tables", self.rng.choice(self.tables), "--reset"]
        self._killed(args)

    def create(self) -> None:
        self.created += 1
        name = f"new_{self.created}"
        self.sql(ITEMS.replace("items", name))
        rows = ", ".join(f"({i}, 'n{i}', {i % 7}, {i}.5, NULL)" for i in range(1, 201))
        self.sql(f"INSERT INTO `{name}` VALUES {rows}")
        self.tables.append(name)

    def truncate(self) -> None:
        self.sql(f"TRUNCATE TABLE `{self.rng.choice(self.tables)}`")

    def truncate_in_killed_batch(self) -> None:
        """Rows, a TRUNCATE and rows again in one batch, whose stream dies once the batch is
        applied, before its checkpoint commits: the rerun replays the batch across its DDL."""
        table = self.rng.choice(self.tables)
        self.sql(f"UPDATE `{table}` SET qty = qty + 1 WHERE id % 3 = 0")
        self.sql(f"TRUNCATE TABLE `{table}`")
        self.sql(f"INSERT INTO `{table}` (id, name, qty, price) VALUES (1, 'back', 1, 1.50)")
        with crashed_at("binlake.stream.sink:BatchSink.__call__", "after", 1):
            commands.stream(self.spark, self.config, available_now=True)

    def drop(self) -> None:
        created = [t for t in self.tables if t.startswith("new_") and t != "new_0"]
        if created:
            name = self.rng.choice(created)
            self.sql(f"DROP TABLE `{name}`")
            self.tables.remove(name)

    def xa_across_snapshot(self) -> None:
        """An XA transaction prepared before a snapshot reads its table, committed or rolled
        back while it reads: its rows land once committed, never once rolled back."""
        table = self.rng.choice(self.tables)
        how = self.rng.choice(["COMMIT", "ROLLBACK"])
        changes = (
            f"UPDATE `{table}` SET qty = qty + 1000 WHERE id % 7 = 0",
            f"DELETE FROM `{table}` WHERE id % 11 = 0",
            f"INSERT INTO `{table}` (id, name, qty, price) VALUES ({90_000 + self.created}, "
            "'xa', 1, 1.50) ON DUPLICATE KEY UPDATE qty = qty + 1",
        )
        with PreparedXa(self.db_env, self.database, *changes) as xa:
            ending = threading.Timer(self.rng.uniform(0.5, 5), xa.end, (how,))
            ending.start()
            try:
                commands.snapshot(self.spark, self.config, [table], reset=True)
            finally:
                ending.join()

    def create_if_not_exists_in_reset(self) -> None:
        """`CREATE TABLE IF NOT EXISTS` of a table while its `--reset` snapshot reads it (MySQL
        logs it though the table exists; MariaDB does not)."""
        table = self.rng.choice(self.tables)
        statement = ITEMS.replace("CREATE TABLE items", f"CREATE TABLE IF NOT EXISTS `{table}`")
        creating = threading.Timer(self.rng.uniform(0.5, 5), self.sql, (statement,))
        creating.start()
        try:
            commands.snapshot(self.spark, self.config, [table], reset=True)
        finally:
            creating.join()

    def killed_in_resnapshot(self) -> None:
        """`parts` loses a partition's rows without row events: the catch-up that meets it sends
        the table back to its snapshot, and dies once that snapshot is planned, before it reads
        a chunk (if `parts` is in the stream now: else it joins later, by its own snapshot)."""
        self.sql("ALTER TABLE parts TRUNCATE PARTITION p0")
        with crashed_at("binlake.snapshot.task:read_and_commit", "before", 1, required=False):
            commands.stream(self.spark, self.config, available_now=True)

    def add_table(self) -> None:
        if "late" not in self.patterns:
            self.patterns.append("late")
            self.tables.append("late")
            self.config = self._config()

    def _killed(self, args: list[str]) -> None:
        """`binlake ARGS` in a child process, SIGKILLed after a random while (if still running)."""
        config_file = self.tmp_path / "binlake.yml"
        raw = self.config.model_dump(mode="json", exclude_none=True)
        config_file.write_text(yaml.safe_dump(raw))
        command = [sys.executable, "-m", "binlake", *args, "--config", str(config_file)]
        child = subprocess.Popen(
            command, env=subprocess_env(), cwd=ROOT, start_new_session=True,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            child.wait(timeout=self.rng.uniform(4, 25))
        except subprocess.TimeoutExpired:
            os.killpg(child.pid, signal.SIGKILL)
        _, errors = child.communicate(timeout=120)
        assert child.returncode in (0, -signal.SIGKILL), errors.decode()[-3000:]

    # The check ---------------------------------------------------------------------------

    def check(self) -> None:
        """The bundle's catch-up job, then every captured table exact."""
        commands.snapshot(self.spark, self.config)
        commands.stream(self.spark, self.config, available_now=True)
        for table in self.tables:
            assert_silver_is_source(self.spark, self.sql, self.config, table)
            changelog = Path(self.config.lake.path("bronze", self.database, f"{table}__changelog"))
            if changelog.exists():
                assert_changelog_holds_each_change_once(self.spark, self.config, table)


#: `parts`: `items` partitioned, so that a partition's rows can go without row events.
PARTITIONS = (
    " PARTITION BY RANGE (id) (PARTITION p0 VALUES LESS THAN (100),"
    " PARTITION p1 VALUES LESS THAN MAXVALUE)"
)

ACTIONS = [
    "stream", "snapshot", "reset", "continuous", "killed_stream", "killed_snapshot", "create",
    "truncate", "drop", "add_table", "truncate_in_killed_batch", "xa_across_snapshot",
    "create_if_not_exists_in_reset", "killed_in_resnapshot",
]  # fmt: skip


@pytest.mark.parametrize(("seed", "rounds"), RUNS)
def test_lifecycle_torture(
    spark: Any, sql: Any, db_env: dict[str, str], database: str, make_config: Any,
    tmp_path: Path, seed: int, rounds: int,
) -> None:  # fmt: skip
    rng = random.Random(seed)
    seed_items(sql, 400, copy="other")
    for name in ("late", "new_0"):
        sql(ITEMS.replace("items", name))
        sql(f"INSERT INTO `{name}` SELECT * FROM items")
    sql(ITEMS.replace("items", "parts") + PARTITIONS)
    sql("INSERT INTO parts SELECT * FROM items")
    life = Lifecycle(spark, sql, db_env, database, make_config, tmp_path, rng)
    commands.snapshot(spark, life.config)
    done: list[str] = []
    for round_ in range(rounds):
        actions = rng.sample(ACTIONS, 3)
        life.race()
        try:
            for action in actions:
                getattr(life, action)()
        finally:
            life.quiesce()
        done.append(f"round {round_}: {', '.join(actions)}")
        print(f"torture seed {seed} {done[-1]}", flush=True)
        try:
            life.check()
        except AssertionError as failure:
            raise AssertionError(f"seed {seed}, after\n" + "\n".join(done)) from failure
