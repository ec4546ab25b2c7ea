"""String keys in the server's order: `CollationOrder` against `ORDER BY` and `<` themselves.

The oracle is the server: for each collation, a column holding tricky values is sorted with
`ORDER BY k` and compared pairwise with `<` and `=` in one self-join, and `CollationOrder` must
agree with every answer. The values stress what a sort key gets wrong most easily: under PAD SPACE
the shorter string compares as if padded with spaces, so `'a\\t' < 'a'` while the weights of `'a'`
are a prefix of those of `'a\\t'`. The column is indexed rather than the primary key so that it
holds values the collation calls equal (`'a'`, `'A'`, `'a '` under `_ci`): they must get equal keys.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Sequence
from typing import Any

import pymysql
import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from binlake.jobs import commands
from binlake.mysql.collation import CollationOrder
from binlake.mysql.discovery import load_schema
from binlake.snapshot.ledger import Ledger

from .replay import Writers, connect

pytestmark = pytest.mark.integration

ER_UNKNOWN_COLLATION = 1273

_BELOW_SPACE = ["\t", "\x01", "\n"]
TRICKY = [
    "", " ", "  ", *_BELOW_SPACE, "\t ", " \t",
    "a", "a ", "a  ", *(f"a{c}" for c in _BELOW_SPACE), *(f"a {c}" for c in _BELOW_SPACE),
    *(f"a{c}b" for c in _BELOW_SPACE), "a b", "a\t ", "a \x01 ", "a\x01\x01",
    "A", "A ", "A\t", "Ab", "aB", "ab", "ab ", "b", "B", "b\t", "z", "Z\x01",
    "e", "E", "é", "É", "ê", "è ", "ä", "ae", "ß", "ss", "ÿ",
    "😀", "😁", "😀 ", "😀\t", "𝒜", "a😀", "a😀\x01",
]  # fmt: skip
COLLATIONS = [
    "utf8mb4_general_ci", "utf8mb4_bin", "utf8mb4_unicode_ci", "utf8mb4_nopad_bin",
    "utf8mb4_general_nopad_ci", "latin1_swedish_ci", "latin1_bin", "utf8mb4_uca1400_ai_ci",
    "utf8mb4_uca1400_as_cs", "utf8mb4_uca1400_ai_cs", "utf8mb4_uca1400_nopad_as_cs",
]  # fmt: skip


def _charset(collation: str) -> str:
    return collation.split("_", 1)[0]


def _storable(collation: str) -> list[str]:
    """The tricky values the collation's character set can hold."""
    if _charset(collation) != "latin1":
        return TRICKY
    return [v for v in TRICKY if all(ord(c) < 256 for c in v)]


def _groups(ids: Sequence[int], same: Callable[[int, int], bool]) -> list[set[int]]:
    """Ids in sorted order → runs of equal values."""
    groups: list[set[int]] = []
    for previous, current in itertools.pairwise([None, *ids]):
        if previous is not None and same(previous, current):
            groups[-1].add(current)
        else:
            groups.append({current})
    return groups


@pytest.mark.parametrize("collation", COLLATIONS)
def test_collation_order_is_the_servers_order(
    db_env: dict[str, str], database: str, collation: str
) -> None:
    values = dict(enumerate(_storable(collation)))
    with connect(db_env, database) as conn, conn.cursor() as cur:
        try:
            cur.execute(
                f"CREATE TABLE t (id INT PRIMARY KEY, k VARCHAR(32) CHARACTER SET "
                f"{_charset(collation)} COLLATE {collation} NOT NULL, KEY (k))"
            )
        except pymysql.err.OperationalError as exc:
            if exc.args[0] != ER_UNKNOWN_COLLATION:
                raise
            pytest.skip(f"the server has no {collation}")
        cur.executemany("INSERT INTO t (id, k) VALUES (%s, %s)", list(values.items()))
        cur.execute("SELECT id, k FROM t")
        assert dict(cur.fetchall()) == values, "the column does not hold the values as written"
        cur.execute("SELECT id FROM t ORDER BY k, id")
        server_sorted = [r[0] for r in cur.fetchall()]
        cur.execute("SELECT a.id, b.id, a.k < b.k, a.k = b.k FROM t a JOIN t b")
        truth = {(a, b): (bool(lt), bool(eq)) for a, b, lt, eq in cur.fetchall()}
        schema = load_schema(conn, database, "t", {})
        assert schema.column("k").collation == collation
        order = CollationOrder(conn, schema.column("k"))
        order.prime(values.values())
        keys: dict[int, Any] = {i: order(v) for i, v in values.items()}

    wrong = [
        (values[a], values[b], "server <, =", server, "keys <, =", mine)
        for (a, b), server in truth.items()
        if server != (mine := (keys[a] < keys[b], keys[a] == keys[b]))
    ]
    assert not wrong, f"{len(wrong)} pairs ordered unlike {collation}: {wrong[:8]}"
    server_groups = _groups(server_sorted, lambda a, b: truth[a, b][1])
    ours = _groups(sorted(values, key=lambda i: (keys[i], i)), lambda a, b: keys[a] == keys[b])
    assert ours == server_groups, [[values[i] for i in sorted(g)] for g in server_groups]


# ---------------------------------------------------------------------------------------------
# End to end: snapshot and stream over keys that end below a space, under PAD SPACE `_bin`

