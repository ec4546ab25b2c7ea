"""A reusable random-DML workload over three tables with three kinds of primary key.

- `items`: INT key, with DECIMAL, DATETIME(6), TIMESTAMP, TIMESTAMP(6) ON UPDATE, TEXT and
  nullable columns;
- `accounts`: VARCHAR key under utf8mb4_general_ci with mixed-case keys (whose binary and
  collation orders differ: `_` sorts between upper and lower case in binary, after letters in
  the collation);
- `order_lines`: composite key (order_id BIGINT, line_no SMALLINT).

`Workload.step(cursor, rng)` runs one random statement (or a small multi-table transaction):
inserts with keys below the seeded minimum and above the maximum, updates (single and
multi-row), primary-key changes (`UPDATE ... SET id = new`; for `accounts` a change of the key's
case or value; for `order_lines` of `line_no` or `order_id`) and deletes. It is meant for
`tests/integration/replay.py`'s `Writers` threads.
"""

from __future__ import annotations

import random
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import pymysql

TABLES = ("accounts", "items", "order_lines")

DDL = {
    "items": """
        CREATE TABLE items (
            id INT NOT NULL PRIMARY KEY,
            price DECIMAL(12,2) NOT NULL,
            created DATETIME(6) NOT NULL,
            touched TIMESTAMP NULL DEFAULT NULL,
            modified TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6)
                ON UPDATE CURRENT_TIMESTAMP(6),
            note TEXT NULL,
            qty INT NULL
        )""",
    "accounts": """
        CREATE TABLE accounts (
            code VARCHAR(32) COLLATE utf8mb4_general_ci NOT NULL PRIMARY KEY,
            name VARCHAR(64) NOT NULL,
            balance DECIMAL(10,2) NULL,
            opened DATETIME(6) NULL
        ) DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_general_ci""",
    "order_lines": """
        CREATE TABLE order_lines (
            order_id BIGINT NOT NULL,
            line_no SMALLINT NOT NULL,
            sku VARCHAR(16) NOT NULL,
            qty INT NOT NULL,
            amount DECIMAL(10,2) NULL,
            PRIMARY KEY (order_id, line_no)
        )""",
}

ITEM_BASE, ITEM_STEP = 1_000, 3  # seeded ids 1000, 1003, ... leave gaps for inserts
ORDER_BASE = 50_000
_PREFIXES = ("a", "B", "_x", "m", "Z", "q_")
_BASE_TIME = datetime(2024, 3, 1, 12, 0, 0)


def create_tables(cur: Any) -> None:
    for table in TABLES:
        cur.execute(DDL[table])


def _item(rng: random.Random) -> tuple[Any, ...]:
    price = Decimal(rng.randint(-99_999, 9_999_999)) / 100
    created = _BASE_TIME + timedelta(
        seconds=rng.randint(0, 10**7), microseconds=rng.randint(0, 10**6 - 1)
    )
    touched = (
        None
        if rng.random() < 0.3
        else (_BASE_TIME + timedelta(seconds=rng.randint(0, 10**8))).replace(tzinfo=None)
    )
    note = None if rng.random() < 0.2 else "note " * rng.randint(0, 30) + str(rng.random())
    qty = None if rng.random() < 0.3 else rng.randint(-5, 500)
    return price, created, touched, note, qty


def _code(rng: random.Random, n: int | None = None) -> str:
    number = rng.randint(0, 4_000) if n is None else n
    prefix = rng.choice(_PREFIXES)
    prefix = prefix.upper() if rng.random() < 0.5 else prefix.lower()
    return f"{prefix}-{number:05d}"


def _account(rng: random.Random) -> tuple[Any, ...]:
    balance = None if rng.random() < 0.25 else Decimal(rng.randint(-(10**6), 10**7)) / 100
    opened = (
        None if rng.random() < 0.2 else _BASE_TIME - timedelta(microseconds=rng.randint(0, 10**13))
    )
    return f"name {rng.randint(0, 10**6)}", balance, opened


def _line(rng: random.Random) -> tuple[Any, ...]:
    amount = None if rng.random() < 0.2 else Decimal(rng.randint(0, 10**6)) / 100
    return f"SKU{rng.randint(0, 99_999)}", rng.randint(1, 50), amount


