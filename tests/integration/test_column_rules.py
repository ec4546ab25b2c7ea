"""`source.column_rules`: a column left out, a hashed one (part of the row key) and a masked one.
Every raw value holds one token; under writes racing the snapshot and the stream (key moves of
the hashed column included), the token is in no file under the lake (bytes, and every string of
every Parquet file), in no Spark block-manager file and in no log, while silver equals the
source as the rules shape it (chispa) and `verify` agrees. A rename of a ruled column stops the
stream before any value lands under the new name."""

from __future__ import annotations

import hashlib
import logging
import random
import secrets
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from chispa import assert_df_equality

from binlake.errors import BinlakeError, ConfigError, SchemaChangeError
from binlake.jobs import commands
from binlake.lake.tables import lake_table

from .assertions import assert_changelog_holds_each_change_once, assert_no_leak
from .items import wait_for
from .replay import connect

pytestmark = pytest.mark.integration

TOKEN = "rawpii" + secrets.token_hex(6)
SALT = "salt-" + secrets.token_hex(8)
RULES = {"people": {"exclude": ["notes"], "hash": ["email"], "mask": ["phone"]}}
CREATE = (
    "CREATE TABLE people (tenant INT NOT NULL, email VARCHAR(80) NOT NULL, "
    "phone VARCHAR(30) NULL, notes TEXT NULL, name VARCHAR(30) NOT NULL, "
    "PRIMARY KEY (tenant, email))"
)


def _person(i: int) -> tuple[Any, ...]:
    return (i % 7, f"p{i}.{TOKEN}@example.com", f"+33-{TOKEN}-{i}", f"note {TOKEN} {i}", f"n{i}")


def _hashed(value: str) -> str:
    return hashlib.sha256(SALT.encode() + b"\0" + value.encode()).hexdigest()


def _write(db_env: dict[str, str], database: str, stop: threading.Event) -> None:
    """Inserts, updates of every kind of column, moves of the hashed key, deletes."""
    rng = random.Random(11)
    with connect(db_env, database) as conn, conn.cursor() as cur:
        n = 10_000
        while not stop.is_set():
            roll, tenant = rng.random(), rng.randrange(7)
            if roll < 0.3:
                n += 1
                cur.execute("INSERT IGNORE INTO people VALUES (%s, %s, %s, %s, %s)", _person(n))
            elif roll < 0.6:
                cur.execute(
                    "UPDATE people SET phone = %s, notes = %s, name = %s WHERE tenant = %s "
                    "ORDER BY email LIMIT 1",
                    (f"+1-{TOKEN}-{n}", f"changed {TOKEN}", f"m{n}", tenant),
                )
            elif roll < 0.8:
                n += 1
                cur.execute(
                    "UPDATE IGNORE people SET email = %s WHERE tenant = %s ORDER BY email LIMIT 1",
                    (f"moved{n}.{TOKEN}@example.com", tenant),
                )
            else:
                cur.execute(
                    "DELETE FROM people WHERE tenant = %s ORDER BY email LIMIT 1", (tenant,)
                )
            stop.wait(0.01)


def _expected(spark: Any, sql: Callable[..., Any]) -> Any:
    rows = [
        (tenant, _hashed(email), None if phone is None else "****", name)
        for tenant, email, phone, name in sql("SELECT tenant, email, phone, name FROM people")
    ]
    schema = "tenant int, email string, phone string, name string"
    return spark.createDataFrame(rows, schema)


def _assert_token_nowhere(spark: Any, lake_root: Path, logs: str) -> None:
    files = [p for p in lake_root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files)
    for path in files:
        assert_no_leak(TOKEN, str(path), path.read_bytes())
        if path.suffix == ".parquet":  # compressed pages: the decoded strings too
            for column in pq.read_table(path).columns:
                assert TOKEN not in str(column.to_pylist()), f"{TOKEN} in {path}"
    local = Path(spark.conf.get("spark.local.dir", "/tmp"))
    for folder in local.glob("blockmgr-*"):
        for path in (p for p in folder.rglob("*") if p.is_file()):
            assert_no_leak(TOKEN, str(path), path.read_bytes())
    assert_no_leak(TOKEN, "the logs", logs)


