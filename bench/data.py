"""The benchmark's source data: a TPC-DS `customer`-shaped table, its load, and the workloads
that change it (the pre-stream burst, the rate-limited single-row updater, latency markers)."""

from __future__ import annotations

import os
import random
import tempfile
import threading
import time
from dataclasses import dataclass, field

import pymysql

DATABASE = "bench"
TABLE = "customer"

#: The customer table's DDL for any `{database}.{table}` (the many-tables scenario's tables
#: share it).
DDL_TEMPLATE = """
CREATE TABLE `{database}`.`{table}` (
  c_customer_sk          BIGINT      NOT NULL,
  c_customer_id          CHAR(16)    NOT NULL,
  c_current_cdemo_sk     INT,
  c_current_hdemo_sk     INT,
  c_current_addr_sk      INT,
  c_first_shipto_date_sk INT,
  c_first_sales_date_sk  INT,
  c_salutation           CHAR(10),
  c_first_name           CHAR(20),
  c_last_name            CHAR(30),
  c_preferred_cust_flag  CHAR(1),
  c_birth_day            INT,
  c_birth_month          INT,
  c_birth_year           INT,
  c_birth_country        VARCHAR(20),
  c_login                CHAR(13),
  c_email_address        CHAR(50),
  c_last_review_date_sk  INT,
  PRIMARY KEY (c_customer_sk)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4
"""
DDL = DDL_TEMPLATE.format(database=DATABASE, table=TABLE)
COLUMNS = [
    "c_customer_sk",
    "c_customer_id",
    "c_current_cdemo_sk",
    "c_current_hdemo_sk",
    "c_current_addr_sk",
    "c_first_shipto_date_sk",
    "c_first_sales_date_sk",
    "c_salutation",
    "c_first_name",
    "c_last_name",
    "c_preferred_cust_flag",
    "c_birth_day",
    "c_birth_month",
    "c_birth_year",
    "c_birth_country",
    "c_login",
    "c_email_address",
    "c_last_review_date_sk",
]

_SALUTATIONS = ["Mr.", "Mrs.", "Ms.", "Miss", "Dr.", "Sir"]
_FIRST = [
    "James",
    "Mary",
    "John",
    "Patricia",
    "Robert",
    "Jennifer",
    "Michael",
    "Linda",
    "William",
    "Elizabeth",
    "David",
    "Barbara",
    "Richard",
    "Susan",
    "Joseph",
    "Jessica",
    "Thomas",
    "Sarah",
    "Charles",
    "Karen",
]
_LAST = [
    "Smith",
    "Johnson",
    "Williams",
    "Brown",
    "Jones",
    "Garcia",
    "Miller",
    "Davis",
    "Rodriguez",
    "Martinez",
    "Hernandez",
    "Lopez",
    "Gonzalez",
    "Wilson",
    "Anderson",
    "Thomas",
    "Taylor",
    "Moore",
    "Jackson",
    "Martin",
]
_COUNTRIES = [
    "UNITED STATES",
    "GERMANY",
    "FRANCE",
    "JAPAN",
    "BRAZIL",
    "INDIA",
    "CANADA",
    "MEXICO",
    "NEW ZEALAND",
    "SWEDEN",
]


def connect(
    password: str, port: int, database: str | None = DATABASE, **kw: object
) -> pymysql.Connection:
    return pymysql.connect(
        host="127.0.0.1",
        port=port,
        user="binlake",
        password=password,
        database=database,
        charset="utf8mb4",
        autocommit=True,
        **kw,
    )


def _tsv_lines(rows: int, seed: int = 20240501):
    rnd = random.Random(seed)
    r = rnd.random
    ri = rnd.randrange
    for sk in range(1, rows + 1):
        first, last = _FIRST[ri(20)], _LAST[ri(20)]
        null = r() < 0.03  # TPC-DS has ~3% NULLs in most attributes
        yield (
            "\t".join(
                (
                    str(sk),
                    f"AAAAAAAA{sk:08X}",
                    str(ri(1, 1_920_800)),
                    str(ri(1, 7_200)),
                    "\\N" if null else str(ri(1, 500_000)),
                    str(ri(2_449_028, 2_452_678)),
                    str(ri(2_448_998, 2_452_648)),
                    "\\N" if null else _SALUTATIONS[ri(6)],
                    first,
                    last,
                    "Y" if r() < 0.5 else "N",
                    str(ri(1, 29)),
                    str(ri(1, 13)),
                    str(ri(1924, 1993)),
                    _COUNTRIES[ri(10)],
                    "\\N",
                    f"{first}.{last}@{'example' if sk % 3 else 'mail'}.com",
                    "\\N" if null else str(ri(2_452_283, 2_452_648)),
                )
            )
            + "\n"
        )


