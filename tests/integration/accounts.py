"""Throwaway users (and roles) on the shared server, created as root through scripts/db.sh (no
server variable changes) with unique names and dropped afterwards: the `account` fixture's."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from .replay import ROOT

HOST = "127.0.0.1"

#: The grants binlake needs, and no more.
MINIMAL = ("BINLOG MONITOR ON *.*", "REPLICATION SLAVE ON *.*", "SELECT ON {db}.*")


def as_root(statement: str) -> None:
    subprocess.run(
        [str(ROOT / "scripts" / "db.sh"), "sql", "-e", statement],
        check=True,
        capture_output=True,
        text=True,
    )


@contextmanager
def accounts(database: str, make_config: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """`create(*grants, role_grants=())` → a config for a new user holding `grants` (each
    "PRIVILEGES ON target", target `{db}` for `database`), and `role_grants` only through its
    default role; the users and roles are dropped on exit."""
    created: list[str] = []

    def create(*grants: str, role_grants: tuple[str, ...] = ()) -> Any:
        name = f"bl_priv_{uuid.uuid4().hex[:10]}"
        password = f"pw-{uuid.uuid4().hex}"
        user = f"'{name}'@'{HOST}'"
        as_root(f"CREATE USER {user} IDENTIFIED BY '{password}'")
        created.append(f"DROP USER IF EXISTS {user}")
        for grant in grants:
            as_root(f"GRANT {grant.format(db=f'`{database}`')} TO {user}")
        if role_grants:
            role = f"{name}_role"
            as_root(f"CREATE ROLE {role}")
            created.append(f"DROP ROLE IF EXISTS {role}")
            for grant in role_grants:
                as_root(f"GRANT {grant.format(db=f'`{database}`')} TO {role}")
            as_root(f"GRANT {role} TO {user}")
            as_root(f"SET DEFAULT ROLE {role} FOR {user}")
        return make_config(source={"user": name, "password": password, "password_env": None})

    yield create
    for statement in created:
        as_root(statement)
