"""A stop that a retry cannot fix pauses the Databricks job running binlake (`--job-id`), so a
continuous job is not restarted forever; a failure a retry can fix leaves the job alone. The
Jobs API is `workspace_api`'s, on loopback, reached by the real `databricks-sdk` client."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from binlake.jobs import cli

from .items import logged_events
from .workspace_api import JOB_ID, TOKEN, Workspace


def _config_file(make_config: Callable[..., Any], tmp_path: Path) -> Path:
    path = tmp_path / "binlake.yml"
    path.write_text(yaml.safe_dump(make_config().model_dump(mode="json", exclude_none=True)))
    return path


def test_a_stream_stopped_by_an_unfinished_snapshot_pauses_its_continuous_job(
    spark: Any,
    workspace_api: Workspace,
    make_config: Callable[..., Any],
    sql: Callable[..., Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    sql("CREATE TABLE items (id INT PRIMARY KEY, label VARCHAR(20))")
    continuous = {"pause_status": "UNPAUSED", "task_retry_mode": "ON_FAILURE"}
    api = workspace_api
    api.job_settings = {"name": "binlake silver stream", "continuous": continuous}
    recorded = make_config(lake={"event_log": True})
    config = _config_file(lambda: recorded, tmp_path)

    code = cli.main(["stream", "--config", str(config), f"--job-id={JOB_ID}", "--available-now"])

    lines = capsys.readouterr().err.splitlines()
    assert code == 8, lines
    assert api.updates == [
        {
            "job_id": JOB_ID,
            "new_settings": {
                "continuous": {"pause_status": "PAUSED", "task_retry_mode": "ON_FAILURE"}
            },
        }
    ]
    assert any(f"paused job {JOB_ID} (continuous)" in m for m in caplog.messages), caplog.messages
    assert lines[-1].startswith("binlake: error: ") and "snapshot" in lines[-1], lines
    assert TOKEN not in "\n".join(lines)
    # The event log says so, before the stop that caused it.
    (paused,) = logged_events(spark, recorded, "job_paused")
    (stopped,) = logged_events(spark, recorded, "error")
    assert f"paused job {JOB_ID} (continuous)" in paused.message and paused.job == "silver"
    assert paused.ts <= stopped.ts and "snapshot" in stopped.message


def test_a_scheduled_job_is_paused_with_its_schedule_kept_and_an_already_paused_one_is_left(
    workspace_api: Workspace,
    make_config: Callable[..., Any],
    tmp_path: Path,
) -> None:
    schedule = {"quartz_cron_expression": "0 0/15 * * * ?", "timezone_id": "UTC"}
    api = workspace_api
    api.job_settings = {"schedule": {**schedule, "pause_status": "UNPAUSED"}}
    config = _config_file(make_config, tmp_path)
    wrong = ["--set", "snapshot.parallelism=0"]  # a setting no retry fixes: exit 2

    assert cli.main(["run", "--config", str(config), f"--job-id={JOB_ID}", *wrong]) == 2
    assert api.updates == [
        {"job_id": JOB_ID, "new_settings": {"schedule": {**schedule, "pause_status": "PAUSED"}}}
    ]

    api.job_settings = {"schedule": {**schedule, "pause_status": "PAUSED"}}
    assert cli.main(["run", "--config", str(config), f"--job-id={JOB_ID}", *wrong]) == 2
    assert len(api.updates) == 1


def test_a_failure_a_retry_can_fix_leaves_the_job_running(
    workspace_api: Workspace,
    make_config: Callable[..., Any],
    tmp_path: Path,
) -> None:
    api = workspace_api
    api.job_settings = {"continuous": {"pause_status": "UNPAUSED"}}
    config = _config_file(make_config, tmp_path)
    down = ["--set", "source.port=1", "--set", "source.reconnect_timeout_s=0"]

    assert cli.main(["stream", "--config", str(config), f"--job-id={JOB_ID}", *down]) == 3
    assert api.updates == []


def test_a_job_its_run_may_not_manage_keeps_running_and_the_stop_is_reported_as_it_was(
    workspace_api: Workspace,
    make_config: Callable[..., Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = workspace_api
    api.job_settings = {"continuous": {"pause_status": "UNPAUSED"}}
    api.may_manage_job = False
    config = _config_file(make_config, tmp_path)

    code = cli.main(
        ["run", "--config", str(config), f"--job-id={JOB_ID}", "--set", "snapshot.parallelism=0"]
    )

    lines = capsys.readouterr().err.splitlines()
    assert code == 2
    assert api.updates == []
    warning = next(m for m in caplog.messages if f"could not pause job {JOB_ID}" in m)
    assert "Manage permissions" in warning
    assert lines[-1].startswith("binlake: error: ") and "parallelism" in lines[-1], lines
