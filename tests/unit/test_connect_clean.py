"""No job path needs what a Spark Connect client lacks (Databricks serverless and standard
access mode): a SparkContext, RDDs, accumulators, the py4j gateway, or delta-spark's
`DeltaTable` (which needs a server plugin there). Only the classic-session pieces may: the
local session factory and the Hadoop file access a classic driver uses (`driver_files` picks
`ArrowFiles` on Spark Connect). `test_spark_connect` runs the jobs through a real server."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "binlake"

CLASSIC_ONLY_ATTRIBUTES = {
    "sparkContext", "_jvm", "_jsc", "_jdf", "_jsparkSession", "rdd", "accumulator",
    "parallelize", "broadcast_variable",
}  # fmt: skip
CLASSIC_ONLY_MODULES = ("py4j", "pyspark.accumulators", "pyspark.rdd", "delta.tables")
CLASSIC_ONLY_NAMES = {"SparkContext", "DeltaTable", "Accumulator", "RDD"}
#: (module, top-level definition) allowed to use them: both run on classic sessions only.
ALLOWED = {
    ("runtime.spark", "local_session"),
    ("runtime.spark", "write_class_archive"),  # `make setup`'s local JVM, and waiting for its exit
    ("runtime.spark", "_stop_and_wait_for_jvm"),
    ("runtime.spark", "task_slots"),  # a classic session's task slots; None on Spark Connect
    ("runtime.interrupts", "quiet_interrupts"),  # PySpark's SIGINT handler, classic only
    ("lake.files", "HadoopFiles"),
    ("lake.files", "driver_files"),  # HadoopFiles on a classic session only
    ("lake.files", "<module>"),  # `from py4j.protocol import Py4JJavaError`, for HadoopFiles
}


def _uses(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in CLASSIC_ONLY_ATTRIBUTES:
            found.append(f".{node.attr}")
        elif isinstance(node, ast.Name) and node.id == "HadoopFiles":
            found.append(node.id)  # the driver's files go through `driver_files`
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.startswith(CLASSIC_ONLY_MODULES):
                found.append(f"from {node.module}")
            elif node.module.startswith("pyspark"):
                found += [a.name for a in node.names if a.name in CLASSIC_ONLY_NAMES]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith(CLASSIC_ONLY_MODULES)]
    return found


def _findings(path: Path) -> list[tuple[str, str, str]]:
    """(module, top-level definition or `<module>`, what it uses) in `path`."""
    module = path.relative_to(PACKAGE).with_suffix("").as_posix().replace("/", ".")
    findings = []
    for node in ast.parse(path.read_text()).body:
        where = getattr(node, "name", "<module>")
        findings += [(module, where, use) for use in _uses(node)]
    return findings


def test_no_job_module_reaches_for_the_jvm() -> None:
    found = [f for p in sorted(PACKAGE.rglob("*.py")) for f in _findings(p)]
    assert [f for f in found if f[:2] not in ALLOWED] == []


def test_the_check_sees_what_it_forbids(tmp_path: Path) -> None:
    """The scan is not vacuous: each forbidden use is found."""
    sample = (
        "from delta.tables import DeltaTable\n"
        "from pyspark import SparkContext\n"
        "import py4j.protocol\n"
        "def f(spark):\n"
        "    HadoopFiles(spark)\n"
        "    spark.sparkContext.parallelize([1]).collect()\n"
        "    return spark._jvm, spark._jsc, spark.sparkContext.accumulator(0)\n"
    )
    uses = sorted(use for node in ast.parse(sample).body for use in _uses(node))
    assert uses == sorted(
        [
            "from delta.tables", "SparkContext", "py4j.protocol", "HadoopFiles", ".sparkContext",
            ".parallelize", "._jvm", "._jsc", ".sparkContext", ".accumulator",
        ]
    )  # fmt: skip
    # And the allowed pieces do use them, so the allow-list is not stale.
    allowed = {f[:2] for p in sorted(PACKAGE.rglob("*.py")) for f in _findings(p)}
    assert allowed == ALLOWED
