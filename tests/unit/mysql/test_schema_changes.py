"""The pure side of schema changes: column diffs, widening, and the tracker that follows DDL."""

from __future__ import annotations

from dataclasses import replace

import pytest
from pyspark.sql import types as T

from binlake.errors import SchemaChangeError
from binlake.model.capture import Capture, TableNames
from binlake.model.offsets import BinlogOffset
from binlake.model.schema import Column, TableSchema
from binlake.model.shadow_tables import is_shadow_name, is_shadow_of
from binlake.mysql.ddl_schema import Charsets
from binlake.mysql.schema_changes import column_changes, unapplicable, widens
from binlake.mysql.schema_history import SchemaEntry, SchemaTracker
from binlake.mysql.schema_source import LoggedStatement


def _column(
    name: str, kind: str = "int", column_type: str | None = None, **extra: object
) -> Column:
    return Column(name, kind, column_type or kind, True, **extra)  # type: ignore[arg-type]


def _table(*columns: Column, key: tuple[str, ...] = ("id",), name: str = "t") -> TableSchema:
    return TableSchema("db", name, (_column("id"), *columns), key, key[0])


def _at(pos: int) -> BinlogOffset:
    return BinlogOffset("mysql-bin.000001", pos)


def test_add_drop_and_retype_come_from_the_schemas() -> None:
    before = _table(_column("a"), _column("gone"))
    after = _table(_column("a", "bigint"), _column("new", "varchar", "varchar(5)"))
    changes = {(c.kind, c.column) for c in column_changes(before, after, "ALTER TABLE t ...")}
    assert changes == {("retype", "a"), ("add", "new"), ("drop", "gone")}


@pytest.mark.parametrize(
    "statement",
    [
        "ALTER TABLE t RENAME COLUMN old TO new",
        "ALTER TABLE t CHANGE old new INT",
        "ALTER TABLE `t` CHANGE COLUMN `OLD` `new` INT NULL",
    ],
)
def test_a_rename_comes_from_the_statement(statement: str) -> None:
    before, after = _table(_column("old")), _table(_column("new"))
    [change] = column_changes(before, after, statement)
    assert (change.kind, change.old_name, change.column) == ("rename", "old", "new")


@pytest.mark.parametrize(
    ("statement", "expected"),
    [
        ("ALTER TABLE t RENAME COLUMN a TO b, RENAME COLUMN b TO a", {("a", "b"), ("b", "a")}),
        ("ALTER TABLE t CHANGE a b INT, CHANGE b a INT", {("a", "b"), ("b", "a")}),
        (
            "ALTER TABLE t RENAME COLUMN a TO b, RENAME COLUMN b TO c, RENAME COLUMN c TO a",
            {("a", "b"), ("b", "c"), ("c", "a")},
        ),
    ],
)
def test_columns_swapped_in_one_statement_are_renamed_at_once(
    statement: str, expected: set[tuple[str, str]]
) -> None:
    """The renames of one ALTER name the columns as they were before it (MySQL and MariaDB
    apply them at once), so a swap or a cycle of names moves every column's values, though the
    names before and after are the same."""
    before = _table(_column("a"), _column("b"), _column("c"))
    after = _table(_column("b"), _column("a"), _column("c"))
    changes = column_changes(before, after, statement)
    assert all(c.kind == "rename" for c in changes)
    assert {(c.old_name, c.column) for c in changes} == expected


def test_a_chain_of_renames_in_one_statement_moves_each_column_one_step() -> None:
    """`a TO b, b TO c` in one ALTER: `b` is the old `a`, `c` the old `b`, `a` is gone."""
    before, after = _table(_column("a"), _column("b")), _table(_column("b"), _column("c"))
    statement = "ALTER TABLE t RENAME COLUMN a TO b, RENAME COLUMN b TO c"
    changes = {(c.kind, c.old_name, c.column) for c in column_changes(before, after, statement)}
    assert changes == {("rename", "a", "b"), ("rename", "b", "c")}


