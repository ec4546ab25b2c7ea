"""Identifiers are quoted everywhere: a database and tables whose names hold backticks, and
tables and columns whose names hold quotes, spaces, `%` (and `%s`), dots and non-ASCII letters,
snapshot (several chunks, writers racing the chunks) and stream into bronze and silver equal to
the source. A backtick in a column name is refused up front: Delta's MERGE with the Change Data
Feed on cannot address such a column.

Names reach three places that each have their own quoting: SQL text sent through the drivers
(backticks, and `%`, which the drivers' parameter formatting reads), Spark column references
(backticks; a dot is a struct field otherwise), and lake paths (Hadoop paths, `%` and spaces).
"""

from __future__ import annotations

import random
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from binlake.errors import SourceError
from binlake.jobs import commands
from binlake.jobs.verify import verify_silver
from binlake.mysql.connection import connection
from binlake.mysql.prerequisites import validate

from .assertions import assert_chunks_match_replay, assert_silver_equals_source
from .replay import Oracle, Writers, connect, head_offset

pytestmark = pytest.mark.integration

#: Single-column INT key (even split): every awkward character in one table's names.
WIDE = "we`ird 'tab%s ü"
#: Composite string + int key (uneven split: bound parameters next to quoted names).
PAIRS = 'pa"irs %d.ü'
KEY, CODE, LINE = "k'ey %s", 'co"de.ü', "li ne%"
COLUMNS = {
    "co'l": "VARCHAR(40) NULL",
    "sp ace": "INT NULL",
    "per%cent": "DECIMAL(8,2) NULL",
    "ünï": "TEXT NULL",
    "dot.ted": "FLOAT NULL",  # selected through CAST(... AS DOUBLE) AS name
    "quo\"te'": "VARCHAR(20) NULL",
    "%s": "INT NULL",
}
WIDE_ROWS, PAIR_ROWS = 600, 300


def q(name: str) -> str:
    """A quoted identifier for the test's own SQL (always run with parameters: `%` doubled)."""
    return "`" + name.replace("`", "``").replace("%", "%%") + "`"


@pytest.fixture
def weird_database(db_env: dict[str, str]) -> Iterator[str]:
    name = f"db `%s 'ü\"_{uuid.uuid4().hex[:6]}"
    with connect(db_env) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE {q(name)} CHARACTER SET utf8mb4", ())
    yield name
    with connect(db_env) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {q(name)}", ())


def _wide_values(rng: random.Random) -> tuple[Any, ...]:
    return (
        rng.choice(["a`b", "it's", 'say "hi"', "100%s", "ü%d", None]),
        rng.randint(-1000, 1000),
        rng.randint(-99999, 99999) / 100,
        rng.choice(["ünï", "x" * rng.randint(0, 50), None]),
        rng.choice([1.5, -0.25, 1234.5, None]),  # exact in the oracle's 6 digits
        rng.choice(["q'", 'd"', None]),
        rng.randint(0, 9),
    )


def _create_and_seed(cur: Any) -> None:
    columns = ", ".join(f"{q(c)} {kind}" for c, kind in COLUMNS.items())
    cur.execute(f"CREATE TABLE {q(WIDE)} ({q(KEY)} INT NOT NULL PRIMARY KEY, {columns})", ())
    cur.execute(
        f"CREATE TABLE {q(PAIRS)} ({q(CODE)} VARCHAR(20) NOT NULL, {q(LINE)} INT NOT NULL, "
        f"{q('va%l')} VARCHAR(20) NULL, PRIMARY KEY ({q(CODE)}, {q(LINE)})) "
        "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
        (),
    )
    rng = random.Random(7)
    marks = ", ".join(["%s"] * (len(COLUMNS) + 1))
    cur.executemany(
        f"INSERT INTO {q(WIDE)} VALUES ({marks})",
        [(n * 3, *_wide_values(rng)) for n in range(WIDE_ROWS)],
    )
    cur.executemany(
        f"INSERT INTO {q(PAIRS)} VALUES (%s, %s, %s)",
        [(f"c%{n // 4:03d}`", n % 4, f"v{n}") for n in range(PAIR_ROWS)],
    )


