"""The one Spark session factory: local mode with Delta configured, a Spark Connect session, or
the runtime's session.

`main()` of each entry point is the only caller; everything else receives the session as a
parameter. On Databricks the runtime already has a session with Delta, which `get_or_create`
returns unchanged: a classic one on a dedicated cluster, a Spark Connect one on serverless and
standard access mode. `SPARK_REMOTE` (PySpark's own variable) selects Spark Connect elsewhere.
Job code runs on both kinds, so it uses DataFrames and SQL only (`is_connect`).
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shlex
import sys
import threading
from collections.abc import Iterator, Sequence
from importlib.metadata import version
from pathlib import Path

from pyspark.sql import SparkSession

from binlake.runtime.static_settings import compute_settings

log = logging.getLogger(__name__)


def ivy_dir() -> str:
    """Where Spark's package resolution caches Delta's jars, one folder per Delta release (a
    local session loads every jar of it, so an LTS Spark's Delta must not share it): under
    `BINLAKE_IVY_DIR` (the Makefile's `.cache/ivy`), else the checkout's `.cache/ivy` when binlake
    runs from its source tree, else a cache in the user's home: an installed wheel has no tree,
    and its site-packages may not be writable."""
    base = os.environ.get("BINLAKE_IVY_DIR")
    checkout = Path(__file__).resolve().parents[3]
    if base is None and (checkout / "pyproject.toml").is_file():
        base = str(checkout / ".cache" / "ivy")
    elif base is None:
        base = str(Path.home() / ".cache" / "binlake" / "ivy")
    return str(Path(base, f"delta-{version('delta-spark')}"))


def local_session(
    app_name: str = "binlake",
    cores: int | None = None,
    extra_jars: Sequence[str] = (),
    quiet: bool = False,
    warehouse_dir: str | None = None,
) -> SparkSession:
    """A tuned local session: few shuffle partitions, UI off, UTC, Delta from Maven Central.

    Delta's jars are resolved by Spark's package resolution into `BINLAKE_IVY_DIR` (the Makefile
    points it at `.cache/ivy`), so the second start needs no network. `extra_jars` (local paths)
    join the classpath, e.g. a JDBC driver for the benchmark's baseline. `quiet` keeps the JVM's
    start-up banners off the terminal (`without_jvm_banners`). `warehouse_dir` is where the
    session catalog (`spark_catalog`) keeps managed tables (Spark's default: `./spark-warehouse`);
    a static setting, so it is fixed when the session starts.
    """
    master = f"local[{cores}]" if cores else "local[*]"
    builder = with_delta(SparkSession.builder.master(master).appName(app_name), extra_jars)
    if warehouse_dir is not None:
        builder = builder.config("spark.sql.warehouse.dir", warehouse_dir)
    with without_jvm_banners() if quiet else contextlib.nullcontext():
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def local_tuning() -> dict[str, str]:
    """Delta's extension and the settings that make a 2-core local Spark fast at binlake's
    many small Delta commits: few shuffle and snapshot partitions (Delta's default of 50
    snapshot partitions makes every log replay 50 tasks), reused Python workers, UI off, UTC,
    and `compute_settings`. For a local session, and for a Spark Connect server started outside
    binlake (tests)."""
    return {
        **compute_settings(),
        "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
        "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
        "spark.sql.shuffle.partitions": "4",
        "spark.default.parallelism": "4",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.driver.memory": os.environ.get("BINLAKE_DRIVER_MEMORY", "4g"),
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.python.worker.reuse": "true",
        "spark.databricks.delta.snapshotPartitions": "2",
        "spark.databricks.delta.properties.defaults.enableChangeDataFeed": "false",
        "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
    }


def with_delta(
    builder: SparkSession.Builder, extra_jars: Sequence[str] = ()
) -> SparkSession.Builder:
    """`builder` with Delta's jars and extension and binlake's local tuning: for a local
    session, and for the Spark Connect server `SPARK_REMOTE=local` starts."""
    from delta import configure_spark_with_delta_pip

    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers must run the interpreter that has binlake installed.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    ivy = ivy_dir()
    for name, value in {**local_tuning(), "spark.jars.ivy": ivy}.items():
        builder = builder.config(name, value)
    for name, value in class_archive_conf().items():
        builder = builder.config(name, value)
    cached = sorted(str(jar) for jar in Path(ivy, "jars").glob("*.jar"))
    if any(Path(jar).name.startswith("io.delta_delta-spark") for jar in cached):
        # Resolved before (make setup): load the cached jars, skipping Ivy's resolution report.
        return builder.config("spark.jars", ",".join([*cached, *extra_jars]))
    if extra_jars:
        builder = builder.config("spark.jars", ",".join(extra_jars))
    return configure_spark_with_delta_pip(builder)


def class_archive() -> Path:
    """The class-data archive a local session's JVM starts from, beside the Delta jars it was
    written with (`write_class_archive`).

    A local JVM spends most of its start loading and verifying Spark's and Delta's classes; mapped
    from the archive, they cost about a third less (docs/performance.md#measured-constants), which
    every `binlake` command run locally pays once. The JVM checks the archive against its own
    version and class path and ignores one that does not match, so a stale archive costs only the
    time saved.
    """
    return Path(ivy_dir(), "classes.jsa")


def class_archive_conf() -> dict[str, str]:
    """The driver's JVM options that map `class_archive()` once it is written; none before."""
    archive = class_archive()
    if not archive.is_file():
        return {}
    return {"spark.driver.extraJavaOptions": mapping_options(archive)}


def mapping_options(archive: Path) -> str:
    """JVM options that map `archive`, with the JVM's own check of it kept quiet: an archive
    it cannot use is not an error."""
    return f"-XX:SharedArchiveFile={shlex.quote(str(archive))} -Xlog:cds=off -Xlog:cds+dynamic=off"


def write_class_archive() -> Path:
    """Write `class_archive()`: a local session whose JVM records every class it loads while it
    does what binlake's jobs do, in small (`_first_steps`), and writes them out when it exits.
    `make setup` runs it once, after Delta's jars are cached
    (the archive holds the class path it was written with); it must run in a process that has
    not started a JVM yet, as `python -m binlake.runtime.spark --class-archive` does."""
    import tempfile

    archive = class_archive()
    written = archive.with_suffix(".jsa.tmp")
    written.unlink(missing_ok=True)
    builder = with_delta(SparkSession.builder.master("local[1]").appName("binlake-setup"))
    option = f"-XX:ArchiveClassesAtExit={shlex.quote(str(written))} -Xlog:cds=off"
    with without_jvm_banners():
        spark = builder.config("spark.driver.extraJavaOptions", option).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    with tempfile.TemporaryDirectory() as lake:
        _first_steps(spark, lake)
    _stop_and_wait_for_jvm(spark)
    os.replace(written, archive)
    return archive


def _first_steps(spark: SparkSession, lake: str) -> None:
    """What binlake's jobs make a JVM load, in small: Arrow batches through a Python worker
    (the chunk reads), a Delta write, a MERGE and a change-feed read (silver), and an
    available-now stream between Delta tables (the stream's query and checkpoint)."""
    rows = (
        spark.range(100)
        .selectExpr("id", "'x' AS v")
        .mapInArrow(lambda batches: batches, "id long, v string")
    )
    rows.write.format("delta").save(f"{lake}/t")
    table = f"delta.`{lake}/t`"
    spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES (delta.enableChangeDataFeed = true)")
    spark.range(50, 150).selectExpr("id", "'y' AS v").createOrReplaceTempView("changes")
    spark.sql(
        f"MERGE INTO {table} t USING changes c ON t.id = c.id "
        "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *"
    )
    feed = spark.read.format("delta").option("readChangeFeed", "true")
    feed.option("startingVersion", 1).load(f"{lake}/t").groupBy("_change_type").count().collect()
    stream = spark.readStream.format("delta").load(f"{lake}/t").writeStream.format("delta")
    stream = stream.option("checkpointLocation", f"{lake}/checkpoint").trigger(availableNow=True)
    stream.start(f"{lake}/copy").awaitTermination()


def _stop_and_wait_for_jvm(spark: SparkSession) -> None:
    """Stop `spark` and wait until its JVM has exited: the JVM writes a class archive on its
    way out, and exits by itself once its stdin (PySpark's lifeline to it) closes."""
    from pyspark import SparkContext

    spark.stop()
    jvm = SparkContext._gateway.proc  # type: ignore[union-attr]
    jvm.stdin.close()
    jvm.wait(timeout=300)


#: Delta copies a MERGE's source before it runs (`merge.materializeSource: auto`) unless it can
#: prove the source deterministic: a MERGE reads its source twice (once to find the files that
#: hold a match, once to write), and a source that changed in between could insert a key twice.
#: It proves that only for Delta scans and local rows, so it copied every batch binlake merges, a
#: large share of a large batch's MERGE (docs/performance.md#measured-constants). binlake's stream
#: proves it instead: a batch's changes are those of a binlog range fixed in the query's offset log
#: before the batch runs, decoded alike on every read, and each key's last change is taken by its
#: offset, unique per row change, so reading the source again yields the same rows. (A binlog purged
#: in between fails the read; it never yields other rows.) Its sources are cached (the batch's typed
#: changes, or each key's last of them), so the second read costs less than the copy; its other
#: MERGE sources are bronze (a Delta scan) and single literal rows. Delta also refuses a cached
#: source it did not copy, since a cache does not pin the version of a Delta table read in it: no
#: Delta table is read in a batch's.
DETERMINISTIC_MERGE_SOURCES = {
    "spark.databricks.delta.merge.materializeSource": "none",
    "spark.databricks.delta.merge.failSourceCachedAfterMaterialization": "false",
}


#: IN lists Spark evaluates against a set it passes to the generated code by reference, rather
#: than as values written into the code (`spark.sql.optimizer.inSetConversionThreshold`: a list
#: of up to 10 values is a chain of comparisons; `inSetSwitchThreshold`: a set of up to 400 ints
#: a `switch`). A small batch's MERGE names its keys as such a list (`silver.merge.TableApply`), and
#: Spark compiles the code of each plan again for every new set of values: 14 classes per
#: MERGE of new int keys here, 12 of them for the list. Held by reference, only Delta's
#: skipping filter (the list's least and greatest key) is compiled again. Delta's data
#: skipping reads IN lists and sets alike, so the MERGE still reads only the files holding
#: the keys.
KEY_SETS_BY_REFERENCE = {
    "spark.sql.optimizer.inSetConversionThreshold": "0",
    "spark.sql.optimizer.inSetSwitchThreshold": "0",
}


#: Spark compiles generated code for each plan it has not run before (whole-stage code, then
#: Janino and the JIT), which pays back once the plan reads many rows. A stream batch's plans
#: are mostly new (its MERGE names new keys), and where its tables are small the compile is most
#: of the batch: those batches run interpreted (`sink.settings_for`). Results are the
#: same either way: Spark's own test suites run both paths.
INTERPRETED_QUERIES = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}

#: Silver has deletion vectors on, so a MERGE marks the rows it changes deleted instead of
#: rewriting the files that hold them: on a large file, far less to write. It costs steps of
#: their own (the changed rows' indexes found, a vector written and committed per file; eight
#: more Spark queries per MERGE here). Rewriting a few MB of touched files is cheaper than those
#: steps, so a batch of few changes, or into small silver tables, rewrites (`sink.settings_for`);
#: the vectors already written stay valid, and readers see the same rows either way.
COPY_ON_WRITE_MERGES = {"spark.databricks.delta.merge.deletionVectors.persistent": "false"}


@contextlib.contextmanager
def session_settings(spark: SparkSession, settings: dict[str, str]) -> Iterator[None]:
    """`settings` in force on `spark` inside the block, each restored after (unset where it
    was). They go together or not at all: a compute that refuses one (serverless and standard
    access mode change only a few) keeps its own values for all, which saves no time but loses
    nothing; a part of them could (`DETERMINISTIC_MERGE_SOURCES` without its second setting
    fails every MERGE of a cached source)."""
    before: dict[str, str | None] = {}
    try:
        for key, value in settings.items():
            before[key] = spark.conf.get(key, None)
            spark.conf.set(key, value)
    except Exception as refused:  # the compute's own error class, whichever it is
        log.debug("session settings left as the compute has them: %s", str(refused).splitlines()[0])
        with contextlib.suppress(Exception):
            _restore(spark, before)
        before = {}
    try:
        yield
    finally:
        _restore(spark, before)


def _restore(spark: SparkSession, values: dict[str, str | None]) -> None:
    for key, value in values.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)


def is_connect(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect client (serverless, standard access mode,
    `SPARK_REMOTE`): it has no SparkContext, RDDs, accumulators or JVM in this process."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def task_slots(spark: SparkSession) -> int | None:
    """The Spark tasks that can run at once: a local session's threads (`local[N]`, `local[*]`:
    every core; its default parallelism is binlake's shuffle setting, not its threads), a
    cluster's default parallelism (its executors' cores, unless a job overrides
    `spark.default.parallelism`); None on Spark Connect, whose client cannot ask."""
    if is_connect(spark):
        return None
    context = spark.sparkContext
    threads = re.fullmatch(r"local\[(\d+|\*)(?:,\s*\d+)?\]|local", context.master or "")
    if threads is None:
        return int(context.defaultParallelism)
    count = threads.group(1)
    if count is None:  # plain `local`: one thread
        return 1
    return os.cpu_count() or 1 if count == "*" else int(count)


#: The oldest Spark binlake runs on: its binlog source is a Python streaming data source, which
#: Spark has from 4.0 (Databricks Runtime 17.3 LTS). Spark 4.0 and 4.1 give such a source no
#: read limits and no Trigger.AvailableNow of its own (4.2 does, SPARK-55304): the source and the
#: stream make up for both (`stream_source.BinlogStreamReader`, `stream._start_and_follow`).
MINIMUM_SPARK = (4, 0)
#: The newest Spark line binlake's tests run on (the project's venv; the oldest runs as the LTS
#: runtime's wheel test): a newer one runs, with a warning that it is untested.
NEWEST_TESTED_SPARK = (4, 2)


def check_spark_version() -> None:
    """Refuse an older Spark in one line instead of an ImportError deep in the stream source
    (a Databricks job cluster on a runtime before 17); warn of a Spark line newer than the tests
    run, whose Python data source or streaming APIs may have changed under binlake."""
    import pyspark

    from binlake.errors import ConfigError

    found = tuple(int(part) for part in re.findall(r"\d+", pyspark.__version__)[:2])
    if found > NEWEST_TESTED_SPARK:
        logging.getLogger("binlake").warning(
            "this runtime has Spark %s, newer than the Spark %s binlake is tested on: it "
            "should work, but nothing here has run on it (report what fails)",
            pyspark.__version__, ".".join(map(str, NEWEST_TESTED_SPARK)),
        )  # fmt: skip
    if found < MINIMUM_SPARK:
        raise ConfigError(
            f"binlake needs Spark {'.'.join(map(str, MINIMUM_SPARK))} or later (its binlog "
            "stream source is a Python streaming data source), this runtime has Spark "
            f"{pyspark.__version__}: on Databricks, run the job clusters on 17.3 LTS "
            "(17.3.x-scala2.13) or later"
        )


def get_or_create(
    app_name: str = "binlake", quiet: bool = True, warehouse_dir: str | None = None
) -> SparkSession:
    """The active session; on a Databricks runtime its own session (a wheel task may start
    before one is active, and a locally built one cannot get Delta's jars there); with
    `SPARK_REMOTE` set, a Spark Connect session; else a new local one, `quiet` and
    `warehouse_dir` as `local_session` takes them."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if os.environ.get("DATABRICKS_RUNTIME_VERSION"):
        return SparkSession.builder.getOrCreate()
    remote = os.environ.get("SPARK_REMOTE")
    if remote:
        return connect_session(remote, app_name)
    return local_session(app_name, quiet=quiet, warehouse_dir=warehouse_dir)


def connect_session(remote: str, app_name: str = "binlake") -> SparkSession:
    """A Spark Connect session to `remote` (PySpark's `SPARK_REMOTE`): `sc://host:port` is a
    running server, which brings its own Delta; `local[...]` starts one in this process, with
    Delta's jars as a local session has them."""
    builder = SparkSession.builder.remote(remote).appName(app_name)
    if remote.startswith("local"):
        builder = with_delta(builder)
    return builder.getOrCreate()


#: Lines every local JVM start prints, which tell a binlake user nothing: the vector module
#: Spark always adds, Hadoop's missing native library, log4j's default-profile notice.
JVM_BANNERS = (
    b"WARNING: Using incubator modules",
    b"Using Spark's default log4j profile",
    b'Setting default log level to "WARN"',
    b"To adjust logging level use sc.setLogLevel",
    b"WARN NativeCodeLoader",
)


@contextlib.contextmanager
def without_jvm_banners() -> Iterator[None]:
    """Start the JVM (inside the block) with its stderr going through a filter that drops
    `JVM_BANNERS` and forwards every other line, for as long as the JVM lives.

    The JVM inherits file descriptor 2 when PySpark launches it, so the filter is a pipe put in
    place of fd 2 for the launch only; the Python workers the JVM spawns write through it too,
    so their warnings and errors still reach the terminal.
    """
    read_end, write_end = os.pipe()
    terminal = os.dup(2)
    threading.Thread(
        target=_forward_lines, args=(read_end, terminal), name="jvm-stderr", daemon=True
    ).start()
    os.dup2(write_end, 2)
    os.close(write_end)
    try:
        yield
    finally:
        os.dup2(terminal, 2)


def _forward_lines(read_end: int, terminal: int) -> None:
    with os.fdopen(read_end, "rb") as lines:
        for line in lines:
            if not any(banner in line for banner in JVM_BANNERS):
                os.write(terminal, line)


if __name__ == "__main__":
    # `make setup` runs this once to resolve and cache Delta's jars, then with `--class-archive`
    # (in a new process: the archive holds the class path of a start with the jars cached).
    if sys.argv[1:] == ["--class-archive"]:
        print(f"JVM class archive written: {write_class_archive()}")
    else:
        spark = local_session("binlake-setup", cores=1)
        print(f"Spark {spark.version} with Delta ready (jars cached in {ivy_dir()})")
        spark.stop()