def test_renames_back_over_two_statements_are_no_change() -> None:
    """`a TO b`, then (another ALTER) `b TO a`: the column is where it was."""
    before = after = _table(_column("a"), _column("c"))
    statements = ("ALTER TABLE t RENAME COLUMN a TO b", "ALTER TABLE t RENAME COLUMN b TO a")
    assert column_changes(before, after, *statements) == []


def test_without_a_rename_in_the_statement_it_is_a_drop_and_an_add() -> None:
    before, after = _table(_column("old")), _table(_column("new"))
    kinds = sorted(
        c.kind for c in column_changes(before, after, "ALTER TABLE t DROP old, ADD new INT")
    )
    assert kinds == ["add", "drop"]


def test_a_renamed_column_that_also_changed_type_is_renamed_and_retyped() -> None:
    before, after = _table(_column("old")), _table(_column("new", "bigint"))
    kinds = [c.kind for c in column_changes(before, after, "ALTER TABLE t CHANGE old new BIGINT")]
    assert kinds == ["rename", "retype"]


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (T.IntegerType(), T.LongType(), True),
        (T.LongType(), T.IntegerType(), False),
        (T.IntegerType(), T.IntegerType(), True),
        (T.FloatType(), T.DoubleType(), True),
        (T.DoubleType(), T.FloatType(), False),
        (T.DecimalType(10, 2), T.DecimalType(12, 2), True),
        (T.DecimalType(10, 2), T.DecimalType(12, 4), True),
        (T.DecimalType(10, 2), T.DecimalType(10, 3), False),  # loses an integer digit
        (T.DecimalType(10, 2), T.DecimalType(12, 1), False),  # loses a fraction digit
        (T.DateType(), T.TimestampNTZType(), True),
        (T.IntegerType(), T.StringType(), False),
        (T.TimestampNTZType(), T.TimestampType(), False),
    ],
)
def test_widening(old: T.DataType, new: T.DataType, expected: bool) -> None:
    assert widens(old, new) is expected


def test_a_new_row_key_or_a_narrowing_cannot_be_followed() -> None:
    before = _table(_column("a", "bigint"))
    rekeyed = replace(before, key=("id", "a"))
    assert "row key" in unapplicable(before, rekeyed, [])
    narrowed = _table(_column("a", "int"))
    assert "narrowing" in unapplicable(before, narrowed, column_changes(before, narrowed, ""))
    assert unapplicable(before, _table(_column("a", "bigint"), _column("b")), []) == ""


class _Server:
    """A fake source: the server's current tables (counting reads), and the DDL its binlog
    holds after each tracked statement (`later`: offset position → statement)."""

    def __init__(self, later: dict[int, str] | None = None, **tables: TableSchema | None) -> None:
        self.tables = tables
        self.later = later or {}
        self.reads: list[str] = []

    def read(self, database: str, table: str) -> TableSchema | None:
        self.reads.append(table)
        return self.tables.get(f"{database}.{table}", self.tables.get(table))

    def later_change(
        self, database: str, table: str, offset: BinlogOffset
    ) -> LoggedStatement | None:
        found = [(pos, s) for pos, s in sorted(self.later.items()) if pos > offset.pos]
        return next((LoggedStatement(_at(p), database, s) for p, s in found), None)

    def charsets(self, database: str, table: str) -> Charsets:
        return Charsets("utf8mb4_general_ci", lambda c: f"{c}_general_ci", lambda c: None)


def _tracker(
    server: _Server, in_force: dict[str, SchemaEntry], patterns: list[str] | None = None,
    recorded: dict[tuple[str, int], SchemaEntry] | None = None,
) -> SchemaTracker:  # fmt: skip
    saved = recorded or {}
    capture = Capture("db", None if patterns is None else tuple(patterns))
    return SchemaTracker(capture, in_force, lambda t, o: saved.get((t, o.pos)), server)


def test_a_ddl_at_or_before_the_entry_in_force_is_already_in_it() -> None:
    table = _table(_column("a"))
    server = _Server(t=_table(_column("a"), _column("b")))
    tracker = _tracker(server, {"db.t": SchemaEntry(_at(500), table)})
    assert list(tracker.on_statement("ALTER TABLE t ADD b INT", "db", _at(500))) == []
    [change] = tracker.on_statement("ALTER TABLE t ADD b INT", "db", _at(600))
    assert (change.before, change.after) == (table, server.tables["t"])
    assert tracker.schema("db.t") == server.tables["t"]


