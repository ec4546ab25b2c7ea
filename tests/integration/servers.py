"""Throwaway MariaDB servers, for tests that need other global settings than the shared server's.

Every test runs against the shared server (scripts/db.sh, 127.0.0.1:13306) at once, so no test may
change its globals. A test that needs, say, `transaction-isolation=READ-UNCOMMITTED` or
`log_bin_compress=ON` starts its own server with the same script: a fresh data dir in a temp dir,
a free port, the settings appended to the script's my.cnf (later lines win, so they override its
defaults), a `binlake` user with a random password. The script stops it by its PID; the temp dir
goes with it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DB_SH = ROOT / "scripts" / "db.sh"
# Smaller than the shared server's: a throwaway server holds a few tables, and installs faster
# without the 96M redo log.
_SMALL = {"innodb_buffer_pool_size": "64M", "innodb_log_file_size": "8M"}


@dataclass(frozen=True)
class PrivateServer:
    host: str
    port: int
    password: str
    directory: Path
    #: scripts/db.sh's environment for this server: `restart` starts it with the same settings.
    script_env: dict[str, str]

    @property
    def db_env(self) -> dict[str, str]:
        """Shaped like conftest's `db_env`, so replay.connect and the oracle reach this server."""
        return {"BINLAKE_DB_PORT": str(self.port), "BINLAKE_SOURCE_PASSWORD": self.password}

    @property
    def error_log(self) -> str:
        return (self.directory / "error.log").read_text(errors="replace")

    def stop(self) -> None:
        """Stop the server (a clean shutdown: it closes every connection and its binlog file)."""
        _db_sh("down", self.script_env)

    def start(self) -> None:
        """Start it again on the same port and data dir (a new binlog file, like any restart)."""
        started = _db_sh("up", self.script_env)
        if started.returncode != 0:
            raise RuntimeError(f"MariaDB did not restart: {started.stderr}{self.error_log[-3000:]}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _db_sh(command: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(DB_SH), command], env=env, capture_output=True, text=True, timeout=120, check=False
    )


@contextmanager
def private_server(settings: Mapping[str, str]) -> Iterator[PrivateServer]:
    """A MariaDB of its own with `settings` (my.cnf `name: value`; an empty value for a bare flag
    such as `skip-log-bin`) on top of scripts/db.sh's."""
    # A short path: the server's unix socket lives in it (sun_path holds 107 bytes).
    directory = Path(tempfile.mkdtemp(prefix="binlake-db-"))
    lines = [f"{name}={value}" if value else name for name, value in {**_SMALL, **settings}.items()]
    env = {
        **os.environ,
        "BINLAKE_DB_DIR": str(directory),
        "BINLAKE_DB_PORT": str(free_port()),
        "BINLAKE_DB_SETTINGS": "\n".join(lines),
    }
    try:
        started = _db_sh("up", env)
        if started.returncode != 0:
            log = directory / "error.log"
            raise RuntimeError(
                f"throwaway MariaDB with {dict(settings)} did not start: {started.stderr}"
                + (log.read_text(errors="replace")[-3000:] if log.exists() else "")
            )
        yield PrivateServer(
            "127.0.0.1",
            int(env["BINLAKE_DB_PORT"]),
            (directory / "password").read_text().strip(),
            directory,
            env,
        )
    finally:
        _db_sh("down", env)
        shutil.rmtree(directory, ignore_errors=True)
