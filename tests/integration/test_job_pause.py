"""A stop that a retry cannot fix pauses the Databricks job running binlake (`--job-id`), so a
continuous job is not restarted forever; a failure a retry can fix leaves the job alone. The
Jobs API is a local HTTP server that answers as the workspace does and records each call: the
real `databricks-sdk` client talks to it over HTTP with the environment's credentials, as a job
run does on a workspace."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from binlake import cli

JOB_ID = 4242


class JobsApi:
    """One job's settings, served at `/api/2.2/jobs/get`; each `/api/2.2/jobs/update` body kept."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.updates: list[dict[str, Any]] = []
        self.permitted = True  # False: the run's identity may not manage the job


@pytest.fixture
def jobs_api(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[dict[str, Any]], JobsApi]]:
    servers: list[ThreadingHTTPServer] = []

    def serve(settings: dict[str, Any]) -> JobsApi:
        api = JobsApi(settings)

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if self.path != f"/api/2.2/jobs/get?job_id={JOB_ID}":
                    self._answer({"error_code": "NOT_FOUND"}, 404)  # the SDK's host metadata
                elif not api.permitted:
                    denied = "User does not have Manage permissions on Job 4242."
                    self._answer({"error_code": "PERMISSION_DENIED", "message": denied}, 403)
                else:
                    self._answer({"job_id": JOB_ID, "settings": api.settings})

            def do_POST(self) -> None:
                assert self.path == "/api/2.2/jobs/update", self.path
                length = int(self.headers["Content-Length"])
                api.updates.append(json.loads(self.rfile.read(length)))
                self._answer({})

            def _answer(self, body: dict[str, Any], status: int = 200) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        monkeypatch.setenv("DATABRICKS_HOST", f"http://127.0.0.1:{server.server_address[1]}")
        monkeypatch.setenv("DATABRICKS_TOKEN", "dapi-test-token")
        return api

    yield serve
    for server in servers:
        server.shutdown()


def _config_file(make_config: Callable[..., Any], tmp_path: Path) -> Path:
    config = make_config()
    path = tmp_path / "binlake.yml"
    source = config.source
    path.write_text(
        json.dumps(
            {
                "source": {
                    "host": source.host,
                    "port": source.port,
                    "user": source.user,
                    "database": source.database,
                    "server_id_range": list(source.server_id_range),
                },
                "lake": {"root": config.lake.root},
            }
        )
    )
    return path


def test_a_stream_stopped_by_an_unfinished_snapshot_pauses_its_continuous_job(
    spark: Any,
    jobs_api: Callable[[dict[str, Any]], JobsApi],
    make_config: Callable[..., Any],
    sql: Callable[..., Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    sql("CREATE TABLE items (id INT PRIMARY KEY, label VARCHAR(20))")
    continuous = {"pause_status": "UNPAUSED", "task_retry_mode": "ON_FAILURE"}
    api = jobs_api({"name": "binlake silver stream", "continuous": continuous})
    config = _config_file(make_config, tmp_path)

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
    assert "dapi-test-token" not in "\n".join(lines)


def test_a_scheduled_job_is_paused_with_its_schedule_kept_and_an_already_paused_one_is_left(
    jobs_api: Callable[[dict[str, Any]], JobsApi],
    make_config: Callable[..., Any],
    tmp_path: Path,
) -> None:
    schedule = {"quartz_cron_expression": "0 0/15 * * * ?", "timezone_id": "UTC"}
    api = jobs_api({"schedule": {**schedule, "pause_status": "UNPAUSED"}})
    config = _config_file(make_config, tmp_path)
    wrong = ["--set", "snapshot.parallelism=0"]  # a setting no retry fixes: exit 2

    assert cli.main(["run", "--config", str(config), f"--job-id={JOB_ID}", *wrong]) == 2
    assert api.updates == [
        {"job_id": JOB_ID, "new_settings": {"schedule": {**schedule, "pause_status": "PAUSED"}}}
    ]

    api.settings = {"schedule": {**schedule, "pause_status": "PAUSED"}}
    assert cli.main(["run", "--config", str(config), f"--job-id={JOB_ID}", *wrong]) == 2
    assert len(api.updates) == 1


def test_a_failure_a_retry_can_fix_leaves_the_job_running(
    jobs_api: Callable[[dict[str, Any]], JobsApi],
    make_config: Callable[..., Any],
    tmp_path: Path,
) -> None:
    api = jobs_api({"continuous": {"pause_status": "UNPAUSED"}})
    config = _config_file(make_config, tmp_path)
    down = ["--set", "source.port=1", "--set", "source.reconnect_timeout_s=0"]

    assert cli.main(["stream", "--config", str(config), f"--job-id={JOB_ID}", *down]) == 3
    assert api.updates == []


def test_a_job_its_run_may_not_manage_keeps_running_and_the_stop_is_reported_as_it_was(
    jobs_api: Callable[[dict[str, Any]], JobsApi],
    make_config: Callable[..., Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    api = jobs_api({"continuous": {"pause_status": "UNPAUSED"}})
    api.permitted = False
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