def test_a_replayed_ddl_takes_the_recorded_schema_not_the_servers() -> None:
    recorded = SchemaEntry(_at(600), _table(_column("a"), _column("b")))
    server = _Server(t=_table(_column("c")))  # changed again since
    tracker = _tracker(server, {"db.t": SchemaEntry(_at(500), _table(_column("a")))},
                       recorded={("db.t", 600): recorded})  # fmt: skip
    [change] = tracker.on_statement("ALTER TABLE t ADD b INT", "db", _at(600))
    assert change.after == recorded.schema and server.reads == []


def test_tables_of_other_databases_and_uncaptured_tables_are_ignored() -> None:
    server = _Server(t=_table(), other=_table(name="other"))
    tracker = _tracker(server, {"db.t": SchemaEntry(_at(1), _table())}, patterns=["t"])
    assert list(tracker.on_statement("ALTER TABLE elsewhere.t ADD x INT", "db", _at(9))) == []
    assert list(tracker.on_statement("ALTER TABLE t ADD x INT", "elsewhere", _at(9))) == []
    assert list(tracker.on_statement("CREATE TABLE other (id INT)", "db", _at(9))) == []
    assert list(tracker.on_statement("INSERT INTO t VALUES (1)", "db", _at(9))) == []


def _sharded(name: str, database: str) -> TableSchema:
    return replace(_table(name=name), database=database)


def test_over_several_databases_each_table_is_followed_in_its_own_database() -> None:
    """`source.tables: [shop_[0-9]+\\.orders]`: a DDL names its table qualified or through
    the session's database (`USE`); a database created later joins; equal names in two
    databases are two tables."""
    one, two = _sharded("orders", "shop_1"), _sharded("orders", "shop_2")
    three = _sharded("orders", "shop_3")
    wider = replace(two, columns=(*two.columns, _column("note")))
    server = _Server(**{"shop_2.orders": wider, "shop_3.orders": three})
    tracker = SchemaTracker(
        Capture(None, (r"shop_[0-9]+\.orders",)),
        {"shop_1.orders": SchemaEntry(_at(1), one), "shop_2.orders": SchemaEntry(_at(1), two)},
        lambda t, o: None,
        server,
    )
    [altered] = tracker.on_statement("ALTER TABLE orders ADD note INT", "shop_2", _at(10))
    assert (altered.table, altered.after) == ("shop_2.orders", wider)
    assert tracker.schema("shop_1.orders") == one
    assert list(tracker.on_statement("CREATE DATABASE shop_3", "", _at(20))) == []
    assert list(tracker.on_statement("CREATE TABLE items (id INT)", "shop_3", _at(21))) == []
    [created] = tracker.on_statement("CREATE TABLE orders (id INT)", "shop_3", _at(22))
    assert (created.table, created.kind, created.after) == ("shop_3.orders", "create", three)
    assert tracker.changed_by_dml("UPDATE orders SET id = 2", "shop_1") == ["shop_1.orders"]
    assert tracker.changed_by_dml("UPDATE shop_9.orders SET id = 2", "shop_1") == []
    # Moved to a database not captured: it ends there, as a drop.
    [moved] = tracker.on_statement("RENAME TABLE shop_1.orders TO archive.orders", "", _at(30))
    assert (moved.table, moved.kind, moved.after) == ("shop_1.orders", "drop", None)
    # A shadow's name in another database is no shadow: the table went away.
    [gone] = tracker.on_statement("RENAME TABLE orders TO shop_1._orders_old", "shop_3", _at(40))
    assert (gone.table, gone.kind) == ("shop_3.orders", "drop")
    assert set(tracker.captured()) == {"shop_2.orders"}


