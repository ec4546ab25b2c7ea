"""The JVM class archive `make setup` writes: a local start maps Spark's and Delta's classes from
it instead of loading them (a third of a local start), and a JVM that cannot use it starts as if
it were not there, saying nothing."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from binlake.runtime import spark as sessions

from .replay import subprocess_env

#: A local session doing one Delta write, as each `binlake` command's first step does.
FIRST_WRITE = """
import tempfile
from binlake.runtime.spark import local_session
spark = local_session(cores=1, quiet=True)
spark.range(10).write.format("delta").save(tempfile.mkdtemp() + "/t")
"""


def test_a_local_start_maps_the_classes_from_the_archive_setup_wrote(tmp_path: Path) -> None:
    archive = sessions.class_archive()
    assert archive.is_file(), f"no class archive at {archive}: run `make setup`"
    log = tmp_path / "classes-%p.log"  # one per JVM: PySpark's launcher starts one first
    env = {**subprocess_env(), "JAVA_TOOL_OPTIONS": f"-Xlog:class+load=info:file={log}"}
    started = subprocess.run(
        [sys.executable, "-c", FIRST_WRITE], env=env, capture_output=True, text=True, timeout=300
    )
    assert started.returncode == 0, started.stderr[-3000:]
    driver = max(tmp_path.glob("classes-*.log"), key=lambda path: path.stat().st_size)
    loaded = [
        line.split("] ", 3)[-1].split(" source: ") for line in driver.read_text().splitlines()
    ]
    mapped = [name for name, source in loaded if source.startswith("shared objects file (top)")]
    # Most of what the first write loads comes from the archive, Spark's and Delta's classes too.
    assert len(mapped) > len(loaded) / 2, (len(mapped), len(loaded))
    assert sum(name.startswith("org.apache.spark.sql.") for name in mapped) > 1000
    assert any(name.startswith("org.apache.spark.sql.delta.") for name in mapped)


def test_a_jvm_given_an_archive_it_cannot_use_starts_without_a_word(tmp_path: Path) -> None:
    """A stale archive (another Java, other jars) or a damaged one costs the time it would have
    saved and nothing else: no error, no warning on the terminal."""
    damaged = tmp_path / "classes.jsa"
    damaged.write_bytes(b"not an archive" * 1000)
    java = shutil.which("java")
    assert java is not None
    options = shlex.split(sessions.mapping_options(damaged))
    started = subprocess.run(
        [java, *options, "-version"], capture_output=True, text=True, timeout=60
    )
    assert started.returncode == 0, started.stderr
    assert "archive" not in (started.stdout + started.stderr).lower(), started.stderr


def test_the_option_names_the_archive_once_it_exists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BINLAKE_IVY_DIR", str(tmp_path / "a cache with spaces"))
    assert sessions.class_archive_conf() == {}
    sessions.class_archive().parent.mkdir(parents=True)
    sessions.class_archive().write_bytes(b"")
    options = sessions.class_archive_conf()["spark.driver.extraJavaOptions"]
    assert f"-XX:SharedArchiveFile='{sessions.class_archive()}'" in options
