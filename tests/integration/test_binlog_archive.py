"""A folder of binlog files as the stream's source (`source.binlog_archive`): no server asked.

Two kinds of real bytes. Files real MySQL servers wrote (fixtures/mysql-binlogs: zstd transaction
payloads, GTIDs untagged and tagged, MINIMAL and FULL table maps) streamed into silver and the
changelog, exact against what the file's own row events say, read by python-mysql-replication
and replayed here by key (not by binlake's decoder nor its pipeline). And this machine's MariaDB's
own binlog files, copied as a backup would copy them while a writer races the table and an
ALTER runs: the archive streamed in two runs (a second copy adds the later files; the stream
resumes from its checkpoint), then silver compared with the live table.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from unit.mysql.partial_json_file import full_image_partial_file
from unit.mysql.test_mysql_row_images import landed

from binlake.errors import ConfigError, SourceError
from binlake.jobs import commands
from binlake.jobs.preflight import check_archive
from binlake.lake.tables import lake_table
from binlake.model.typemap import spark_schema
from binlake.mysql.binlog_files import read_binlog_file
from binlake.mysql.table_map_schema import table_map_schema

from .assertions import assert_lands_exactly
from .items import Racer, seed_items

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "mysql-binlogs"
WRITES, UPDATES, DELETES = {23, 30}, {24, 31, 39}, {25, 32}
#: The real json.binlog.000001 with its partial JSON update logged under FULL images (built).
PARTIAL_JSON = "json-full.000001"

#: (file, the database its tables are in, the split key of each: none has a primary key the
#: map names), and what each proves.
ARCHIVES = [
    # MySQL 8.0.31: two zstd TRANSACTION_PAYLOADs in GTID mode, MINIMAL metadata (`@1` …),
    # DATE, DATETIME, ENUM, SET, JSON; an update of a row the file never inserted.
    pytest.param("mysql-bin.000057", "a", {"b": "@1", "test_table_3": "@1"}, id="8.0.31"),
    # MySQL 8.0.28: GTIDs, FULL metadata, ENUM/SET strings; an update of the key, then a delete.
    # A soak run: its rows are decoded and compared in tests/unit/mysql/test_mysql_row_images.py
    # and read as changes in tests/unit/mysql/test_binlog_archive.py; a key-changing update's
    # MERGE is the MariaDB tests' too.
    pytest.param(
        "mysql-enum-string-set.000001",
        "mysql",
        {"t": "f1"},
        id="8.0.28",
        marks=pytest.mark.soak,
    ),
    # MySQL 8.0.22: a PARTIAL_UPDATE_ROWS (`binlog_row_value_options=PARTIAL_JSON`, `$.age`
    # replaced in each row's document) under a FULL row image, built from the real file's own
    # bytes (tests/unit/mysql/partial_json_file.py); generated columns computed from the JSON.
    pytest.param(PARTIAL_JSON, "mysql", {"t": "@1"}, id="8.0.22-partial-json"),
    # MySQL 9.6.0: a tagged GTID (`uuid:mytag:3`) and the 8.4-era FORMAT_DESCRIPTION, DECIMAL.
    # A soak run: tests/unit/mysql/test_live_mysql_events.py reads its tagged GTID live.
    pytest.param(
        "binlog_transaction_with_GTID_TAG.000001",
        "test",
        {"orders": "@1"},
        id="9.6.0",
        marks=pytest.mark.soak,
    ),
    # MySQL 8.0.32: one zstd TRANSACTION_PAYLOAD (mysql-bin.000057 above has two): a soak run.
    pytest.param(
        "transaction_compression.000001", "test", {"tb1": "@1"}, id="8.0.32", marks=pytest.mark.soak
    ),
]


def replayed(path: Path, database: str, keys: dict[str, str]) -> dict[str, Any]:
    """What the file's row events leave, per table: its schema (from the table map), its rows by
    key, and its changes as the changelog holds them, `(op, pos, row)` (a key-changing update:
    a delete and an insert), each value as the snapshot lands it (`landed`: `typemap`)."""
    tables: dict[str, Any] = {}
    for event in read_binlog_file(path):
        decoded = event.decoded
        if event.type_code not in WRITES | UPDATES | DELETES or decoded.schema != database:
            continue
        table_map = decoded.table_map[decoded.table_id]
        schema = table_map_schema(database, decoded.table, table_map, keys[decoded.table])
        found = tables.setdefault(decoded.table, {"schema": schema, "rows": {}, "changes": []})
        rows, changes, key = found["rows"], found["changes"], schema.key_indexes
        pos = event.log_pos or _payload_end(path, event.offset)
        for row in decoded.rows:
            images = [row.get("before_values"), row.get("after_values"), row.get("values")]
            before, after, one = (
                None if image is None else tuple(landed(c, image[c.name]) for c in schema.columns)
                for image in images
            )
            if event.type_code in WRITES:
                before, after = None, one
            elif event.type_code in DELETES:
                before, after = one, None
            if before is not None and (after is None or _key(before, key) != _key(after, key)):
                rows.pop(_key(before, key), None)
                changes.append(("delete", pos, before))
                before = None
            if after is not None:
                rows[_key(after, key)] = after
                changes.append(("insert" if before is None else "update", pos, after))
    return tables


def _instants(values: Iterable[Any]) -> tuple[Any, ...]:
    """Date-times as UTC instants: Spark returns naive ones in this process's zone."""
    return tuple(v.astimezone(UTC) if isinstance(v, datetime) else v for v in values)


