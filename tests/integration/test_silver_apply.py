"""Silver's MERGE of one batch (`merge.TableApply`), on Spark and Delta alone: no database.

The batches are change records as the stream's source emits them (`change_record`), chosen to
break the apply: changes of one key out of binlog order within a batch, a delete followed by a
re-insert of its key, a batch replayed after a crash (changes older than what silver holds), a batch
past the key-list limit (the MERGE then names the key range) and a composite key. Silver and
the changelog are compared with chispa.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from chispa import assert_df_equality
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from binlake.config.settings import Config, parse_config
from binlake.model.offsets import BinlogOffset, position_token
from binlake.model.schema import Column, TableSchema
from binlake.model.typemap import spark_schema
from binlake.runtime.spark import (
    DETERMINISTIC_MERGE_SOURCES,
    KEY_SETS_BY_REFERENCE,
    session_settings,
)
from binlake.silver import merge
from binlake.silver.change_record import CHANGE_SCHEMA, DDL, ImageEncoder
from binlake.silver.change_summary import MERGE_KEY_LIST_LIMIT, summary_of_records
from binlake.silver.merge import (
    OFFSET_COLUMN,
    ChangelogEnds,
    TableApply,
    changelog_table,
    ensure_silver,
    silver_table,
    typed_changes,
)
from binlake.stream import batch_summary as summaries
from binlake.stream.batch_summary import batch_summary

pytestmark = pytest.mark.integration

ITEMS = TableSchema(
    "shop",
    "items",
    (
        Column("id", "int", "int(11)", False),
        Column("name", "varchar", "varchar(20)", True, charset="utf8mb4"),
        Column("price", "decimal", "decimal(10,2)", True, precision=10, scale=2),
    ),
    ("id",),
    "id",
)
LINES = TableSchema(
    "shop",
    "lines",
    (
        Column("order_id", "int", "int(11)", False),
        Column("line", "smallint", "smallint(6)", False),
        Column("qty", "int", "int(11)", True),
    ),
    ("order_id", "line"),
    "order_id",
)

Change = tuple[str, int, tuple[Any, ...] | None, tuple[Any, ...] | None]  # op, pos, before, after


@pytest.fixture
def config(tmp_path: Path) -> Config:
    return parse_config({"source": {"database": "shop"}, "lake": {"root": str(tmp_path)}})


def _batch(spark: SparkSession, table: TableSchema, changes: list[Change]) -> DataFrame:
    encode = ImageEncoder(table)
    rows = [
        (table.qualified, op, position_token(BinlogOffset("bin.000001", pos), 0), "bin.000001",
         pos, 0, 1_700_000_000, encode(before), encode(after))
        for op, pos, before, after in changes
    ]  # fmt: skip
    return spark.createDataFrame(rows, CHANGE_SCHEMA)


def _apply(
    spark: SparkSession,
    config: Config,
    table: TableSchema,
    changes: list[Change],
    ends: ChangelogEnds | None = None,
) -> int:
    columns = spark_schema(table)
    return TableApply(config, table, columns, ends=ends)(_batch(spark, table, changes))


def _silver(spark: SparkSession, config: Config, table: TableSchema) -> DataFrame:
    return silver_table(config, table).read(spark).drop(OFFSET_COLUMN)


def _rows(spark: SparkSession, table: TableSchema, rows: list[tuple[Any, ...]]) -> DataFrame:
    return spark.createDataFrame(rows, spark_schema(table))


def test_a_batch_lands_each_keys_last_change_by_binlog_position(
    spark: SparkSession, config: Config
) -> None:
    ensure_silver(spark, config, ITEMS, from_bronze=False)
    batch: list[Change] = [
        ("insert", 400, None, (1, "pen", Decimal("1.50"))),
        ("insert", 100, None, (2, "ink", Decimal(3))),
        ("update", 300, (1, "pen", Decimal("1.50")), (1, "pen", Decimal("2.25"))),  # older
        ("delete", 200, (2, "ink", Decimal(3)), None),
        ("insert", 500, None, (2, "ink again", None)),  # re-inserted after its delete
        ("insert", 600, None, (3, "cap", Decimal("9.99"))),
        ("delete", 700, (3, "cap", Decimal("9.99")), None),
    ]
    assert _apply(spark, config, ITEMS, batch) == len(batch)
    expected = _rows(spark, ITEMS, [(1, "pen", Decimal("1.50")), (2, "ink again", None)])
    assert_df_equality(_silver(spark, config, ITEMS), expected, ignore_row_order=True)


def test_a_batch_of_distinct_keys_is_merged_as_it_is_and_one_repeating_a_key_collapsed(
    spark: SparkSession, config: Config, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the stream runs it (Delta's copy of the MERGE source off): a batch changing each key
    once needs no collapse and gets none; one changing a key twice (an insert, then an update
    of it) is collapsed to each key's last change, and replayed changes nothing. Taken as it
    is, the second batch would insert key 4 twice."""
    collapsed: list[int] = []
    last_per_key = merge._last_per_key

    def counted(flat: DataFrame, key: tuple[str, ...], s: str) -> DataFrame:
        collapsed.append(flat.count())
        return last_per_key(flat, key, s)

    monkeypatch.setattr(merge, "_last_per_key", counted)
    ensure_silver(spark, config, ITEMS, from_bronze=False)
    first: list[Change] = [("insert", 100 + k, None, (k, f"n{k}", Decimal(k))) for k in (1, 2, 3)]
    second: list[Change] = [
        ("update", 200, (1, "n1", Decimal(1)), (1, "u1", Decimal(1))),
        ("delete", 210, (2, "n2", Decimal(2)), None),
        ("insert", 220, None, (4, "n4", None)),
        ("update", 230, (4, "n4", None), (4, "u4", Decimal(4))),
    ]
    with session_settings(spark, DETERMINISTIC_MERGE_SOURCES):
        _apply(spark, config, ITEMS, first)
        assert collapsed == []
        _apply(spark, config, ITEMS, second)
        assert collapsed == [len(second)]
        _apply(spark, config, ITEMS, second)  # a replay
    expected = [(1, "u1", Decimal(1)), (3, "n3", Decimal(3)), (4, "u4", Decimal(4))]
    assert_df_equality(
        _silver(spark, config, ITEMS), _rows(spark, ITEMS, expected), ignore_row_order=True
    )