def seed(cur: Any, rows: int, rng: random.Random) -> None:
    """`rows` rows per table."""
    cur.executemany(
        "INSERT INTO items (id, price, created, touched, note, qty) VALUES (%s,%s,%s,%s,%s,%s)",
        [(ITEM_BASE + ITEM_STEP * i, *_item(rng)) for i in range(rows)],
    )
    codes: dict[str, str] = {}
    while len(codes) < rows:
        code = _code(rng)
        codes.setdefault(code.upper(), code)  # one spelling per collation-equal key
    cur.executemany(
        "INSERT INTO accounts (code, name, balance, opened) VALUES (%s,%s,%s,%s)",
        [(code, *_account(rng)) for code in codes.values()],
    )
    cur.executemany(
        "INSERT INTO order_lines (order_id, line_no, sku, qty, amount) VALUES (%s,%s,%s,%s,%s)",
        [(ORDER_BASE + i // 4 * 7, i % 4 + 1, *_line(rng)) for i in range(rows)],
    )


def seed_items(cur: Any, rng: random.Random, rows: int) -> None:
    """`rows` rows into `items` alone."""
    cur.executemany(
        "INSERT INTO items (id, price, created, touched, note, qty) VALUES (%s,%s,%s,%s,%s,%s)",
        [(ITEM_BASE + ITEM_STEP * i, *_item(rng)) for i in range(rows)],
    )


class Workload:
    """Random DML over the three tables; `rows` is the seeded row count per table."""

    def __init__(self, rows: int) -> None:
        self.item_max = ITEM_BASE + ITEM_STEP * rows
        self.order_max = ORDER_BASE + rows // 4 * 7

    # keys -------------------------------------------------------------------------------------

    def _item_id(self, rng: random.Random) -> int:
        roll = rng.random()
        if roll < 0.2:
            return rng.randint(1, ITEM_BASE - 1)  # below the planned minimum
        if roll < 0.4:
            return rng.randint(self.item_max + 1, self.item_max + 5_000)  # above the maximum
        return rng.randint(ITEM_BASE, self.item_max)

    def _order_id(self, rng: random.Random) -> int:
        roll = rng.random()
        if roll < 0.2:
            return rng.randint(1, ORDER_BASE - 1)
        if roll < 0.4:
            return rng.randint(self.order_max + 1, self.order_max + 5_000)
        return rng.randint(ORDER_BASE, self.order_max)

    # statements -------------------------------------------------------------------------------

    def step(self, cur: Any, rng: random.Random) -> None:
        roll = rng.random()
        if roll < 0.05:
            self._transaction(cur, rng)
        elif roll < 0.4:
            self._items(cur, rng)
        elif roll < 0.7:
            self._accounts(cur, rng)
        else:
            self._order_lines(cur, rng)

    def _transaction(self, cur: Any, rng: random.Random) -> None:
        cur.execute("BEGIN")
        try:
            for _ in range(rng.randint(2, 4)):
                rng.choice((self._items, self._accounts, self._order_lines))(cur, rng)
            cur.execute("COMMIT")
        except pymysql.err.MySQLError:
            cur.execute("ROLLBACK")
            raise

    def _items(self, cur: Any, rng: random.Random) -> None:
        roll = rng.random()
        anchor = self._item_id(rng)
        if roll < 0.3:
            cur.execute(
                "INSERT INTO items (id, price, created, touched, note, qty) "
                "VALUES (%s,%s,%s,%s,%s,%s)",
                (anchor, *_item(rng)),
            )
        elif roll < 0.55:
            price, _, touched, note, qty = _item(rng)
            cur.execute(
                "UPDATE items SET price = %s, touched = %s, note = %s, qty = %s "
                "WHERE id >= %s ORDER BY id LIMIT 1",
                (price, touched, note, qty, anchor),
            )
        elif roll < 0.65:  # a multi-row event
            cur.execute(
                "UPDATE items SET qty = COALESCE(qty, 0) + 1 WHERE id BETWEEN %s AND %s",
                (anchor, anchor + 12),
            )
        elif roll < 0.85:  # primary-key change, possibly into another chunk
            new = self._item_id(rng) if rng.random() < 0.5 else anchor + rng.randint(1, 2)
            cur.execute(
                "UPDATE items SET id = %s WHERE id >= %s ORDER BY id LIMIT 1", (new, anchor)
            )
        else:
            cur.execute("DELETE FROM items WHERE id >= %s ORDER BY id LIMIT 1", (anchor,))

    def _existing_code(self, cur: Any, rng: random.Random) -> str | None:
        cur.execute(
            "SELECT code FROM accounts WHERE code >= %s ORDER BY code LIMIT 1", (_code(rng),)
        )
        row = cur.fetchone()
        return None if row is None else str(row[0])

    def _accounts(self, cur: Any, rng: random.Random) -> None:
        roll = rng.random()
        if roll < 0.3:
            cur.execute(
                "INSERT INTO accounts (code, name, balance, opened) VALUES (%s,%s,%s,%s)",
                (_code(rng), *_account(rng)),
            )
            return
        code = self._existing_code(cur, rng)
        if code is None:
            return
        if roll < 0.55:
            cur.execute(
                "UPDATE accounts SET name = %s, balance = %s, opened = %s WHERE code = %s",
                (*_account(rng), code),
            )
        elif roll < 0.7:  # key change of case only: the same key under the collation
            cur.execute("UPDATE accounts SET code = %s WHERE code = %s", (code.swapcase(), code))
        elif roll < 0.85:  # key change of value
            cur.execute("UPDATE accounts SET code = %s WHERE code = %s", (_code(rng), code))
        else:
            cur.execute("DELETE FROM accounts WHERE code = %s", (code,))

    def _order_lines(self, cur: Any, rng: random.Random) -> None:
        roll = rng.random()
        anchor = self._order_id(rng)
        where = "WHERE order_id >= %s ORDER BY order_id, line_no LIMIT 1"
        if roll < 0.3:
            cur.execute(
                "INSERT INTO order_lines (order_id, line_no, sku, qty, amount) "
                "VALUES (%s,%s,%s,%s,%s)",
                (anchor, rng.randint(1, 6), *_line(rng)),
            )
        elif roll < 0.55:
            sku, qty, amount = _line(rng)
            cur.execute(f"UPDATE order_lines SET sku = %s, qty = %s, amount = %s {where}",
                        (sku, qty, amount, anchor))  # fmt: skip
        elif roll < 0.7:  # key change of the second key column (same chunk)
            cur.execute(
                f"UPDATE order_lines SET line_no = %s {where}", (rng.randint(1, 300), anchor)
            )
        elif roll < 0.8:  # key change of the split column
            cur.execute(
                f"UPDATE order_lines SET order_id = %s {where}", (self._order_id(rng), anchor)
            )
        else:
            cur.execute(f"DELETE FROM order_lines {where}", (anchor,))