def create_and_load(password: str, port: int, rows: int, table: str = TABLE) -> float:
    """(Re)create bench.`table` (customer-shaped) with `rows` rows via LOAD DATA LOCAL INFILE;
    returns seconds."""
    with connect(password, port, database=None, local_infile=True) as conn, conn.cursor() as cur:
        cur.execute(f"CREATE DATABASE IF NOT EXISTS {DATABASE}")
        cur.execute(f"DROP TABLE IF EXISTS {DATABASE}.`{table}`")
        cur.execute(DDL_TEMPLATE.format(database=DATABASE, table=table))
        return _load(cur, DATABASE, table, rows)


def drop_table(password: str, port: int, table: str) -> None:
    with connect(password, port) as conn, conn.cursor() as cur:
        cur.execute(f"DROP TABLE IF EXISTS `{table}`")


def _load(
    cur: pymysql.cursors.Cursor, database: str, table: str, rows: int, seed: int = 0
) -> float:
    """`rows` generated rows into `database.table` with one LOAD DATA LOCAL INFILE (from a
    temporary TSV file); checks the count; returns the seconds LOAD DATA took."""
    fd, path = tempfile.mkstemp(prefix=f"bench-{table}-", suffix=".tsv")
    try:
        with os.fdopen(fd, "w") as out:
            batch: list[str] = []
            for line in _tsv_lines(rows, seed or 20240501):
                batch.append(line)
                if len(batch) >= 50_000:
                    out.write("".join(batch))
                    batch.clear()
            out.write("".join(batch))
        started = time.monotonic()
        cur.execute(
            f"LOAD DATA LOCAL INFILE %s INTO TABLE `{database}`.`{table}` "
            "FIELDS TERMINATED BY '\\t' LINES TERMINATED BY '\\n'",
            (path,),
        )
        loaded = time.monotonic() - started
    finally:
        os.unlink(path)
    cur.execute(f"SELECT COUNT(*) FROM `{database}`.`{table}`")
    (count,) = cur.fetchone()
    if count != rows:
        raise RuntimeError(f"loaded {count} rows into {database}.{table}, expected {rows}")
    return loaded


# --------------------------------------------------------------------------- many tables

MANY_DATABASE = "bench_many"
#: The single table holding as many rows as all the small tables together (the baseline).
SINGLE_TABLE = "one_table"


def many_table_names(tables: int) -> list[str]:
    return [f"t{i:04d}" for i in range(1, tables + 1)]


def create_many_tables(password: str, port: int, tables: int, rows: int) -> dict[str, float]:
    """(Re)create database `bench_many`: `tables` customer-shaped tables `t0001`… of `rows` rows
    each (own seed each, keys 1..rows), and `one_table` holding `tables × rows` rows of the same
    shape (keys 1..tables × rows). Each table is one LOAD DATA LOCAL INFILE. Returns seconds."""
    started = time.monotonic()
    with connect(password, port, database=None, local_infile=True) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {MANY_DATABASE}")
        cur.execute(f"CREATE DATABASE {MANY_DATABASE}")
        for i, name in enumerate(many_table_names(tables)):
            cur.execute(DDL_TEMPLATE.format(database=MANY_DATABASE, table=name))
            _load(cur, MANY_DATABASE, name, rows, seed=20240501 + 1 + i)
        many_s = time.monotonic() - started
        cur.execute(DDL_TEMPLATE.format(database=MANY_DATABASE, table=SINGLE_TABLE))
        single_load_s = _load(cur, MANY_DATABASE, SINGLE_TABLE, tables * rows)
    return {
        "many_s": round(many_s, 2),
        "single_s": round(time.monotonic() - started - many_s, 2),
        "single_load_data_s": round(single_load_s, 2),
    }


def drop_many_tables(password: str, port: int) -> None:
    with connect(password, port, database=None) as conn, conn.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS {MANY_DATABASE}")