@pytest.mark.parametrize("side_by_side", [False, True], ids=["in-turn", "side-by-side"])
def test_a_replayed_batch_changes_nothing_and_logs_nothing_twice(
    spark: SparkSession, config: Config, monkeypatch: pytest.MonkeyPatch, side_by_side: bool
) -> None:
    """Both ways of applying a batch: a small one MERGEs then appends its changelog, a large one
    (here: any, by the threshold) does both at once."""
    monkeypatch.setattr(merge, "SIDE_BY_SIDE_CHANGES", 1 if side_by_side else 1_000_000)
    ensure_silver(spark, config, ITEMS, from_bronze=False)
    first: list[Change] = [("insert", 100, None, (1, "a", 1)), ("insert", 110, None, (2, "b", 2))]
    second: list[Change] = [
        ("update", 200, (1, "a", 1), (1, "a2", 1)),
        ("delete", 210, (2, "b", 2), None),
    ]
    _apply(spark, config, ITEMS, first)
    _apply(spark, config, ITEMS, second)
    after = _silver(spark, config, ITEMS)
    expected = after.collect()
    # A restart replays both batches: the changelog holds their changes already, and silver's
    # offsets reject the older images, so the re-insert of key 2 does not happen.
    _apply(spark, config, ITEMS, first)
    _apply(spark, config, ITEMS, second)
    assert_df_equality(
        _silver(spark, config, ITEMS), spark.createDataFrame(expected, after.schema),
        ignore_row_order=True,
    )  # fmt: skip
    changelog = changelog_table(config, ITEMS).read(spark)
    assert changelog.count() == len(first) + len(second)
    # A batch read again from an older offset holds changes appended and new ones: only the
    # new ones are appended.
    _apply(spark, config, ITEMS, [*second, ("insert", 300, None, (3, "c", 3))])
    offsets = changelog_table(config, ITEMS).read(spark).select("_binlake_offset", "_op")
    assert offsets.count() == offsets.distinct().count() == len(first) + len(second) + 1