def _writer(cur: Any, rng: random.Random) -> None:
    """Inserts, updates, key changes and deletes on both tables, every name quoted."""
    roll = rng.random()
    key = rng.randrange(WIDE_ROWS * 3 + 300)
    names = ", ".join(q(c) for c in COLUMNS)
    if roll < 0.3:
        marks = ", ".join(["%s"] * (len(COLUMNS) + 1))
        cur.execute(
            f"INSERT IGNORE INTO {q(WIDE)} ({q(KEY)}, {names}) VALUES ({marks})",
            (key, *_wide_values(rng)),
        )
    elif roll < 0.55:
        sets = ", ".join(f"{q(c)} = %s" for c in COLUMNS)
        cur.execute(f"UPDATE {q(WIDE)} SET {sets} WHERE {q(KEY)} = %s", (*_wide_values(rng), key))
    elif roll < 0.65:
        cur.execute(
            f"UPDATE IGNORE {q(WIDE)} SET {q(KEY)} = %s WHERE {q(KEY)} = %s",
            (rng.randrange(WIDE_ROWS * 3 + 300), key),
        )
    elif roll < 0.75:
        cur.execute(f"DELETE FROM {q(WIDE)} WHERE {q(KEY)} = %s", (key,))
    elif roll < 0.9:
        code = f"c%{rng.randrange(PAIR_ROWS // 4 + 10):03d}`"
        cur.execute(
            f"INSERT INTO {q(PAIRS)} VALUES (%s, %s, %s) "
            f"ON DUPLICATE KEY UPDATE {q('va%l')} = VALUES({q('va%l')})",
            (code, rng.randrange(6), f"w{rng.random():.4f}"),
        )
    else:
        cur.execute(
            f"DELETE FROM {q(PAIRS)} WHERE {q(CODE)} = %s AND {q(LINE)} = %s",
            (f"c%{rng.randrange(PAIR_ROWS // 4):03d}`", rng.randrange(4)),
        )


def test_awkward_identifiers_snapshot_and_stream_equal_the_source(
    spark: Any, db_env: dict[str, str], weird_database: str, make_config: Callable[..., Any]
) -> None:
    database = weird_database
    with connect(db_env, database) as conn, conn.cursor() as cur:
        _create_and_seed(cur)
        oracles = {t: Oracle.load(conn, database, t) for t in (WIDE, PAIRS)}
        initial = {t: o.rows(conn) for t, o in oracles.items()}
        start = head_offset(conn)  # quiet: nothing writes to this database yet
    config = make_config(
        source={"database": database},
        snapshot={"chunk_size": 40, "parallelism": 2, "chunks_per_commit": 4},
        stream={"trigger_interval": "1s"},
    )

    with Writers(db_env, database, _writer, threads=3, max_ops=20_000, pause_s=0.01) as writers:
        time.sleep(0.2)
        summary = commands.snapshot(spark, config)
    assert summary.tables == 2 and summary.chunks >= 20, summary
    raced = 0
    for table, oracle in oracles.items():
        result = assert_chunks_match_replay(spark, db_env, config, oracle, initial[table], start)
        raced += result["chunks_with_hw_after_lw"]
    assert raced > 0, f"no chunk raced a write ({writers.ops} writes): writers too slow"

    with Writers(db_env, database, _writer, threads=2, max_ops=1000, pause_s=0.02):
        first = commands.stream(spark, config, available_now=True)
    rng = random.Random(11)
    with connect(db_env, database) as conn, conn.cursor() as cur:
        for _ in range(200):
            _writer(cur, rng)
    last = commands.stream(spark, config, available_now=True)
    assert first.changes + last.changes > 0

    for table in (WIDE, PAIRS):
        assert_silver_equals_source(spark, db_env, config, table)
    report = verify_silver(spark, config)
    assert report.identical, report.differences


def test_a_backtick_in_a_column_name_is_refused_before_any_work(
    db_env: dict[str, str], weird_database: str, make_config: Callable[..., Any]
) -> None:
    with connect(db_env, weird_database) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE TABLE {q(WIDE)} ({q('i`d')} INT PRIMARY KEY)", ())
    config = make_config(source={"database": weird_database})
    with connection(config.source) as conn, pytest.raises(SourceError) as raised:
        validate(conn, config)
    message = str(raised.value)
    for part in (WIDE, "'i`d'", "backtick", "rename the column", "source.tables"):
        assert part in message, f"{part!r} not in {message!r}"
