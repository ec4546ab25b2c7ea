"""The wheel as a Databricks job cluster installs it: from PyPI wheels alone
(`pip install --only-binary=:all:`: no compiler, no MariaDB headers) into a fresh virtualenv, then
`binlake snapshot`, a continuous `binlake stream` and `binlake stream --available-now` run from
that virtualenv's console script against the shared MariaDB while writes race them, on the
project's Spark 4.2 and on the oldest runtime binlake supports (Spark 4.0 with Delta 4.0, as
Databricks Runtime 17.3 LTS has them; `make setup` installs it under `.cache/lts-runtime`).

The runtime's own layer is emulated: pyspark is published only as an sdist and a runtime never
installs it from PyPI, so the fresh virtualenv sees exactly one runtime's `pyspark`, `delta` and
`py4j` packages through a `.pth` file, and nothing else of the project's virtualenv (no MySQLdb:
the snapshot must read through the PyMySQL fallback, and say so).

On Spark 4.0 and 4.1 a Python stream source gets neither its batch's start nor a read limit, and
Trigger.AvailableNow runs it as a single batch: the stream keeps its own position, bounds each
batch by `stream.max_bytes_per_batch` itself, and runs a catch-up as several queries. A small
batch bound makes both paths take several batches here.
"""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import subprocess
import sys
import time
import venv
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml
from chispa import assert_df_equality

from .replay import Writers, connect, subprocess_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
#: What a Databricks runtime brings that the wheel does not list (with their dist-info, which
#: Delta's jar resolution reads its own version from).
RUNTIME_PACKAGES = ("pyspark", "delta", "py4j")
RUNTIME_DISTRIBUTIONS = ("pyspark", "delta_spark", "py4j")
#: Each runtime's site-packages: the project's (Spark 4.2), and the LTS layer `make setup` made.
LTS_RUNTIME = ROOT / ".cache" / "lts-runtime"
RUNTIMES = {"4.2": None, "4.0": LTS_RUNTIME}
#: Where the continuous stream and `binlake verify` run here too, the end-to-end check on the
#: oldest line: only Spark 4.0/4.1 keep the stream's position in the source itself (the other
#: tests run Spark 4.2's continuous stream and verify at length).
CONTINUOUS = {"4.0"}
#: Binlog bytes per stream batch: small, so the backlog takes several.
BATCH_BYTES = 256 * 1024
#: What the stream logs for each batch that applied changes.
BATCH_LOGGED = "stream batch "
COLUMNS = "id, label, amount, placed, shipped, qty, paid, token, note"
TABLE = """CREATE TABLE orders (
  id INT PRIMARY KEY, label VARCHAR(40) NOT NULL, amount DECIMAL(12, 3), placed DATETIME(6),
  shipped DATE, qty BIGINT UNSIGNED, paid BIT(1), token VARBINARY(16), note JSON
)"""
ROW = "(%s, %s, %s, %s, %s, %s, %s, %s, %s)"


def _run(command: list[str], timeout: float, **options: Any) -> subprocess.CompletedProcess[str]:
    """Run `command`; a failure shows its output's tail rather than just its exit code."""
    done = subprocess.run(
        command, capture_output=True, text=True, timeout=timeout, check=False, **options
    )
    assert done.returncode == 0, (
        f"{' '.join(command[:3])}... exited {done.returncode}:\n"
        f"{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    )
    return done


def _build_wheel(work: Path) -> Path:
    """The wheel of the working tree, built from a copy so that the tree gains no build/."""
    tree = work / "tree"
    shutil.copytree(
        ROOT / "src", tree / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info")
    )
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    dist = work / "dist"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(tree)], 300)
    (wheel,) = dist.glob("binlake-*.whl")
    return wheel


def _site_packages(python: Path) -> Path:
    out = _run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], 60)
    return Path(out.stdout.strip())


def _use_runtime(fresh_python: Path, site: Path, layer: Path) -> None:
    """Expose exactly `site`'s `RUNTIME_PACKAGES` to the fresh virtualenv (replacing any other
    runtime's)."""
    layer.mkdir(exist_ok=True)
    names = [*RUNTIME_PACKAGES]
    for distribution in RUNTIME_DISTRIBUTIONS:
        names += [p.name for p in site.glob(f"{distribution}-*.dist-info")]
    for name in names:
        (layer / name).symlink_to(site / name, target_is_directory=True)
    (_site_packages(fresh_python) / "databricks_runtime.pth").write_text(f"{layer}\n")