def test_a_run_that_knows_where_the_changelog_ends_appends_each_change_once_behind_it(
    spark: SparkSession, config: Config
) -> None:
    """The batches of one run share what they know of the changelog's end (`ChangelogEnds`): a
    batch past it appends without reading the changelog. A run that starts behind the changelog
    (a new checkpoint, a replay) knows nothing and reads it for every batch until it passes it:
    had the first batch taken its own last offset for the changelog's end, the second would be
    appended again."""
    ensure_silver(spark, config, ITEMS, from_bronze=False)
    batches: list[list[Change]] = [
        [("insert", 100 + 10 * n, None, (n, f"v{n}", Decimal(n))), ("update", 105 + 10 * n,
          (n, f"v{n}", Decimal(n)), (n, f"w{n}", Decimal(n)))]
        for n in range(4)
    ]  # fmt: skip
    first_run = ChangelogEnds()
    for batch in batches:
        _apply(spark, config, ITEMS, batch, first_run)
    changelog = changelog_table(config, ITEMS)
    assert first_run.hold_none_from(changelog, position_token(BinlogOffset("bin.000001", 200), 0))
    again = ChangelogEnds()  # a run started again from the first batch's offset
    for batch in [*batches, [("delete", 200, (0, "w0", Decimal(0)), None)]]:
        _apply(spark, config, ITEMS, batch, again)
    offsets = changelog.read(spark).select("_binlake_offset", "_op")
    assert offsets.count() == offsets.distinct().count() == 2 * len(batches) + 1
    expected = _rows(spark, ITEMS, [(n, f"w{n}", Decimal(n)) for n in range(1, 4)])
    assert_df_equality(_silver(spark, config, ITEMS), expected, ignore_row_order=True)


def test_a_batch_past_the_key_list_limit_merges_by_key_range(
    spark: SparkSession, config: Config
) -> None:
    ensure_silver(spark, config, ITEMS, from_bronze=False)
    keys = MERGE_KEY_LIST_LIMIT + 50
    inserts: list[Change] = [("insert", 100 + k, None, (k, f"n{k}", None)) for k in range(keys)]
    _apply(spark, config, ITEMS, inserts)
    # Every other key updated, every tenth deleted; rows outside the batch's range untouched.
    later: list[Change] = [
        ("delete", 10_000 + k, (k, f"n{k}", None), None)
        if k % 10 == 0
        else ("update", 10_000 + k, (k, f"n{k}", None), (k, f"u{k}", None))
        for k in range(0, keys, 2)
    ]
    _apply(spark, config, ITEMS, later)
    expected = [
        (k, f"n{k}" if k % 2 else f"u{k}", None) for k in range(keys) if k % 2 or k % 10 != 0
    ]
    assert_df_equality(
        _silver(spark, config, ITEMS), _rows(spark, ITEMS, expected), ignore_row_order=True
    )


TAGS = TableSchema(
    "shop",
    "tags",
    (
        Column("tag", "varchar", "varchar(10)", False, charset="utf8mb4"),
        Column("n", "int", "int(11)", True),
    ),
    ("tag",),
    "tag",
)


