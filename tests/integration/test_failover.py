"""A source replaced under the lake: a replica promoted after a failover, a binlog reset.

Two MariaDB servers the test starts: a primary and a GTID replica of it (`log_slave_updates`,
the same binlog basename, so the primary's file names exist on the replica with other
contents). binlake snapshots and streams from the primary with writes racing; the primary
stops with changes the stream has not read yet, the replica is promoted and the config points
at it. The stream finds its GTID position in the replica's binlog and goes on from there, on
the lake's next lineage; silver equals the new source and the changelog holds each change
once. Then the new primary's binlog is reset (`RESET MASTER` keeping the GTID state), and the
stream follows it again.
"""

from __future__ import annotations

import subprocess
from dataclasses import replace
from typing import Any

import pytest

from binlake.errors import BinlogResetError, SourceError
from binlake.jobs import commands
from binlake.lake.files import ArrowFiles
from binlake.lake.tables import lake_table
from binlake.mysql.lineage import current_lineage
from binlake.stream.task import checkpoint_offset, planned_offset

from .assertions import assert_lands_exactly
from .items import ITEMS, Racer, logged_events, running_stream, stream_losing_its_commit, wait_for
from .replay import connect
from .servers import DB_SH, PrivateServer

pytestmark = pytest.mark.integration

DATABASE = "shop"


def _sql(server: PrivateServer, statement: str, args: Any = None) -> list[tuple[Any, ...]]:
    with connect(server.db_env) as conn, conn.cursor() as cur:
        cur.execute(statement, args)
        return list(cur.fetchall())


def _replicate(primary: PrivateServer, replica: PrivateServer) -> None:
    """Make `replica` a GTID replica of `primary`, from the primary's position now."""
    (position,) = _sql(primary, "SELECT @@GLOBAL.gtid_binlog_pos")[0]
    with connect(replica.db_env) as conn, conn.cursor() as cur:
        cur.execute("SET GLOBAL gtid_slave_pos = %s", (position,))
        cur.execute(
            "CHANGE MASTER TO MASTER_HOST = '127.0.0.1', MASTER_PORT = %s, MASTER_USER = "
            "'binlake', MASTER_PASSWORD = %s, MASTER_USE_GTID = slave_pos",
            (primary.port, primary.password),
        )
        cur.execute("START SLAVE")


def _promote(primary: PrivateServer, replica: PrivateServer) -> None:
    """A planned failover: the replica applies all the primary wrote, the primary stops, the
    replica stops replicating and takes writes."""
    (position,) = _sql(primary, "SELECT @@GLOBAL.gtid_binlog_pos")[0]
    assert _sql(replica, "SELECT MASTER_GTID_WAIT(%s, 120)", (position,))[0][0] == 0
    primary.stop()
    _sql(replica, "STOP SLAVE")
    _sql(replica, "RESET SLAVE ALL")


def _create_items(primary: PrivateServer) -> None:
    with connect(primary.db_env) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE `{DATABASE}`")
        cur.execute(f"USE `{DATABASE}`")
        cur.execute(ITEMS)
        cur.executemany(
            "INSERT INTO items (id, name, qty, price) VALUES (%s, %s, 0, 1.25)",
            [(i, f"item{i}") for i in range(1, 401)],
        )


def _check(spark: Any, server: PrivateServer, config: Any) -> None:
    assert_lands_exactly(spark, server.db_env, config, "items")
    # Offsets of two lineages never collide, so also by content: the racer's updates add 1
    # to qty, and an id is inserted and deleted once, so no change repeats an image.
    changelog = lake_table(config.lake, "bronze", DATABASE, "items__changelog").read(spark)
    images = changelog.select("_op", "_before.id", "_before.qty", "_after.id", "_after.qty")
    assert changelog.count() == images.distinct().count()