@pytest.fixture(scope="module")
def fresh_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtualenv holding the wheel, installed from PyPI wheels only; its bin directory.
    Each test gives it one runtime (`_use_runtime`)."""
    work = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(work)
    venv.EnvBuilder(with_pip=True).create(work / "venv")
    bin_dir = work / "venv" / "bin"
    install = ["-m", "pip", "install", "-q", "--disable-pip-version-check", "--only-binary=:all:"]
    _run([str(bin_dir / "python"), *install, str(wheel)], 600)
    return bin_dir


def _probe(bin_dir: Path) -> dict[str, str | None]:
    """Where the fresh interpreter finds binlake, the runtime layer and MySQLdb (None: nowhere)."""
    script = (
        "import importlib.util, json, sys, pyspark\n"
        "specs = {n: importlib.util.find_spec(n) for n in sys.argv[1:]}\n"
        "found = {n: s.origin if s else None for n, s in specs.items()}\n"
        "print(json.dumps({**found, 'spark': pyspark.__version__}))"
    )
    names = ["binlake", "MySQLdb", *RUNTIME_PACKAGES]
    probe = _run([str(bin_dir / "python"), "-c", script, *names], 60, env=_env(bin_dir))
    return dict(json.loads(probe.stdout))


def _env(bin_dir: Path) -> dict[str, str]:
    env = {**subprocess_env(), "PYSPARK_PYTHON": str(bin_dir / "python")}
    env["PATH"] = f"{bin_dir}:{env['PATH']}"
    for name in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV"):
        env.pop(name, None)
    return env


def _order(i: int, rng: random.Random) -> tuple[Any, ...]:
    placed = f"2024-0{rng.randint(1, 9)}-1{rng.randint(0, 9)} 12:34:56.{rng.randint(0, 999999):06d}"
    return (
        i, f"order {i}", Decimal(rng.randint(-10**6, 10**6)) / 1000, placed, placed[:10],
        rng.choice([0, 2**64 - 1, rng.randint(0, 2**63)]), rng.randint(0, 1),
        rng.randbytes(rng.randint(0, 16)), json.dumps({"i": i, "tags": ["é", None]}),
    )  # fmt: skip


def _change(cur: Any, rng: random.Random) -> None:
    """One random write: a new order, an update of one, or a delete."""
    i = rng.randint(1, 400)
    action = rng.random()
    if action < 0.4:
        cur.execute(f"REPLACE INTO orders ({COLUMNS}) VALUES {ROW}", _order(i, rng))
    elif action < 0.8:
        cur.execute("UPDATE orders SET amount = amount + 1, paid = 1 - paid WHERE id = %s", (i,))
    else:
        cur.execute("DELETE FROM orders WHERE id = %s", (i,))


def _source_frame(spark: Any, sql: Callable[..., Any], schema: Any) -> Any:
    """The source's rows in silver's types (BIT(1) is a flag, BIGINT UNSIGNED a decimal)."""
    rows = [
        (i, label, amount, placed, shipped, None if qty is None else Decimal(qty),
         None if paid is None else paid == b"\x01", token, note)
        for i, label, amount, placed, shipped, qty, paid, token, note in sql(
            f"SELECT {COLUMNS} FROM orders"
        )
    ]  # fmt: skip
    return spark.createDataFrame(rows, schema)


@contextlib.contextmanager
def _streaming(command: list[str], log: Path, options: dict[str, Any]) -> Iterator[None]:
    """A continuous `binlake stream` (`command`), its output in `log`, stopped on exit."""
    with log.open("w") as output:
        stream = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, **options)
    try:
        yield
        assert stream.poll() is None, log.read_text()[-3000:]
    finally:
        stream.terminate()
        stream.wait(timeout=60)


def _wait_for_batches(log: Path, batches: int, timeout: float = 240.0) -> None:
    """Until the stream has logged `batches` batches that applied changes."""
    deadline = time.monotonic() + timeout
    while log.read_text().count(BATCH_LOGGED) < batches:
        assert time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(1)


@pytest.mark.parametrize(
    "spark_version",
    # Spark 4.2 is the runtime every other test runs on: its wheel-only install is a soak run.
    [pytest.param("4.2", marks=pytest.mark.soak), "4.0"],
)
def test_the_wheel_installs_from_wheels_alone_and_snapshots_and_streams(
    spark_version: str,
    fresh_venv: Path,
    spark: Any,
    db_env: dict[str, str],
    database: str,
    sql: Callable[..., Any],
    make_config: Callable[..., Any],
    tmp_path: Path,
) -> None:
    site = RUNTIMES[spark_version] or _site_packages(Path(sys.executable))
    assert site.is_dir(), f"no runtime at {site}: run `make setup`"
    layer = tmp_path / "runtime"
    _use_runtime(fresh_venv / "python", site, layer)
    found = _probe(fresh_venv)
    assert str(found["spark"]).startswith(f"{spark_version}."), found
    assert found["MySQLdb"] is None, f"the fresh virtualenv imports MySQLdb from {found['MySQLdb']}"
    assert str(fresh_venv.parent) in str(found["binlake"]), f"binlake from {found['binlake']}"
    assert all(str(layer) in str(found[p]) for p in RUNTIME_PACKAGES), found

    sql(TABLE)
    rng = random.Random(7)
    sql(f"INSERT INTO orders ({COLUMNS}) VALUES " + ", ".join([ROW] * 300),
        [v for i in range(1, 301) for v in _order(i, rng)])  # fmt: skip
    config = make_config(
        snapshot={"chunk_size": 40},
        stream={"trigger_interval": "1s", "max_bytes_per_batch": BATCH_BYTES},
    )
    raw = config.model_dump(mode="json", exclude_none=True)
    raw["source"].pop("password", None)  # dumped masked; the child reads password_env
    config_file = tmp_path / "binlake.yml"
    config_file.write_text(yaml.safe_dump(raw))
    binlake = [str(fresh_venv / "binlake")]
    options = {"cwd": tmp_path, "env": _env(fresh_venv)}

    # Writing until the snapshot ends (at most 2 × 600 writes), so writes race its chunks.
    with Writers(db_env, database, _change, threads=2, max_ops=600, pause_s=0.05) as writers:
        snapshot = _run([*binlake, "snapshot", "--config", str(config_file)], 300, **options)
    assert writers.ops > 0
    assert "snapshot reader: PyMySQL" in snapshot.stderr, snapshot.stderr[-3000:]

    if spark_version in CONTINUOUS:  # the continuous stream, writes racing it, for two batches
        log = tmp_path / "stream.log"
        streaming = _streaming([*binlake, "stream", "--config", str(config_file)], log, options)
        with Writers(db_env, database, _change, threads=2, max_ops=600, pause_s=0.05), streaming:
            _wait_for_batches(log, 2)

    if spark_version in CONTINUOUS:  # the rest of the suite runs this on 4.2, in-process
        _drain_a_backlog_with_a_migration(binlake, config_file, options, db_env, database, rng)
    else:  # the stream from the wheel: the catch-up of what raced the snapshot
        _run([*binlake, "stream", "--available-now", "--config", str(config_file)], 300, **options)
    silver = spark.read.format("delta").load(config.lake.path("silver", database, "orders"))
    actual = silver.select(*COLUMNS.split(", "))
    expected = _source_frame(spark, sql, actual.schema)
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)
    if spark_version in CONTINUOUS:
        ratings = silver.select("id", "rating")
        expected = spark.createDataFrame(sql("SELECT id, rating FROM orders"), ratings.schema)
        assert_df_equality(ratings, expected, ignore_row_order=True, ignore_nullable=True)
        verify = _run([*binlake, "verify", "--config", str(config_file)], 300, **options)
        assert "identical" in verify.stdout and "differ" not in verify.stdout, verify.stdout


def _drain_a_backlog_with_a_migration(
    binlake: list[str],
    config_file: Path,
    options: dict[str, Any],
    db_env: dict[str, str],
    database: str,
    rng: random.Random,
) -> None:
    """A backlog of several batches' worth with a schema change inside, then the catch-up."""
    with connect(db_env, database) as conn, conn.cursor() as cur:
        for step in range(600):
            _change(cur, rng)
            if step == 300:
                cur.execute("ALTER TABLE orders ADD COLUMN rating SMALLINT NULL")
                cur.execute("UPDATE orders SET rating = id % 7 WHERE id % 3 = 0")
    catch_up = _run(
        [*binlake, "stream", "--available-now", "--config", str(config_file)], 300, **options
    )
    assert catch_up.stderr.count(BATCH_LOGGED) >= 2, catch_up.stderr[-3000:]