@pytest.mark.parametrize(
    ("table", "changes"),
    [
        (ITEMS, [
            ("insert", 400, None, (7, "pen", Decimal("1.50"))),
            ("delete", 300, (3, "ink", None), None),
            ("update", 500, (5, "a", None), (5, "b", Decimal(2))),
            ("update", 600, (7, "pen", Decimal("1.50")), (7, "pen", Decimal(3))),  # 7 again
        ]),
        (ITEMS, [("insert", 100 + k, None, (k * 7919 % 1201, None, None)) for k in range(1100)]),
        (LINES, [
            ("insert", 100, None, (2, 1, 5)),
            ("update", 110, (1, 9, 1), (1, 9, 2)),
            ("delete", 120, (3, -4, 1), None),
        ]),
        (TAGS, [
            ("insert", 100, None, ("Zed", 1)),
            ("insert", 110, None, ("émile", 2)),
            ("delete", 120, ("\U0001d11e clef", 3), None),  # past the BMP
            ("insert", 130, None, ("apple", None)),
        ]),
    ],
    ids=["int-key", "past-the-list-limit", "composite", "text"],
)  # fmt: skip
def test_a_collected_batchs_summary_is_the_one_spark_computes(
    spark: SparkSession, config: Config, table: TableSchema, changes: list[Change]
) -> None:
    """A small batch is summarised on the driver from its collected records
    (`summary_of_records`) instead of by `TableApply.summarise`'s Spark job: both must name the
    same keys, bounds and offsets, or the MERGE would skip files holding the batch's rows."""
    batch = _batch(spark, table, changes)
    apply = TableApply(config, table, spark_schema(table))
    by_spark = apply.summarise(typed_changes(batch, apply.columns, apply.table))
    collected = summary_of_records(batch.collect(), table, spark_schema(table))
    assert collected is not None
    for summary in (by_spark, collected):
        summary["keys"] = sorted(summary.get("keys") or [])
    assert collected == by_spark
    assert by_spark["count"] == len(changes)