def _key(row: tuple[Any, ...], indexes: tuple[int, ...]) -> tuple[Any, ...]:
    return tuple(row[i] for i in indexes)


def _payload_end(path: Path, offset: int) -> int:
    """The end of the TRANSACTION_PAYLOAD at `offset` (its events carry no position)."""
    return next(
        e.log_pos for e in read_binlog_file(path) if e.offset == offset and e.type_code == 40
    )


def _archive_config(
    make_config: Callable[..., Any], folder: Path, database: str, keys: dict[str, str]
) -> Any:
    return make_config(
        source={"binlog_archive": str(folder), "database": database},
        snapshot={"split_keys": keys},
    )


@pytest.mark.parametrize(
    ("name", "database", "keys"),
    ARCHIVES,
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_a_mysql_written_archive_lands_as_its_row_events_say(
    spark: Any,
    make_config: Callable[..., Any],
    tmp_path: Path,
    name: str,
    database: str,
    keys: dict[str, str],
) -> None:
    folder = tmp_path / "archive"
    folder.mkdir()
    if name == PARTIAL_JSON:
        full_image_partial_file(folder, name)
    else:
        shutil.copy(FIXTURES / name, folder / name)
    expected = replayed(folder / name, database, keys)
    assert expected, f"{name} has no row event of {database}"
    config = _archive_config(make_config, folder, database, keys)
    check_archive(config, "stream")

    commands.stream(spark, config, available_now=True)

    for table, found in expected.items():
        schema = spark_schema(found["schema"])
        names = [f.name for f in schema.fields]
        silver = lake_table(config.lake, "silver", database, table).read(spark)
        assert_df_equality(
            silver.select(*[silver[f"`{n}`"] for n in names]),
            spark.createDataFrame(list(found["rows"].values()), schema),
            ignore_row_order=True, ignore_nullable=True,
        )  # fmt: skip
        changelog = lake_table(config.lake, "bronze", database, f"{table}__changelog").read(spark)
        logged = sorted(
            (
                r["_op"],
                r["_file"],
                r["_pos"],
                _instants((r["_after"] or r["_before"])[n] for n in names),
            )
            for r in changelog.collect()
        )
        assert logged == sorted(
            (op, name, pos, _instants(row)) for op, pos, row in found["changes"]
        )
    # The archive read to its end: a second run finds nothing new.
    assert commands.stream(spark, config, available_now=True).changes == 0


def _binlog_files(sql: Callable[..., Any]) -> tuple[Path, list[str]]:
    """The server's binlog folder and its files, oldest first."""
    base = Path(sql("SELECT @@log_bin_basename")[0][0])
    return base.parent, [row[0] for row in sql("SHOW BINARY LOGS")]


def _copy_closed(sql: Callable[..., Any], first: str, folder: Path) -> list[str]:
    """Rotate, then copy the files from `first` up to the one now written (as a backup of
    closed files does); the names copied."""
    sql("FLUSH BINARY LOGS")
    directory, names = _binlog_files(sql)
    closed = names[names.index(first) : -1]
    for name in closed:
        shutil.copy(directory / name, folder / name)
    return closed


def test_a_servers_own_binlog_files_stream_in_two_runs_exactly_with_writes_racing(
    spark: Any,
    make_config: Callable[..., Any],
    sql: Callable[..., Any],
    db_env: dict[str, str],
    database: str,
    tmp_path: Path,
) -> None:
    """MariaDB's binlog files of a table created, written by a racing writer across rotations,
    ALTERed and TRUNCATEd on the way: a first copy streamed, then a second copy of the files
    written since streamed from the checkpoint, and silver equals the live table."""
    folder = tmp_path / "archive"
    folder.mkdir()
    sql("FLUSH BINARY LOGS")
    first = _binlog_files(sql)[1][-1]
    seed_items(sql, 200)
    with Racer(db_env, database):
        time.sleep(1.0)
        sql("FLUSH BINARY LOGS")
        time.sleep(1.0)
    copied = _copy_closed(sql, first, folder)
    config = make_config(source={"binlog_archive": str(folder)})
    check_archive(config, "stream")
    ran = commands.stream(spark, config, available_now=True)
    assert ran.batches >= len(copied) >= 2  # a file per batch

    with Racer(db_env, database):
        time.sleep(0.5)
        sql("ALTER TABLE items ADD COLUMN extra VARCHAR(8) NULL AFTER qty")
        sql("UPDATE items SET extra = 'x' WHERE MOD(id, 3) = 0")
        time.sleep(0.5)
        sql("FLUSH BINARY LOGS")
        sql("TRUNCATE TABLE items")
        sql("INSERT INTO items (id, name, qty, price) VALUES (1, 'again', 1, 2.50), (2, 'b', 2, 3)")
        time.sleep(0.5)
    later = _copy_closed(sql, copied[-1], folder)[1:]
    assert later
    # status reads the stream's place in the archive: behind by the files copied since.
    check_archive(config, "status")
    before = commands.status(config, lambda: spark, as_json=True)
    waiting = sum((folder / name).stat().st_size for name in later)
    assert json.loads(before)["stream"]["lag_bytes"] == waiting
    commands.stream(spark, config, available_now=True)
    after = json.loads(commands.status(config, lambda: spark, as_json=True))["stream"]
    newest = f"{later[-1]}:{(folder / later[-1]).stat().st_size}"
    assert (after["lag_bytes"], after["offset"], after["head"]) == (0, newest, newest)

    assert_lands_exactly(spark, db_env, config, "items")
    silver = lake_table(config.lake, "silver", database, "items").read(spark)
    assert "extra" in silver.columns


def test_an_archive_is_refused_clearly_where_it_cannot_serve(
    make_config: Callable[..., Any], tmp_path: Path
) -> None:
    """A folder without binlog files, files not named as a server names them, and commands
    that need the server: each one line naming what to change, before Spark starts."""
    folder = tmp_path / "archive"
    folder.mkdir()
    config = make_config(source={"binlog_archive": str(folder)})
    with pytest.raises(SourceError, match="holds no binlog file"):
        check_archive(config, "stream")
    shutil.copy(FIXTURES / "binlog_small_test", folder / "binlog_small_test")
    with pytest.raises(SourceError, match="without a number after their base name"):
        check_archive(config, "stream")
    with pytest.raises(ConfigError, match="`binlake snapshot` reads the server"):
        check_archive(config, "snapshot")
    with pytest.raises(ConfigError, match="`binlake verify` reads the server"):
        check_archive(config, "verify")
    missing = make_config(source={"binlog_archive": str(tmp_path / "nowhere")})
    with pytest.raises(SourceError, match="is not a folder"):
        check_archive(missing, "stream")