def test_a_dropped_database_ends_its_tables_so_one_created_again_starts_empty() -> None:
    """DROP DATABASE logs no DROP TABLE per table. Ignored, a shard's tables stayed captured
    with their old rows, and a migration re-creating one with CREATE TABLE IF NOT EXISTS (the
    table 'existed') applied its new rows on top of the dropped table's."""
    one, two = _sharded("orders", "shop_1"), _sharded("orders", "shop_2")
    items = _sharded("items", "shop_2")
    server = _Server(**{"shop_2.orders": two})
    tracker = SchemaTracker(
        Capture(None, (r"shop_[0-9]+\.(orders|items)",)),
        {t.qualified: SchemaEntry(_at(1), t) for t in (one, two, items)},
        lambda t, o: None,
        server,
    )
    for statement in ("DROP DATABASE `shop_2`", "drop schema if exists shop_2"):
        dropped = list(tracker.on_statement(statement, "shop_1", _at(10)))
        assert sorted((c.table, c.kind, c.after) for c in dropped) == [
            ("shop_2.items", "drop", None),
            ("shop_2.orders", "drop", None),
        ]
        assert set(tracker.captured()) == {"shop_1.orders"}
        tracker = SchemaTracker(tracker.capture, {t.qualified: SchemaEntry(_at(1), t)
                                                  for t in (one, two, items)},
                                lambda t, o: None, server)  # fmt: skip
    list(tracker.on_statement("DROP DATABASE shop_2", "", _at(10)))
    statement = "CREATE TABLE IF NOT EXISTS orders (id INT PRIMARY KEY)"
    [created] = tracker.on_statement(statement, "shop_2", _at(20))
    assert (created.table, created.kind, created.before, created.after) == (
        "shop_2.orders", "create", None, two,
    )  # fmt: skip
    assert LoggedStatement(_at(10), "", "DROP DATABASE shop_2").touches("shop_2", "orders")
    assert not LoggedStatement(_at(10), "", "DROP DATABASE shop_2").touches("shop_1", "orders")


def test_a_created_table_that_matches_is_captured_and_a_drop_ends_it() -> None:
    fresh = _table(name="fresh_1")
    server = _Server(fresh_1=fresh)
    tracker = _tracker(server, {}, patterns=["fresh_.*"])
    [created] = tracker.on_statement("CREATE TABLE fresh_1 (id INT PRIMARY KEY)", "db", _at(10))
    assert (created.kind, created.before, created.after) == ("create", None, fresh)
    assert tracker.captured() == {"db.fresh_1": fresh}
    [dropped] = tracker.on_statement(
        "DROP TABLE `fresh_1` /* generated by server */", "db", _at(20)
    )
    assert (dropped.kind, dropped.after) == ("drop", None)
    assert tracker.captured() == {}


def test_rename_table_ends_the_old_name_and_brings_in_a_matching_new_one() -> None:
    old, new = _table(name="a"), _table(name="b")
    tracker = _tracker(_Server(b=new), {"db.a": SchemaEntry(_at(1), old)}, patterns=["a", "b"])
    changes = list(tracker.on_statement("RENAME TABLE a TO b", "db", _at(30)))
    assert [(c.table, c.kind, c.after) for c in changes] == [
        ("db.a", "drop", None),
        ("db.b", "rename", new),
    ]


def test_an_atomic_cut_over_is_an_alter_of_the_table_from_its_layout_to_the_shadows() -> None:
    """pt-online-schema-change (`_t_new`/`_t_old`) and gh-ost (`_t_gho`/`_t_del`) swap names in
    one statement; read pair by pair it was a drop of `t` (and capture ended for good)."""
    old, new = _table(_column("a")), _table(_column("a"), _column("region"))
    for statement in (
        "RENAME TABLE `db`.`t` TO `db`.`_t_old`, `db`.`_t_new` TO `db`.`t`",
        "rename /* gh-ost */ table `db`.`t` to `db`.`_t_del`, `db`.`_t_gho` to `db`.`t`",
        "RENAME TABLE t TO __t_old, __t_new TO t",  # the names were taken: more underscores
    ):
        server = _Server(t=new)
        tracker = _tracker(server, {"db.t": SchemaEntry(_at(1), old)}, patterns=["t"])
        [change] = tracker.on_statement(statement, "db", _at(40))
        assert (change.table, change.kind) == ("db.t", "swap")
        assert (change.before, change.after) == (old, new)
        assert tracker.captured() == {"db.t": new}