def test_a_promoted_replica_and_a_reset_binlog_resume_by_gtid(
    spark: Any, private_mariadb: Any, make_private_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    primary = private_mariadb({})
    replica = private_mariadb({"server_id": "2", "log_slave_updates": "1"})
    _replicate(primary, replica)
    _create_items(primary)
    on_primary = make_private_config(
        primary, DATABASE, snapshot={"chunk_size": 100}, lake={"event_log": True}
    )
    with Racer(primary.db_env, DATABASE):
        commands.run(spark, on_primary)
    left = checkpoint_offset(ArrowFiles(), on_primary)
    assert left is not None and left.gtid  # the stream records its GTID position
    with Racer(primary.db_env, DATABASE) as racer:  # changes the stream has not read
        while racer.statements < 100:
            racer.stop.wait(0.1)
        # A DDL in the batch that is lost: re-applied on replay, its default would overwrite
        # the values written after it (silent on the parent commit).
        _sql(
            primary,
            f"ALTER TABLE `{DATABASE}`.items ADD COLUMN extra VARCHAR(4) NOT NULL DEFAULT 'dflt'",
        )
        _sql(primary, f"UPDATE `{DATABASE}`.items SET extra = 'set' WHERE id % 3 = 0")
    # A batch planned, applied to silver and the changelog, its checkpoint commit lost: the
    # stream replays it first, on the new server, and must read the same transactions there.
    stream_losing_its_commit(spark, on_primary, monkeypatch)
    planned = planned_offset(ArrowFiles(), on_primary)
    assert planned is not None and planned > left and planned.gtid
    _sql(primary, "FLUSH BINARY LOGS")
    _promote(primary, replica)
    _sql(replica, "FLUSH BINARY LOGS")  # the primary's file names exist on the replica too

    on_replica = make_private_config(
        replica, DATABASE, snapshot={"chunk_size": 100}, lake={"event_log": True}
    )
    # A snapshot that would record offsets refuses the new server until the stream moved the
    # lake onto it, and resets nothing; `binlake run` (the bundle's job) finds nothing to read.
    bronze = lake_table(on_replica.lake, "bronze", DATABASE, "items").read(spark).count()
    with pytest.raises(SourceError, match="Run `binlake stream` first"):
        commands.snapshot(spark, on_replica, ["items"], reset=True)
    assert lake_table(on_replica.lake, "bronze", DATABASE, "items").read(spark).count() == bronze
    with Racer(replica.db_env, DATABASE):
        commands.run(spark, on_replica)
    commands.stream(spark, on_replica, available_now=True)
    _check(spark, replica, on_replica)
    moved = checkpoint_offset(ArrowFiles(), on_replica)
    assert moved is not None and moved.lineage == 1 and moved.file.endswith("@1")
    lineage = current_lineage(ArrowFiles(), on_replica)
    assert (lineage.number, lineage.server_id) == (1, 2)
    (replaced,) = logged_events(spark, on_replica, "source_replaced")
    assert replaced.gtid == left.gtid and replaced.file.endswith("@1")

    # The binlog reset, its GTID state kept: the stream finds its position again.
    (state,) = _sql(replica, "SELECT @@GLOBAL.gtid_binlog_state")[0]
    _sql(replica, "RESET MASTER")
    _sql(replica, "SET GLOBAL gtid_binlog_state = %s", (state,))
    with Racer(replica.db_env, DATABASE, pause=0.02):
        commands.stream(spark, on_replica, available_now=True)
    commands.stream(spark, on_replica, available_now=True)
    _check(spark, replica, on_replica)
    assert current_lineage(ArrowFiles(), on_replica).number == 2

    # Reset without its GTID state, the position is nowhere: a clear stop, nothing written.
    with Racer(replica.db_env, DATABASE) as racer:
        while racer.statements < 20:
            racer.stop.wait(0.1)
    _sql(replica, "RESET MASTER")
    with connect(replica.db_env, DATABASE) as conn, conn.cursor() as cur:
        cur.execute("UPDATE items SET qty = qty + 1 WHERE id <= 5")
    lost = r"does not hold the stream's position .* `binlake snapshot --tables items --reset`"
    with pytest.raises(BinlogResetError, match=lost):
        commands.stream(spark, on_replica, available_now=True)


def test_a_replica_promoted_behind_the_same_address_under_a_running_stream(
    spark: Any, private_mariadb: Any, make_private_config: Any
) -> None:
    """The failover a virtual IP or a DNS name makes: the continuous stream reads the primary,
    writes racing; the primary stops, the replica is promoted and takes the primary's address
    (one account on both, as replication would have made it). The running stream
    reconnects to another server: the batch that meets it fails before it commits, the stream
    starts again, finds its GTID position on the new server and goes on, writes racing."""
    primary = private_mariadb({})
    replica = private_mariadb({"server_id": "2", "log_slave_updates": "1"})
    _replicate(primary, replica)
    with connect(primary.db_env) as conn, conn.cursor() as cur:
        cur.execute("SET SESSION sql_log_bin = 0")
        cur.execute("ALTER USER 'binlake'@'127.0.0.1' IDENTIFIED BY %s", (replica.password,))
    address = replace(primary, password=replica.password)  # the account both servers have
    _create_items(address)
    config = make_private_config(
        address, DATABASE, snapshot={"chunk_size": 100}, stream={"trigger_interval": "1s"}
    )
    commands.snapshot(spark, config)
    files = ArrowFiles()
    with running_stream(spark, config) as stream:
        with Racer(address.db_env, DATABASE) as racer:
            wait_for(
                lambda: racer.statements > 150 and checkpoint_offset(files, config) is not None
            )
        _promote(address, replica)
        replica.stop()  # and up again at the primary's address
        moved = subprocess.run(
            [str(DB_SH), "up"], env={**replica.script_env, "BINLAKE_DB_PORT": str(primary.port)},
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert moved.returncode == 0, moved.stderr
        with Racer(address.db_env, DATABASE):  # the primary's address: the new primary
            wait_for(lambda: _lineage(files, config) == 1, 240)
            assert stream.is_alive()
    left = checkpoint_offset(files, config)
    assert left is not None and left.lineage == 1
    commands.stream(spark, config, available_now=True)
    _check(spark, address, config)  # the primary's address: the new primary


def _lineage(files: ArrowFiles, config: Any) -> int | None:
    """The lineage of the stream's checkpoint offset; None before its first batch."""
    offset = checkpoint_offset(files, config)
    return None if offset is None else offset.lineage


def test_a_replica_promoted_without_rows_a_snapshot_read_stops_the_stream_until_resnapshot(
    spark: Any, private_mariadb: Any, make_private_config: Any
) -> None:
    """A failover that loses a transaction a snapshot read. The stream's position is on the
    promoted replica, but a re-snapshot of `items` read a row past it on the old primary that
    the replica never received: going on would land that row in silver from bronze, and the
    new source never has it. The stream stops with the remedy, a re-snapshot from the new
    source. `notes` was re-snapshotted before the replica stopped, so the replica holds what it
    read; yet its join reads the binlog from its chunks' high watermarks, coordinates in the
    old server's binlog: it stops with the same remedy. After both, silver is the new source."""
    primary = private_mariadb({})
    replica = private_mariadb({"server_id": "2", "log_slave_updates": "1"})
    _replicate(primary, replica)
    _create_items(primary)
    _sql(primary, f"CREATE TABLE `{DATABASE}`.notes AS SELECT id, name FROM `{DATABASE}`.items")
    _sql(primary, f"ALTER TABLE `{DATABASE}`.notes ADD PRIMARY KEY (id)")
    config = make_private_config(primary, DATABASE, snapshot={"chunk_size": 100})
    commands.run(spark, config)
    commands.snapshot(spark, config, ["notes"], reset=True)  # its join is left to the stream
    (position,) = _sql(primary, "SELECT @@GLOBAL.gtid_binlog_pos")[0]
    assert _sql(replica, "SELECT MASTER_GTID_WAIT(%s, 120)", (position,))[0][0] == 0
    _sql(replica, "STOP SLAVE")  # the replica holds all until here, and nothing later
    _sql(primary, f"INSERT INTO `{DATABASE}`.items (id, name, qty, price) VALUES (9999, 'x', 0, 1)")
    commands.snapshot(spark, config, ["items"], reset=True)  # reads row 9999 on the primary
    primary.stop()
    _sql(replica, "RESET SLAVE ALL")

    on_replica = make_private_config(replica, DATABASE, snapshot={"chunk_size": 100})
    silver = lake_table(on_replica.lake, "silver", DATABASE, "items")
    before = silver.read(spark).count()
    remedy = r"past the stream's position, .* `binlake snapshot --tables items --reset`"
    with pytest.raises(BinlogResetError, match=r"snapshot of shop\.items read .*" + remedy):
        commands.stream(spark, on_replica, available_now=True)
    assert silver.read(spark).count() == before
    assert current_lineage(ArrowFiles(), on_replica).number == 1  # a snapshot may read it now
    commands.snapshot(spark, on_replica, ["items"], reset=True)
    join = r"snapshot of shop\.notes was read .* `binlake snapshot --tables notes --reset`"
    with pytest.raises(BinlogResetError, match=join):
        commands.stream(spark, on_replica, available_now=True)
    commands.snapshot(spark, on_replica, ["notes"], reset=True)
    for table in ("items", "notes"):  # changes the stream follows on the new source
        _sql(replica, f"UPDATE `{DATABASE}`.`{table}` SET name = 'moved' WHERE id <= 3")
    commands.stream(spark, on_replica, available_now=True)
    assert_lands_exactly(spark, replica.db_env, on_replica, "items")
    assert_lands_exactly(spark, replica.db_env, on_replica, "notes")