def test_a_small_batch_is_collected_without_its_long_images(
    spark: SparkSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A few wide rows must not fill the driver: their long images are left out of the
    collected records, and their table is summarised by Spark; a DDL's record stays whole."""
    monkeypatch.setattr(summaries, "IMAGE_BYTES", 40)
    wide: list[Change] = [("insert", 100, None, (1, "x" * 50, None))]
    batch = _batch(spark, ITEMS, [*wide, ("insert", 110, None, (2, "y", None))])
    ddl = spark.createDataFrame(
        [("shop.other", DDL, position_token(BinlogOffset("bin.000001", 120), 0), "bin.000001", 120,
          0, 1_700_000_001, json.dumps({"statement": "x" * 100, "kind": "create", "schema": None}),
          None)],
        CHANGE_SCHEMA,
    )  # fmt: skip
    summary = batch_summary(batch.unionByName(ddl), collect=True)
    assert summary.records_of(ITEMS.qualified) is None
    assert summary.records_of("shop.other") == []
    assert summary.records is not None
    long, short = sorted(summary.records[ITEMS.qualified], key=lambda r: r["_pos"])
    assert (long["_long"], long["_after"], short["_long"]) == (True, None, False)
    assert short["_after"] is not None
    assert [d.statement for d in summary.ddl] == ["x" * 100]
    assert summary.counts == {ITEMS.qualified: 2} and summary.newest == 1_700_000_001


def test_a_composite_key_matches_on_every_key_column(spark: SparkSession, config: Config) -> None:
    ensure_silver(spark, config, LINES, from_bronze=False)
    batch: list[Change] = [
        ("insert", 100, None, (1, 1, 5)),
        ("insert", 110, None, (1, 2, 6)),
        ("insert", 120, None, (2, 1, 7)),
        ("update", 130, (1, 2, 6), (1, 2, 60)),
        ("delete", 140, (2, 1, 7), None),
    ]
    _apply(spark, config, LINES, batch)
    expected = _rows(spark, LINES, [(1, 1, 5), (1, 2, 60)])
    assert_df_equality(
        _silver(spark, config, LINES).orderBy("order_id", "line"),
        expected.orderBy("order_id", "line"),
    )
    offsets = silver_table(config, LINES).read(spark)
    assert offsets.where(F.col(OFFSET_COLUMN).isNull()).count() == 0


def _history(spark: SparkSession, config: Config, table: TableSchema) -> list[tuple[Any, ...]]:
    """An scd2 silver's versions: (id, name, offset pos, valid from, valid to, current, end pos),
    offsets as their binlog position, times as epoch seconds."""
    rows = silver_table(config, table).read(spark).collect()

    def pos(token: str | None) -> int | None:
        return None if token is None else int(token.split(":")[1])

    def seconds(ts: Any) -> int | None:
        return None if ts is None else int(ts.timestamp())

    return sorted(
        (r["id"], r["name"], pos(r[OFFSET_COLUMN]), seconds(r["_valid_from"]),
         seconds(r["_valid_to"]), r["_is_current"], pos(r["_binlake_end_offset"]))
        for r in rows
    )  # fmt: skip


def test_an_scd2_silver_keeps_every_version_by_binlog_position_and_once_on_replay(
    spark: SparkSession, tmp_path: Path
) -> None:
    """Versions out of order within a batch, a delete and a re-insert, a key changed in two
    batches, and both batches replayed: each version once, ended by its key's next change."""
    config = parse_config(
        {
            "source": {"database": "shop"},
            "lake": {"root": str(tmp_path)},
            "silver": {"history_tables": {"it.*": "scd2"}},
        }
    )
    ensure_silver(spark, config, ITEMS, from_bronze=False)

    def at(pos: int) -> int:  # each change's commit time: one second per 100 positions
        return 1_700_000_000 + pos // 100

    first: list[Change] = [
        ("update", 300, (1, "pen", 1), (1, "pen2", 1)),
        ("insert", 100, None, (1, "pen", 1)),
        ("insert", 110, None, (2, "ink", 2)),
        ("delete", 200, (2, "ink", 2), None),
        ("insert", 210, None, (2, "ink again", 2)),
        ("insert", 120, None, (3, "cap", 3)),
    ]
    second: list[Change] = [
        ("update", 400, (1, "pen2", 1), (1, "pen3", 1)),
        ("delete", 410, (3, "cap", 3), None),
    ]

    def apply(changes: list[Change]) -> None:
        batch = _batch(spark, ITEMS, changes)
        committed = batch.withColumn("_ts", (F.col("_ts") + F.col("_pos") / 100).cast("long"))
        TableApply(config, ITEMS, spark_schema(ITEMS))(committed)

    for _ in range(2):  # the second time: a replay of both batches
        apply(first)
        apply(second)
        assert _history(spark, config, ITEMS) == [
            (1, "pen", 100, at(100), at(300), False, 300),
            (1, "pen2", 300, at(300), at(400), False, 400),
            (1, "pen3", 400, at(400), None, True, None),
            (2, "ink", 110, at(110), at(200), False, 200),
            (2, "ink again", 210, at(210), None, True, None),
            (3, "cap", 120, at(120), at(410), False, 410),
        ]


def test_silver_and_the_changelog_checkpoint_every_100_commits_not_every_10(
    spark: SparkSession, config: Config
) -> None:
    """Every batch commits to both: at Delta's default interval every tenth batch also wrote a
    checkpoint (about a second on two cores)."""
    ensure_silver(spark, config, ITEMS, from_bronze=False)
    _apply(spark, config, ITEMS, [("insert", 100, None, (1, "a", 1))])
    for table in (silver_table(config, ITEMS), changelog_table(config, ITEMS)):
        assert table.properties(spark)["delta.checkpointInterval"] == "100", table


#: Spark's compiled code paths, which the suite's session turns off (tests/conftest.py) and
#: binlake's compute keeps on.
COMPILED = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}