def test_with_every_table_captured_the_shadows_stay_out_of_capture() -> None:
    old, new = _table(_column("a")), _table(_column("a"), _column("b"))
    shadow = _table(_column("a"), _column("b"), name="_t_new")
    server = _Server(t=new, _t_new=shadow, _t_old=old)
    tracker = _tracker(server, {"db.t": SchemaEntry(_at(1), old)}, patterns=None)
    create = "CREATE TABLE `db`.`_t_new` LIKE `db`.`t`"
    assert list(tracker.on_statement(create, "db", _at(10))) == []
    [altered] = tracker.on_statement("ALTER TABLE `_t_new` ADD b INT", "db", _at(20))
    assert (altered.table, altered.kind, altered.after) == ("db.t", "shadow", old)
    assert tracker.captured() == {"db.t": old}
    [change] = tracker.on_statement("RENAME TABLE t TO _t_old, _t_new TO t", "db", _at(30))
    assert (change.table, change.kind, change.after) == ("db.t", "swap", new)
    assert list(tracker.on_statement("DROP TABLE IF EXISTS `_t_old`", "db", _at(40))) == []
    assert tracker.captured() == {"db.t": new}


def test_a_cut_over_knows_the_columns_its_shadow_renamed() -> None:
    """The shadow's ALTERs (a column renamed twice, another renamed and widened) are kept on the
    table's entry through a two-step cut-over, so the swap is an ALTER with renames, not columns
    dropped and new ones added; a shadow created again (a tool run aborted and restarted)
    starts with no ALTERs."""
    old = _table(_column("qty"), _column("note"))
    new = _table(_column("quantity"), _column("remark"))
    server = _Server(t=new)
    tracker = _tracker(server, {"db.t": SchemaEntry(_at(1), old)})
    list(tracker.on_statement("CREATE TABLE _t_gho LIKE t", "db", _at(5)))
    list(tracker.on_statement("ALTER TABLE _t_gho DROP qty", "db", _at(6)))
    list(tracker.on_statement("CREATE TABLE _t_gho LIKE t", "db", _at(10)))
    for at, alter in enumerate(["CHANGE qty amount INT, CHANGE note remark INT",
                                "RENAME COLUMN amount TO quantity"], start=11):  # fmt: skip
        [change] = tracker.on_statement(f"ALTER TABLE _t_gho {alter}", "db", _at(at))
    assert len(change.shadow) == 2
    [parked] = tracker.on_statement("RENAME TABLE t TO _t_del", "db", _at(20))
    assert (parked.kind, parked.entry().shadow) == ("park", change.shadow)
    [swap] = tracker.on_statement("RENAME TABLE _t_gho TO t", "db", _at(21))
    assert swap.kind == "swap" and swap.entry().shadow == ()
    renames = [
        (c.old_name, c.column)
        for c in column_changes(old, new, swap.statement, *swap.shadow)
        if c.kind == "rename"
    ]
    assert renames == [("qty", "quantity"), ("note", "remark")]


def test_a_two_step_cut_over_parks_the_table_until_its_shadow_takes_the_name() -> None:
    """gh-ost's two-step cut-over: `t TO _t_del`, then (in another statement, possibly another
    batch) `_t_gho TO t`. The parked layout survives the schema history."""
    old, new = _table(_column("a")), _table(_column("a"), _column("b"))
    tracker = _tracker(_Server(t=new), {"db.t": SchemaEntry(_at(1), old)}, patterns=["t"])
    [parked] = tracker.on_statement("RENAME TABLE `t` TO `_t_del`", "db", _at(50))
    assert (parked.kind, parked.before, parked.after) == ("park", old, None)
    assert tracker.captured() == {}
    entry = SchemaEntry.from_json(tracker.entries["db.t"].to_json())  # a later batch's start
    resumed = _tracker(_Server(t=new), {"db.t": entry}, patterns=["t"])
    [swapped] = resumed.on_statement("RENAME TABLE `_t_gho` TO `t`", "db", _at(60))
    assert (swapped.kind, swapped.before, swapped.after) == ("swap", old, new)