def touch_tables(password: str, port: int, tables: list[str], rows: int) -> int:
    """The catch-up batch: in each of `tables`, one autocommit UPDATE of `rows` rows spread over
    its keys, changing columns the fingerprint sums (`c_birth_year` + 1, `c_birth_day`) and a
    string column. Returns the rows changed (each one binlog row change)."""
    changed = 0
    with connect(password, port, database=MANY_DATABASE) as conn, conn.cursor() as cur:
        for name in tables:
            cur.execute(f"SELECT MIN(c_customer_sk), MAX(c_customer_sk) FROM `{name}`")
            low, high = cur.fetchone()
            step = max((high - low) // max(rows, 1), 1)
            keys = sorted({min(low + j * step, high) for j in range(rows)})
            cur.execute(
                f"UPDATE `{name}` SET c_birth_year = c_birth_year + 1, "
                "c_birth_day = 1 + c_birth_day %% 28, c_login = 'catchup' "
                f"WHERE c_customer_sk IN ({', '.join(['%s'] * len(keys))})",
                keys,
            )
            changed += cur.rowcount
    return changed


def table_fingerprint(
    password: str, port: int, table: str = TABLE, database: str = DATABASE
) -> dict[str, int]:
    with connect(password, port, database=database) as conn, conn.cursor() as cur:
        cur.execute(
            f"SELECT COUNT(*), COALESCE(SUM(c_birth_year), 0), COALESCE(SUM(c_birth_day), 0), "
            f"MIN(c_customer_sk), MAX(c_customer_sk) FROM `{table}`"
        )
        count, years, days, low, high = cur.fetchone()
    return {
        "rows": int(count),
        "sum_birth_year": int(years),
        "sum_birth_day": int(days),
        "min_sk": int(low),
        "max_sk": int(high),
    }


@dataclass
class Burst:
    inserts: int = 0
    updates: int = 0
    deletes: int = 0
    statements: int = 0
    seconds: float = 0.0

    @property
    def changes(self) -> int:
        return self.inserts + self.updates + self.deletes


def make_burst(
    password: str, port: int, changes: int, step: int = 5000, table: str = TABLE
) -> Burst:
    """≈`changes` row changes to bench.`table`, ¼ inserts (new keys above max), ½ updates, ¼
    deletes, in multi-row autocommit statements of ≤ `step` rows (one binlog transaction each)."""
    name = f"`{table}`"
    burst = Burst()
    started = time.monotonic()
    with connect(password, port) as conn, conn.cursor() as cur:
        cur.execute(f"SELECT MIN(c_customer_sk), MAX(c_customer_sk), COUNT(*) FROM {name}")
        low, high, count = cur.fetchone()
        n_delete = min(changes // 4, count // 4)
        n_insert = changes // 4
        n_update = changes - n_delete - n_insert
        cols = ", ".join(COLUMNS[1:])
        # Inserts: copies of existing rows under new keys above the current max.
        done = 0
        while done < n_insert:
            k = min(step, n_insert - done)
            src_lo = low + (done % max(count - n_delete - k, 1))
            cur.execute(
                f"INSERT INTO {name} (c_customer_sk, {cols}) SELECT c_customer_sk + %s, {cols} "
                f"FROM {name} WHERE c_customer_sk BETWEEN %s AND %s",
                (high + done + 1 - src_lo, src_lo, src_lo + k - 1),
            )
            done += cur.rowcount
            burst.statements += 1
            if cur.rowcount == 0:
                raise RuntimeError("burst insert matched no rows")
        burst.inserts = done
        # Deletes: the top n_delete original keys (those there before the inserts; counted by
        # rows, so keys an earlier burst deleted are skipped, not counted).
        while burst.deletes < n_delete:
            k = min(step, n_delete - burst.deletes)
            cur.execute(
                f"DELETE FROM {name} WHERE c_customer_sk <= %s "
                "ORDER BY c_customer_sk DESC LIMIT %s",
                (high, k),
            )
            if cur.rowcount == 0:
                break
            burst.deletes += cur.rowcount
            burst.statements += 1
        cur.execute(f"SELECT MAX(c_customer_sk) FROM {name} WHERE c_customer_sk <= %s", (high,))
        # Updates: sweep the surviving original keys, wrapping around if needed.
        (surviving_hi,) = cur.fetchone()
        span = surviving_hi - low + 1
        done = round_ = 0
        while done < n_update:
            k = min(step, n_update - done, span)
            a = low + (done % span)
            b = min(a + k - 1, surviving_hi)
            round_ += 1
            cur.execute(
                f"UPDATE {name} SET c_birth_day = 1 + (c_birth_day + %s) %% 28, "
                "c_login = %s, c_current_addr_sk = COALESCE(c_current_addr_sk, 0) + 1 "
                "WHERE c_customer_sk BETWEEN %s AND %s",
                (round_, f"burst{round_:08d}", a, b),
            )
            done += b - a + 1
            burst.updates += cur.rowcount
            burst.statements += 1
    burst.seconds = time.monotonic() - started
    return burst


@dataclass
class Updater:
    """A thread with its own connection running ~`rate` single-row updates/s until stopped."""

    password: str
    port: int
    low: int
    high: int
    rate: float = 500.0
    done: int = 0
    seconds: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    error: BaseException | None = None

    def start(self) -> Updater:
        self._thread = threading.Thread(target=self._run, name="bench-updater", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        rnd = random.Random(7)
        try:
            with connect(self.password, self.port) as conn, conn.cursor() as cur:
                started = time.monotonic()
                due = started
                while not self._stop.is_set():
                    cur.execute(
                        f"UPDATE {TABLE} SET c_birth_day = 1 + (c_birth_day + 1) %% 28 "
                        "WHERE c_customer_sk = %s",
                        (rnd.randint(self.low, self.high),),
                    )
                    self.done += 1
                    due += 1.0 / self.rate
                    delay = due - time.monotonic()
                    if delay > 0:
                        time.sleep(delay)
                    elif delay < -1.0:
                        due = time.monotonic()  # fell behind: do not burst to catch up
                self.seconds = time.monotonic() - started
        except BaseException as exc:  # reported by stop()
            self.error = exc

    def stop(self) -> float:
        """Stop; return the achieved updates/s."""
        self._stop.set()
        assert self._thread is not None
        self._thread.join()
        if self.error is not None:
            raise RuntimeError(f"the concurrent updater failed: {self.error}") from self.error
        return self.done / self.seconds if self.seconds else 0.0