def test_excluded_hashed_and_masked_columns_never_land_raw(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    sql: Callable[..., Any],
    make_config: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv("BINLAKE_HASH_SALT", SALT)
    sql(CREATE)
    for i in range(200):
        sql("INSERT INTO people VALUES (%s, %s, %s, %s, %s)", _person(i))
    config = make_config(
        source={"column_rules": RULES},
        snapshot={"chunk_size": 40, "split_keys": {"people": "tenant"}},
    )
    stop = threading.Event()
    writer = threading.Thread(target=_write, args=(db_env, database, stop), daemon=True)
    writer.start()
    try:
        commands.snapshot(spark, config)
        commands.stream(spark, config, available_now=True)
    finally:
        stop.set()
        writer.join()
    commands.stream(spark, config, available_now=True)

    silver = lake_table(config.lake, "silver", database, "people").read(spark)
    assert "notes" not in silver.columns
    actual = silver.select("tenant", "email", "phone", "name")
    assert_df_equality(actual, _expected(spark, sql), ignore_row_order=True, ignore_nullable=True)
    assert_changelog_holds_each_change_once(spark, config, "people")
    changelog = lake_table(config.lake, "bronze", database, "people__changelog").read(spark)
    assert changelog.where("_op = 'delete'").count() > 0  # the key moves and deletes
    assert commands.verify(spark, config) == 0
    out = capfd.readouterr()
    _assert_token_nowhere(spark, Path(config.lake.root), caplog.text + out.out + out.err)

    # A rename of a ruled column under a running stream: it stops before the rename, so no value
    # lands under the new name; started again, the rule naming a column gone is refused.
    stopped: list[BinlakeError] = []

    def follow() -> None:
        try:
            commands.stream(spark, config)
        except BinlakeError as exc:
            stopped.append(exc)

    stream = threading.Thread(target=follow, daemon=True)
    stream.start()
    wait_for(lambda: bool(spark.streams.active) or not stream.is_alive())
    sql("ALTER TABLE people RENAME COLUMN phone TO mobile")
    sql("UPDATE people SET mobile = %s WHERE tenant = 1", (f"+44-{TOKEN}",))
    stream.join(timeout=300)
    assert len(stopped) == 1 and isinstance(stopped[0], SchemaChangeError), stopped
    assert "renames 'phone', which source.column_rules names, to 'mobile'" in str(stopped[0])
    with pytest.raises(ConfigError, match=r"names column 'phone', .* Renamed or dropped since"):
        commands.stream(spark, config, available_now=True)
    renamed = make_config(
        source={"column_rules": {"people": {**RULES["people"], "mask": ["mobile"]}}},
        snapshot={"chunk_size": 40, "split_keys": {"people": "tenant"}},
    )
    with pytest.raises(ConfigError, match=r"snapshot was read with .*phone.* --reset"):
        commands.stream(spark, renamed, available_now=True)
    commands.snapshot(spark, renamed, ["people"], reset=True)
    commands.stream(spark, renamed, available_now=True)
    masked = lake_table(config.lake, "silver", database, "people").read(spark)
    assert {r["mobile"] for r in masked.collect()} == {"****"}
    out = capfd.readouterr()
    _assert_token_nowhere(spark, Path(config.lake.root), caplog.text + out.out + out.err)


@pytest.mark.parametrize(
    ("rules", "refusal"),
    [
        ({"people": {"hash": ["emial"]}}, r"names column 'emial', .* \(did you mean 'email'\?\)"),
        ({"peeple": {"hash": ["email"]}}, r"names 'peeple', .* \(did you mean 'people'\?\)"),
        ({"people": {"exclude": ["email"]}}, r"excludes 'email', part of its row key"),
        ({"people": {"hash": ["tenant"]}}, r"rules 'tenant', the column its snapshot splits by"),
        ({"people": {"mask": ["email"]}}, r"masks 'email', part of its row key"),
    ],
)
def test_a_rule_that_cannot_hold_is_refused_before_any_work(
    spark: Any,
    sql: Callable[..., Any],
    make_config: Any,
    monkeypatch: pytest.MonkeyPatch,
    rules: dict[str, Any],
    refusal: str,
) -> None:
    monkeypatch.setenv("BINLAKE_HASH_SALT", SALT)
    sql(CREATE)
    config = make_config(source={"column_rules": rules})
    with pytest.raises(ConfigError, match=refusal):
        commands.snapshot(spark, config)
    assert not lake_table(config.lake, "bronze", config.source.database, "people").exists(spark)


def test_a_hash_rule_without_its_salt_is_refused(
    spark: Any, sql: Callable[..., Any], make_config: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BINLAKE_HASH_SALT", raising=False)
    sql(CREATE)
    config = make_config(source={"column_rules": {"people": {"hash": ["email"]}}})
    with pytest.raises(ConfigError, match=r"'BINLAKE_HASH_SALT' .* is not set"):
        commands.snapshot(spark, config)


TAX = "rawtax" + secrets.token_hex(6)
TAXED = (
    "CREATE TABLE taxed (id INT NOT NULL PRIMARY KEY, name VARCHAR(30) NULL, qty INT NULL, "
    "price DECIMAL(8,2) NULL, tax_id VARCHAR(40) NULL, ssn VARCHAR(40) NULL)"
)


def _strings(frame: Any) -> str:
    """Every value of a lake table's current version, as text (nested images included)."""
    return str([row.asDict(recursive=True) for row in frame.collect()])


def test_a_column_renamed_onto_a_hashed_name_never_lands_raw_under_it(
    spark: Any,
    sql: Callable[..., Any],
    make_config: Any,
    racer: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`ssn` hashed, dropped, then `tax_id` renamed onto it: the rule follows the name the user
    configured, so the tax ids now called `ssn` land hashed: silver and bronze hold none raw (the
    table is snapshotted again through its rules), no changelog image holds one under `ssn`, and
    silver equals the source as the rules shape it."""
    monkeypatch.setenv("BINLAKE_HASH_SALT", SALT)
    sql(TAXED)
    for i in range(1, 251):
        sql(
            "INSERT INTO taxed VALUES (%s, %s, 1, 1.50, %s, %s)",
            (i, f"n{i}", f"{TAX}-{i}", f"s{i}"),
        )
    config = make_config(
        source={"column_rules": {"taxed": {"hash": ["ssn"]}}}, snapshot={"chunk_size": 40}
    )
    with racer("taxed"):
        commands.snapshot(spark, config)
        commands.stream(spark, config, available_now=True)
        sql("ALTER TABLE taxed DROP COLUMN ssn")
        sql("ALTER TABLE taxed CHANGE tax_id ssn VARCHAR(40) NULL")
        for i in range(1, 60, 3):
            sql("UPDATE taxed SET ssn = %s, qty = qty + 5 WHERE id = %s", (f"{TAX}-u{i}", i))
        commands.stream(spark, config, available_now=True)
    commands.stream(spark, config, available_now=True)

    database = config.source.database
    for layer, name in [("silver", "taxed"), ("bronze", "taxed")]:
        table = lake_table(config.lake, layer, database, name)
        assert TAX not in _strings(table.read(spark)), f"a raw tax id in {layer} {name}"
    # The changelog keeps the changes from before the rename as they landed then: tax ids under
    # `tax_id`, which no rule named. Under the ruled name no image holds one.
    changelog = lake_table(config.lake, "bronze", database, "taxed__changelog").read(spark)
    ruled = changelog.select("_before.ssn", "_after.ssn")
    assert TAX not in _strings(ruled), "a raw tax id under `ssn` in the changelog"
    silver = lake_table(config.lake, "silver", database, "taxed").read(spark)
    rows = [
        (
            i,
            name,
            qty,
            None if price is None else float(price),
            None if ssn is None else _hashed(ssn),
        )
        for i, name, qty, price, ssn in sql("SELECT id, name, qty, price, ssn FROM taxed")
    ]
    expected = spark.createDataFrame(rows, "id int, name string, qty int, price double, ssn string")
    actual = silver.selectExpr("id", "name", "qty", "CAST(price AS DOUBLE) AS price", "ssn")
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