def _compilations(spark: SparkSession) -> int:
    """The classes Spark's code generator has compiled in this JVM so far."""
    metrics = spark._jvm.org.apache.spark.metrics.source.CodegenMetrics  # type: ignore[union-attr]
    return int(metrics.METRIC_COMPILATION_TIME().getCount())


@pytest.mark.parametrize(
    ("keys", "most"),
    [((1, 1, 1), 0), ((2, 3, 4), 2)],
    ids=["the same key", "new keys"],
)
def test_a_batch_shaped_like_the_one_before_compiles_only_deltas_skipping_filter_again(
    spark: SparkSession, config: Config, keys: tuple[int, ...], most: int
) -> None:
    """A stream's batches of one table run the same plans with other values, so Spark compiles
    their code once. With Spark's default room for 100 generated classes, a batch of one table
    (summary, changelog append, MERGE, their Delta log reads) evicted what the batch before had
    compiled and compiled it again: 36-44 classes, most of a small MERGE's fixed cost. The MERGE
    names the batch's keys: as values written into the code, a batch of a new key compiled 14
    classes; as a set passed by reference (`KEY_SETS_BY_REFERENCE`), only the one class of
    Delta's skipping filter, which writes the key range into its code (compiled twice: by the
    two scans of the MERGE)."""
    ensure_silver(spark, config, ITEMS, from_bronze=False)
    rows = [("insert", 100 + k, None, (k, "a", Decimal(1))) for k in range(1, 5)]
    _apply(spark, config, ITEMS, rows)
    compiled = []
    settings = {**DETERMINISTIC_MERGE_SOURCES, **KEY_SETS_BY_REFERENCE, **COMPILED}
    with session_settings(spark, settings):
        for pos, key in zip((200, 300, 400), keys, strict=True):
            before = _compilations(spark)
            old, new = (key, "a", Decimal(1)), (key, f"v{pos}", Decimal(pos))
            _apply(spark, config, ITEMS, [("update", pos, old, new)])
            compiled.append(_compilations(spark) - before)
    assert compiled[0] > 0 and compiled[-1] <= most, compiled
    landed = {
        key: (f"v{pos}", Decimal(pos)) for pos, key in zip((200, 300, 400), keys, strict=True)
    }
    expected = [(k, *landed.get(k, ("a", Decimal(1)))) for k in range(1, 5)]
    assert_df_equality(
        _silver(spark, config, ITEMS), _rows(spark, ITEMS, expected), ignore_row_order=True
    )


def test_a_merge_reads_only_the_silver_files_that_can_hold_its_keys(
    spark: SparkSession, config: Config
) -> None:
    """The MERGE names the batch's keys so that Delta skips the files that cannot hold them
    (by their key statistics), held as a set (`KEY_SETS_BY_REFERENCE`) and with the NULL that
    keeps one key a list. A silver file of other keys is removed from disk, not from the log:
    a MERGE that read it would fail, as the control of a key it holds shows."""
    ensure_silver(spark, config, ITEMS, from_bronze=False)
    for block in range(3):  # one MERGE, and so its own files, per block of keys
        rows = [(100 * block + k, "a", Decimal(1)) for k in range(1, 101)]
        _apply(spark, config, ITEMS, [("insert", 1000 * block + r[0], None, r) for r in rows])
    files = (
        silver_table(config, ITEMS).read(spark)
        .groupBy(F.input_file_name().alias("file")).agg(F.max("id").alias("top"))
        .where(F.col("top") <= 100).collect()
    )  # fmt: skip
    for file in files:  # every file of keys 1-100
        Path(file["file"].removeprefix("file:")).unlink()

    def update(pos: int, *keys: int) -> None:
        changes = [("update", pos + k, (k, "a", Decimal(1)), (k, "b", Decimal(2))) for k in keys]
        _apply(spark, config, ITEMS, changes)

    with session_settings(spark, KEY_SETS_BY_REFERENCE):
        update(10_000, 250)
        update(20_000, 150, 299)
        with pytest.raises(Exception, match="FILE_NOT_EXIST"):
            update(30_000, 50)
    kept = silver_table(config, ITEMS).read(spark).where(F.col("id") > 100)  # skips the gone
    changed = kept.where(F.col("name") == "b").select("id")
    assert sorted(r["id"] for r in changed.collect()) == [150, 250, 299]