def test_a_table_created_on_a_parked_name_starts_empty_not_as_an_alter() -> None:
    old, fresh = _table(_column("a")), _table(_column("z"))
    tracker = _tracker(_Server(t=fresh), {"db.t": SchemaEntry(_at(1), old)}, patterns=["t"])
    list(tracker.on_statement("RENAME TABLE t TO _t_old", "db", _at(50)))
    [created] = tracker.on_statement("CREATE TABLE t (id INT PRIMARY KEY, z INT)", "db", _at(60))
    assert (created.kind, created.before, created.after) == ("create", None, fresh)


def test_a_name_taken_over_by_another_table_is_not_an_alter() -> None:
    """Swapping two real tables moves rows no row event carries: never read as a layout change."""
    a, b = _table(name="a"), _table(_column("x"), name="b")
    server = _Server(a=b, b=a)
    in_force = {"db.a": SchemaEntry(_at(1), a), "db.b": SchemaEntry(_at(1), b)}
    tracker = _tracker(server, in_force, patterns=["a", "b"])
    changes = tracker.on_statement("RENAME TABLE a TO tmp, b TO a, tmp TO b", "db", _at(70))
    assert sorted((c.table, c.kind, c.before) for c in changes) == [
        ("db.a", "rename", None),
        ("db.b", "rename", None),
    ]


@pytest.mark.parametrize(
    ("name", "table", "expected"),
    [
        ("_t_new", "t", True),
        ("___t_old", "t", True),
        ("_t_gho", "t", True),
        ("_t_ghc", "t", True),
        ("_t_20261126053340_del", "t", True),
        ("_orders_new", "orders", True),
        ("_orders_new", "order", False),
        ("t_new", "t", False),
        ("_t_newer", "t", False),
        ("_t_new", "T", False),
    ],
)
def test_shadow_names(name: str, table: str, expected: bool) -> None:
    assert is_shadow_of(name, table) is expected


def test_shadow_shaped_names_are_captured_only_by_their_exact_name() -> None:
    shaped = ("_t_new", "__x_gho", "t_new", "_new", "_t_newer")
    assert [is_shadow_name(n) for n in shaped] == [True, True, False, False, False]
    available = [("db", "orders"), ("db", "_orders_new"), ("db", "_archive_old")]
    assert Capture("db", None).select(available) == [("db", "orders")]
    assert Capture("db", (".*",)).select(available) == [("db", "orders")]
    named = Capture("db", ("orders", "_archive_old"))
    assert named.select(available) == [("db", "orders"), ("db", "_archive_old")]
    assert not Capture("db", None).captures("db", "_orders_gho")
    assert Capture("db", ("_orders_gho",)).captures("db", "_orders_gho")
    assert Capture(None, (r"db\.(orders|_orders_new)",)).select(available) == [("db", "orders")]


def test_a_ddl_met_late_takes_its_own_columns_not_the_servers_later_ones() -> None:
    """Stopped while `name` widened, `note` dropped, `qty` renamed: the server now shows the
    end state, which is not the schema between the DDLs (it used to be taken, and rows written
    between them landed with `quantity` NULL)."""
    before = _table(
        _column("name", "varchar", "varchar(20)"), _column("qty"), _column("note", "varchar",
        "varchar(10)"),
    )  # fmt: skip
    text = {"charset": "utf8mb4", "collation": "utf8mb4_general_ci", "default": "NULL"}
    now = _table(_column("name", "varchar", "varchar(40)", **text), _column("quantity"))
    later = {
        200: "ALTER TABLE t DROP COLUMN note",
        300: "ALTER TABLE t RENAME COLUMN qty TO quantity",
    }
    tracker = _tracker(_Server(later, t=now), {"db.t": SchemaEntry(_at(1), before)})
    [widened] = tracker.on_statement("ALTER TABLE t MODIFY name VARCHAR(40)", "db", _at(100))
    assert widened.after is not None
    assert [c.column_type for c in widened.after.columns] == [
        "int",
        "varchar(40)",
        "int",
        "varchar(10)",
    ]
    [dropped] = tracker.on_statement(later[200], "db", _at(200))
    assert dropped.after is not None and dropped.after.column_names == ("id", "name", "qty")
    [renamed] = tracker.on_statement(later[300], "db", _at(300))
    assert renamed.after == now  # the last DDL: the server's schema is the one in force