#: Under PAD SPACE each ending sorts before the bare key, and a longer run of it before a shorter
#: one (`'k\t\t' < 'k\t' < 'k'`): the reverse of byte order, so chunk boundaries inside a group
#: put keys in different chunks byte-wise.
_ENDINGS = ["\t", "\t\t", "\t\t\t", "\t\t\t\t", "\x01", "\x01\x01", "\x01\x01\x01"]
_GROUPS = 8


def _group(g: int) -> list[str]:
    """A base key (with a trailing space in every third group) and its endings."""
    base = f"k{g:02d}"
    return [base + (" " if g % 3 == 0 else ""), *(base + e for e in _ENDINGS)]


def _race_each_commit(
    monkeypatch: pytest.MonkeyPatch, db_env: dict[str, str], database: str
) -> None:
    """After each batch of chunks commits, update every row, delete a key and insert a new one:
    changes between the HWs of consecutive chunks, which the stream must apply exactly for the
    keys of chunks already read and drop for those of chunks still to come."""
    mark_finished = Ledger.mark_finished
    rounds = itertools.count()

    def finish_then_write(ledger: Ledger, results: Any, planned: Any = ()) -> None:
        mark_finished(ledger, results, planned)
        g = next(rounds) % _GROUPS
        with connect(db_env, database) as conn, conn.cursor() as cur:
            cur.execute("UPDATE tags SET n = n + 1")
            cur.execute("DELETE FROM tags WHERE tag = %s", (f"k{g:02d}\t\t",))
            cur.execute("INSERT IGNORE INTO tags VALUES (%s, -1, 'raced')", (f"k{g:02d}\n\n",))

    monkeypatch.setattr(Ledger, "mark_finished", finish_then_write)


def _note_writer(cur: Any, rng: random.Random) -> None:
    """Updates inside the chunks' watermark windows (key-preserving: the plan stays put)."""
    tag = rng.choice(_group(rng.randrange(_GROUPS)))
    cur.execute("UPDATE tags SET note = %s WHERE tag = %s", (f"w{rng.randrange(1000)}", tag))


def _after_snapshot(cur: Any, round_: int) -> None:
    """Updates, deletes and inserts of such keys for the stream alone (two groups, so that a
    change the stream lost for another key stays visible)."""
    first, second = _group(round_), _group(round_ + 1)
    cur.executemany("UPDATE tags SET note = 'after' WHERE tag = %s", [(t,) for t in first[::2]])
    cur.executemany("DELETE FROM tags WHERE tag = %s", [(t,) for t in second[1::3]])
    cur.executemany(
        "INSERT IGNORE INTO tags VALUES (%s, 7, 'after')",
        [(f"k{round_:02d}{e}",) for e in ("\x01\t", " \t\t", "\t\x01")],
    )


def test_snapshot_and_stream_stay_exact_with_keys_ending_below_space(
    spark: Any,
    db_env: dict[str, str],
    database: str,
    make_config: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chunk boundaries fall among keys whose collation order is the reverse of their byte
    order, and every key changes between the high watermarks of consecutive chunks. A key placed
    in the wrong chunk loses a change the stream drops as already held by the snapshot, or
    lands twice: silver must equal the source."""
    with connect(db_env, database) as conn, conn.cursor() as cur:
        cur.execute(
            "CREATE TABLE tags (tag VARCHAR(24) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin "
            "NOT NULL PRIMARY KEY, n INT NOT NULL, note VARCHAR(40))"
        )
        keys = [k for g in range(_GROUPS) for k in _group(g)]
        cur.executemany(
            "INSERT INTO tags VALUES (%s, %s, 'seed')", [(k, i) for i, k in enumerate(keys)]
        )
        cur.execute("SELECT tag FROM tags ORDER BY tag")
        server_order = [r[0] for r in cur.fetchall()]
        assert server_order != sorted(server_order), "keys must order differently byte-wise"

    _race_each_commit(monkeypatch, db_env, database)
    config = make_config(snapshot={"chunk_size": 7, "parallelism": 2, "chunks_per_commit": 1})
    with Writers(db_env, database, _note_writer, threads=1, max_ops=3000, pause_s=0.02):
        commands.snapshot(spark, config)
    monkeypatch.undo()
    chunks = Ledger(spark, config.lake.path("_system", "chunks")).chunks(f"{database}.tags")
    bronze = spark.read.format("delta").load(config.lake.path("bronze", database, "tags"))
    ends = {c.chunk_id: c.range.end for c in chunks}
    byte_wise_beyond = [
        r.tag
        for r in bronze.select("tag", "_chunk_id").collect()
        if (end := ends[r._chunk_id]) is not None and r.tag >= end
    ]
    assert byte_wise_beyond, "no chunk holds a key that sorts past its end byte-wise"

    for round_ in range(2):
        with connect(db_env, database) as conn, conn.cursor() as cur:
            _after_snapshot(cur, round_ * 2)
        commands.stream(spark, config, available_now=True)
    print(f"\n{len(chunks)} chunks, {len(byte_wise_beyond)} keys beyond their end byte-wise")

    # Keys as UTF-8 bytes: a difference then shows its tabs and control characters.
    with connect(db_env, database) as conn, conn.cursor() as cur:
        cur.execute("SELECT tag, n, note FROM tags")
        rows = [(tag.encode(), n, note) for tag, n, note in cur.fetchall()]
    source = spark.createDataFrame(rows, "tag binary, n int, note string")
    silver = spark.read.format("delta").load(config.lake.path("silver", database, "tags"))
    assert_df_equality(
        silver.select(F.encode("tag", "UTF-8").alias("tag"), "n", "note"),
        source,
        ignore_row_order=True,
        ignore_nullable=True,
    )
