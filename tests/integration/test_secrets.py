"""The source password never leaks: not into output or logs (debug included), exception
messages, files under the lake root, the Spark conf, or the job parameters the bundle renders.

A throwaway user on the shared server holds a unique, searchable password; binlake runs through
the CLI as a subprocess with `-v` and in-process, succeeding (snapshot, then stream
available-now) and failing (a wrong database, a missing table). Everything they leave behind is
searched for the password, its base64 (at each byte alignment) and its hex form.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from binlake.bundle.definition import load_bundle
from binlake.bundle.tasks import task_arguments
from binlake.errors import BinlakeError
from binlake.jobs import commands

from .accounts import MINIMAL
from .assertions import assert_no_leak
from .replay import subprocess_env

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
SECRET_ENV = "BINLAKE_TEST_SECRET"


def _cli(args: list[str], config_file: Path, password: str) -> subprocess.CompletedProcess[str]:
    env = {**subprocess_env(), SECRET_ENV: password}
    env.pop("BINLAKE_SOURCE_PASSWORD", None)
    return subprocess.run(
        [sys.executable, "-m", "binlake", "-v", *args, "--config", str(config_file)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_password_appears_nowhere(
    spark: Any,
    sql: Any,
    account: Callable[..., Any],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    caplog.set_level(logging.DEBUG)
    sql("CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(20))")
    sql("INSERT INTO t VALUES " + ", ".join(f"({n}, 'v{n}')" for n in range(150)))
    config = account(*MINIMAL)  # inline password, for the in-process runs
    password = config.source.password.get_secret_value()
    assert password.startswith("pw-")

    # The CLI reads it from the environment, as a deployed job does.
    raw = config.model_dump(mode="json", exclude_none=True)
    raw["source"].update(password_env=SECRET_ENV)
    raw["source"].pop("password", None)
    raw["lake"]["root"] = str(tmp_path / "cli-lake")
    raw["stream"] = {"trigger_interval": "1s"}
    config_file = tmp_path / "binlake.yml"
    config_file.write_text(yaml.safe_dump(raw))
    assert_no_leak(password, "the config file", config_file.read_bytes())

    runs = {
        "snapshot": (["snapshot"], 0),
        "stream": (["stream", "--available-now"], 0),
        "wrong database": (["snapshot", "--set", "source.database=no_such_db_zz"], None),
        "missing table": (["stream", "--set", "source.tables=[t, nowhere]"], None),
    }
    for name, (args, expected) in runs.items():
        if name == "stream":
            sql("UPDATE t SET v = 'changed' WHERE id < 10")
        done = _cli(args, config_file, password)
        output = done.stdout + done.stderr
        if expected is None:
            assert done.returncode != 0, f"{name} succeeded:\n{output[-3000:]}"
        else:
            assert done.returncode == expected, f"{name} failed:\n{output[-3000:]}"
            assert " DEBUG " in done.stderr, f"{name}: no debug logging captured"
        assert_no_leak(password, f"the output of `binlake {' '.join(args)}`", output)

    # In-process, with the password inline (a SecretStr) in the config object.
    commands.snapshot(spark, config)
    sql("DELETE FROM t WHERE id >= 140")
    commands.stream(spark, config, available_now=True)
    failures: list[BaseException] = []
    for sections in ({"database": "no_such_db_zz"}, {"tables": ["t", "nowhere"]}):
        failing = config.model_copy(update={"source": config.source.model_copy(update=sections)})
        with pytest.raises(BinlakeError) as raised:
            commands.snapshot(spark, failing)
        failures.append(raised.value)
    for failure in failures:
        text = "".join(traceback.format_exception(failure))
        assert_no_leak(password, "an exception", f"{failure!s} {failure!r} {text}")
    assert_no_leak(password, "the config's repr", f"{config!r} {config.model_dump()}")

    captured = capfd.readouterr()
    assert_no_leak(password, "in-process output", captured.out + captured.err)
    assert_no_leak(password, "in-process logging", caplog.text)
    assert caplog.records, "no logging captured"

    for root in (Path(config.lake.root), tmp_path / "cli-lake"):
        files = [p for p in root.rglob("*") if p.is_file()]
        assert any("_delta_log" in p.parts for p in files)
        assert any("checkpoints" in p.parts for p in files)
        for path in files:
            assert_no_leak(password, str(path), path.read_bytes())

    conf = spark.sparkContext.getConf().getAll()
    assert_no_leak(password, "the SparkContext conf", repr(conf))
    assert_no_leak(password, "the session conf", repr(spark.conf.getAll))

    # A deployed job's password comes from the secret scope; with it in the environment too,
    # no rendered job setting or task argument may carry it.
    monkeypatch.setenv("BINLAKE_SOURCE_PASSWORD", password)
    monkeypatch.setenv(SECRET_ENV, password)
    options: dict[str, dict[str, Any]] = {
        "local": {},
        "dev": {},
        "prod": {"environ": {"BUNDLE_VAR_prod_service_principal": "00000000-0000-0000-0000-1"}},
    }
    for target in ("local", "dev", "prod"):
        bundle = load_bundle(ROOT, target, **options[target])
        for job in bundle.jobs.values():
            rendered = [repr(job.settings.as_dict())]
            rendered += [" ".join(task_arguments(job, task)) for task in job.settings.tasks or []]
            assert_no_leak(password, f"bundle job {job.key} ({target})", "\n".join(rendered))
    assert os.environ["BINLAKE_SOURCE_PASSWORD"] == password