def test_a_ddl_met_late_that_the_text_cannot_say_stops_before_it() -> None:
    before = _table(_column("a"))
    later = {200: "ALTER TABLE t ADD b INT"}
    tracker = _tracker(
        _Server(later, t=_table(_column("a"), _column("b"))), {"db.t": SchemaEntry(_at(1), before)}
    )
    with pytest.raises(SchemaChangeError, match=r"again at .*:200 .*--tables t --reset"):
        list(tracker.on_statement("ALTER TABLE t CONVERT TO CHARACTER SET latin1", "db", _at(100)))


def test_under_lower_case_table_names_1_a_ddl_in_any_case_changes_the_stored_table() -> None:
    """Issue 68 item 7: the server stores `shop`.`orders` and compares names case-insensitively,
    so each spelling below changes it; the change keeps the stored name (its lake paths)."""
    orders = _sharded("orders", "shop")
    wider = replace(orders, columns=(*orders.columns, _column("b")))
    server = _Server(**{"shop.orders": wider})
    capture = Capture("Shop", ("Orders", "fresh")).under(TableNames(1))
    statements = [
        ("TRUNCATE TABLE Orders", "shop", "truncate"),
        ("ALTER TABLE `SHOP`.`ORDERS` ADD b INT", "", "alter"),
        ("alter table Shop.Orders add b int", "other", "alter"),
        ("DROP TABLE IF EXISTS x, ORDERS", "shop", "drop"),
        ("DROP DATABASE `SHOP`", "", "drop"),
    ]
    for statement, default, kind in statements:
        tracker = SchemaTracker(
            capture, {"shop.orders": SchemaEntry(_at(1), orders)}, lambda t, o: None, server
        )
        [change] = tracker.on_statement(statement, default, _at(10))
        assert (change.table, change.kind) == ("shop.orders", kind), statement
        assert tracker.changed_by_dml("UPDATE ORDERS SET b = 1", "shop") == (
            ["shop.orders"] if kind != "drop" else []
        )
    # Moved away under another spelling: the name is empty, a drop.
    tracker = SchemaTracker(capture, {"shop.orders": SchemaEntry(_at(1), orders)},
                            lambda t, o: None, server)  # fmt: skip
    [moved] = tracker.on_statement("RENAME TABLE Orders TO Orders_2024", "shop", _at(10))
    assert (moved.table, moved.kind) == ("shop.orders", "drop")
    # A table created as `Fresh` is stored, and captured, as `fresh`.
    fresh = _sharded("fresh", "shop")
    tracker = SchemaTracker(capture, {}, lambda t, o: None, _Server(**{"shop.fresh": fresh}))
    [created] = tracker.on_statement("CREATE TABLE Fresh (id INT)", "SHOP", _at(10))
    assert (created.table, created.after) == ("shop.fresh", fresh)
    # Where names compare as written (0), another spelling is another table.
    tracker = SchemaTracker(Capture("shop", None), {"shop.orders": SchemaEntry(_at(1), orders)},
                            lambda t, o: None, server)  # fmt: skip
    assert list(tracker.on_statement("TRUNCATE TABLE Orders", "shop", _at(10))) == []


def test_under_lower_case_table_names_2_the_table_keeps_the_spelling_it_was_created_with() -> None:
    orders = _sharded("Orders", "Shop")
    wider = replace(orders, columns=(*orders.columns, _column("b")))
    server = _Server(**{"Shop.Orders": wider})
    capture = Capture("shop", None).under(TableNames(2))
    tracker = SchemaTracker(
        capture, {"Shop.Orders": SchemaEntry(_at(1), orders)}, lambda t, o: None, server
    )
    [altered] = tracker.on_statement("ALTER TABLE shop.orders ADD b INT", "", _at(10))
    assert (altered.table, altered.after) == ("Shop.Orders", wider)
    assert server.reads == ["Orders"]  # the server asked by the stored spelling
    [emptied] = tracker.on_statement("TRUNCATE ORDERS", "SHOP", _at(20))
    assert (emptied.table, emptied.kind) == ("Shop.Orders", "truncate")
