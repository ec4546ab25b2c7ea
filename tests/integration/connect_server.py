"""A real Spark Connect server in a JVM of its own, for tests that run binlake as a Connect client.

A test that runs the CLI in a subprocess with `SPARK_REMOTE=sc://127.0.0.1:<port>` proves binlake
works where the client process has no JVM at all (Databricks serverless, shared clusters). The
server is the venv's own PySpark distribution (`bin/spark-submit` with `SparkConnectServer`, whose
jar ships in `pyspark/jars`, so it is on the class path already) plus Delta's cached jars and
extensions, configured like `binlake.runtime.spark.local_session`.

Its Python workers (mapInArrow functions, foreachBatch functions, Python data sources) run
`sys.executable`, so they import binlake from this venv, as they would on a cluster with the wheel.
The server's output goes to a log file in the work dir, so a failing test can show its tail.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pyspark

from binlake.runtime.spark import class_archive_conf, ivy_dir, local_tuning

from .replay import ROOT, subprocess_env

#: The Spark Connect server's and its clients' time zone: not the tests' (UTC), so a value that
#: depends on a process's zone differs.
REMOTE_TZ = "Europe/Paris"
#: The JVM takes ~10-20 s to start with Delta; a loaded CI machine may take several times that.
START_TIMEOUT = 120.0
#: How long a SIGTERM may take to stop the JVM (it stops the SparkContext) before SIGKILL.
STOP_TIMEOUT = 30.0
#: Lines of the server log a start-up failure shows.
LOG_TAIL = 40

SPARK_HOME = Path(pyspark.__file__).resolve().parent
SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"


def free_ports(count: int) -> list[int]:
    """`count` distinct ports nobody listens on now (the server fails fast on a taken one: no
    port retries)."""
    with contextlib.ExitStack() as held:
        sockets = [held.enter_context(socket.socket()) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in sockets]


def free_port() -> int:
    return free_ports(1)[0]


def delta_jars() -> list[str]:
    """Delta's jars as `make setup` cached them; the server cannot resolve packages itself
    offline, and resolving them would add Ivy's report and network time to every start."""
    jars = sorted(str(jar) for jar in Path(ivy_dir(), "jars").glob("*.jar"))
    if not any(Path(jar).name.startswith("io.delta_delta-spark") for jar in jars):
        raise RuntimeError(f"no Delta jars in {ivy_dir()}/jars: run `make setup` first")
    return jars


def server_command(workdir: Path, port: int) -> list[str]:
    """The spark-submit command line of a local Connect server with Delta on `port`. Its own
    driver and block manager listen on ports chosen with it: left to the system, one of them
    once took `port` first, and the server died unable to bind it while the port answered."""
    driver, blocks = [other for other in free_ports(3) if other != port][:2]
    confs = {
        **local_tuning(),
        **class_archive_conf(),
        "spark.connect.grpc.binding.port": str(port),
        "spark.driver.port": str(driver),
        "spark.blockManager.port": str(blocks),
        # Loopback only: a test server must not be reachable from the network.
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.driver.memory": "2g",
        "spark.sql.warehouse.dir": str(workdir / "warehouse"),
    }
    command = [str(SPARK_HOME / "bin" / "spark-submit"), "--master", "local[2]"]
    for name, value in confs.items():
        command += ["--conf", f"{name}={value}"]
    return [*command, "--jars", ",".join(delta_jars()), "--class", SERVER_CLASS, "spark-internal"]


def server_env() -> dict[str, str]:
    """This process's environment (JAVA_HOME and the like) with the server's own settings."""
    return {
        **os.environ,
        # The venv's distribution, not any other Spark a SPARK_HOME elsewhere may point at.
        "SPARK_HOME": str(SPARK_HOME),
        # Python workers must run the interpreter that has binlake installed.
        "PYSPARK_PYTHON": sys.executable,
        "SPARK_LOCAL_IP": "127.0.0.1",
    }


def log_tail(log: Path, lines: int = LOG_TAIL) -> str:
    """The last `lines` lines of the server log, for an error message."""
    if not log.is_file():
        return ""
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _wait_until_listening(process: subprocess.Popen[bytes], port: int, log: Path) -> None:
    """Block until the gRPC port accepts connections: the server binds it only once its
    SparkContext is up, so a client can connect right away."""
    deadline = time.monotonic() + START_TIMEOUT
    while not _accepts(port):
        if process.poll() is not None:
            raise RuntimeError(
                f"Spark Connect server exited with {process.returncode} before listening on "
                f"{port}; last lines of {log}:\n{log_tail(log)}"
            )
        if time.monotonic() > deadline:
            raise RuntimeError(
                f"Spark Connect server not listening on {port} after {START_TIMEOUT:.0f} s; "
                f"last lines of {log}:\n{log_tail(log)}"
            )
        time.sleep(0.25)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """Stop the whole process group: spark-submit is a shell script that starts the JVM, and the
    JVM starts Python workers; a signal to the script alone would leave them running."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=STOP_TIMEOUT)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


@contextlib.contextmanager
def connect_server(workdir: Path, port: int | None = None, tz: str | None = None) -> Iterator[str]:
    """Run a Spark Connect server with Delta for the block; yields its URL, the value a client
    takes as `SPARK_REMOTE` or `SparkSession.builder.remote(url)`.

    `tz` is the server's time zone (`TZ`: the JVM's default zone and its Python workers').
    Its log is `workdir/connect-server.log`, its warehouse `workdir/warehouse`. Raises
    RuntimeError, with the log's tail, if the server dies or does not listen within
    `START_TIMEOUT`.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    port = free_port() if port is None else port
    log = workdir / "connect-server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            server_command(workdir, port),
            env={**server_env(), **({"TZ": tz} if tz else {})},
            cwd=workdir,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            # Its own process group, so `_stop` reaches the JVM and its Python workers too.
            start_new_session=True,
        )
    try:
        _wait_until_listening(process, port, log)
        yield f"sc://127.0.0.1:{port}"
    finally:
        _stop(process)


# ---------------------------------------------------------------------------------------------
# binlake as the server's client


def run_remote(remote: tuple[str, Path], config_file: Path, *args: str) -> str:
    """`binlake ARGS` as a Spark Connect client; its output (stdout and stderr)."""
    run = subprocess.run(
        client_command(config_file, *args), env=client_env(remote), capture_output=True, text=True,
        cwd=ROOT, timeout=600,
    )  # fmt: skip
    output = run.stdout + run.stderr
    assert run.returncode == 0, f"{output[-3000:]}{server_log(remote)}"
    return output


def client_command(config_file: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "binlake", *args, "--config", str(config_file)]


def client_env(remote: tuple[str, Path]) -> dict[str, str]:
    return {**subprocess_env(), "SPARK_REMOTE": remote[0], "TZ": REMOTE_TZ}


def server_log(remote: tuple[str, Path]) -> str:
    return "\n--- server log ---\n" + "\n".join(log_tail(p) for p in remote[1].glob("*.log"))
