"""`fixtures/types.sql`: every MySQL/MariaDB column type with its edge values (`all_types`), and
tables keyed by every orderable type."""

from __future__ import annotations

from pathlib import Path

from .replay import connect

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "types.sql"
TABLES = [
    "all_types", "key_datetime", "key_timestamp", "key_decimal", "key_enum", "key_unsigned",
    "key_date", "key_binary", "key_latin1", "key_composite",
]  # fmt: skip


def load_type_tables(db_env: dict[str, str], database: str) -> None:
    """Create and fill `fixtures/types.sql`'s tables in `database`."""
    statements = [s.strip() for s in FIXTURE.read_text().split(";\n") if s.strip()]
    with connect(db_env, database) as conn, conn.cursor() as cur:
        for statement in statements:
            lines = [line for line in statement.splitlines() if not line.startswith("--")]
            if lines:
                cur.execute("\n".join(lines))
