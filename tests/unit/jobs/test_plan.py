"""`binlake plan`'s text: aligned rows, counts with their nouns, the reads and server ids."""

from __future__ import annotations

from binlake.jobs.plan import Plan, TablePlan, aligned, counted, id_range, render_plan


def _plan(*tables: TablePlan, resume_note: str | None = None) -> Plan:
    return Plan(list(tables), 100, 4, 3, 5400, (5499,), "/lake/_system/chunks", resume_note, None)


def test_counts_take_the_singular_only_for_one() -> None:
    assert [counted(n, "chunk") for n in (0, 1, 2, 8096)] == [
        "0 chunks", "1 chunk", "2 chunks", "8,096 chunks",
    ]  # fmt: skip


def test_server_ids_read_as_a_range() -> None:
    assert id_range((5499,)) == "5499"
    assert id_range((5499, 5498, 5497)) == "5497-5499"


def test_columns_align_and_numbers_align_right() -> None:
    rows = [("table", "rows"), ("db.a", "~1"), ("db.longer", "~1,000")]
    assert aligned(rows, right={1}) == [
        "table        rows",
        "db.a           ~1",
        "db.longer  ~1,000",
    ]


def test_a_plan_reads_as_aligned_lines() -> None:
    new = TablePlan("shop.customers", ("id",), "id", 3000, 30, None)
    resumed = TablePlan("shop.order_lines", ("order_id", "line_no"), "order_id", 2400, 5, 2)
    done = TablePlan("shop.products", ("sku",), "sku", 600, 1, 1)

    assert render_plan(_plan(new, resumed, done)).splitlines() == [
        "table             key                split by  est. rows  chunks     rows/chunk  ledger",
        "shop.customers    id                 id           ~3,000  30 chunks        ~100  planned "
        "now",
        "shop.order_lines  order_id, line_no  order_id     ~2,400  5 chunks         ~480  "
        "recorded, 2/5 finished",
        "shop.products     sku                sku            ~600  1 chunk          ~600  "
        "finished: skipped",
        "",
        "3 tables, 36 chunks (snapshot.chunk_size: 100 rows, more where one key value holds more); "
        "33 chunks to read",
        "source reads at once: up to 7 chunk SELECTs (2 tables at once, each up to "
        "snapshot.parallelism=4 chunks)",
        "server ids: snapshot readers 5400-5407, stream 5499",
        "ledger: /lake/_system/chunks (2 tables planned, 3 of 6 chunks finished)",
    ]


def test_reads_at_once_are_bounded_by_the_table_slots_and_each_tables_chunks() -> None:
    tables = [TablePlan(f"db.t{i}", ("id",), "id", 10, n, None) for i, n in enumerate((1, 9, 2, 6))]
    plan = _plan(*tables)  # 3 slots of 4 readers: the three largest tables, 4 + 4 + 2
    assert (plan.tables_at_once, plan.reads_at_once) == (3, 10)
    assert plan.snapshot_ids == tuple(range(5400, 5412))


def test_a_finished_snapshot_takes_no_reader_ids() -> None:
    lines = render_plan(_plan(TablePlan("db.t", ("id",), "id", 1, 1, 1))).splitlines()
    assert (
        "1 table, 1 chunk (snapshot.chunk_size: 100 rows, more where one key value holds more); "
        "0 chunks to read"
    ) in lines
    assert "server ids: stream 5499" in lines
    assert not any(line.startswith("source reads") for line in lines)


def test_a_ledger_it_cannot_read_is_said_so() -> None:
    plan = _plan(TablePlan("db.t", ("id",), "id", 1, 1, None), resume_note="why")
    assert render_plan(plan).splitlines()[-1] == "plan ignores resume state: why"