def _merge_clauses(spark: SparkSession, config: Config, table: TableSchema) -> list[str]:
    """The clause kinds of silver's last commit, a MERGE (Delta's operation parameters)."""
    last = spark.sql(f"DESCRIBE HISTORY {silver_table(config, table).sql} LIMIT 1").first()
    assert last is not None and last["operation"] == "MERGE"
    parameters = last["operationParameters"]
    return [
        kind
        for kind in ("matchedPredicates", "notMatchedPredicates")
        if json.loads(parameters.get(kind, "[]"))
    ]


def test_a_batch_of_inserts_alone_is_an_insert_only_merge_that_never_lands_an_older_image(
    spark: SparkSession, config: Config
) -> None:
    """A batch of inserts alone (hard deletes) MERGEs without matched clauses, which it could
    never fire: a key silver holds already it holds at the insert's offset (a replay) or a newer
    one (a chunk, or a batch, that saw the row after the insert). Neither may land the older
    image nor a second row of the key; a batch with an update keeps its matched clauses."""
    ensure_silver(spark, config, ITEMS, from_bronze=False)
    first: list[Change] = [("insert", 100 + k, None, (k, f"n{k}", Decimal(k))) for k in (1, 2)]
    _apply(spark, config, ITEMS, first)
    assert _merge_clauses(spark, config, ITEMS) == ["notMatchedPredicates"]
    _apply(spark, config, ITEMS, [("update", 200, (1, "n1", Decimal(1)), (1, "u1", Decimal(1)))])
    assert _merge_clauses(spark, config, ITEMS) == ["matchedPredicates", "notMatchedPredicates"]
    # Key 1 was updated at 200: the replayed insert at 101 meets the newer row and is dropped,
    # as is key 2's own insert; key 3 is new.
    _apply(spark, config, ITEMS, [*first, ("insert", 300, None, (3, "n3", None))])
    assert _merge_clauses(spark, config, ITEMS) == ["notMatchedPredicates"]
    expected = [(1, "u1", Decimal(1)), (2, "n2", Decimal(2)), (3, "n3", None)]
    assert_df_equality(
        _silver(spark, config, ITEMS), _rows(spark, ITEMS, expected), ignore_row_order=True
    )
    offsets = silver_table(config, ITEMS).read(spark).orderBy("id").select(OFFSET_COLUMN)
    assert [r[0] for r in offsets.collect()] == [
        position_token(BinlogOffset("bin.000001", pos), 0) for pos in (200, 102, 300)
    ]


def test_under_soft_deletes_an_insert_alone_makes_its_deleted_key_live_again(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A soft-deleted key's row stays in silver, so a later insert of the key must match it and
    make it live: a batch of inserts alone keeps its matched clauses under soft deletes."""
    config = parse_config({
        "source": {"database": "shop"}, "lake": {"root": str(tmp_path)},
        "silver": {"deletes": "soft"},
    })  # fmt: skip
    ensure_silver(spark, config, ITEMS, from_bronze=False)
    _apply(spark, config, ITEMS, [("insert", 100, None, (1, "pen", Decimal(1)))])
    _apply(spark, config, ITEMS, [("delete", 200, (1, "pen", Decimal(1)), None)])
    _apply(spark, config, ITEMS, [("insert", 300, None, (1, "pen again", Decimal(2)))])
    assert _merge_clauses(spark, config, ITEMS) == ["matchedPredicates", "notMatchedPredicates"]
    rows = silver_table(config, ITEMS).read(spark).select("id", "name", "_deleted_at").collect()
    assert [tuple(r) for r in rows] == [(1, "pen again", None)]
