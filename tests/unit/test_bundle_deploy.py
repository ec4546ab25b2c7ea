"""`binlake bundle deploy` against a fake Workspace/Jobs API on 127.0.0.1 (no workspace is
reachable from here): the requests it makes, and that a second deploy updates, never duplicates."""

from __future__ import annotations

import dataclasses
import json
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from databricks.sdk import WorkspaceClient

from binlake.bundle.definition import Artifact, Bundle, Workspace, load_bundle
from binlake.bundle.deploy import build_wheel, deploy, workspace_client
from binlake.bundle.errors import BundleError

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = "/Workspace/Shared/.bundle/binlake/dev/artifacts/.internal"
WHEEL = "binlake-0.1.0-py3-none-any.whl"


@dataclass
class FakeWorkspace:
    """The few Workspace and Jobs API endpoints a deploy calls, with jobs kept in memory."""

    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    jobs: dict[int, dict[str, Any]] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)

    def handle(self, method: str, path: str, query: dict[str, str], body: bytes, kind: str) -> Any:
        payload = json.loads(body) if body and "json" in kind else None
        if not path.startswith("/api/"):
            raise LookupError(path)  # the SDK's optional host-metadata probe
        self.requests.append((method, path, payload if payload is not None else query))
        if (method, path) == ("POST", "/api/2.0/workspace/mkdirs"):
            return {}
        if (method, path) == ("POST", "/api/2.0/workspace/import"):
            form = _form(body, kind)
            self.files[form["path"].decode()] = form["content"]
            return {}
        if (method, path) == ("GET", "/api/2.2/jobs/list"):
            name = query.get("name", "").lower()
            found = [
                {"job_id": job_id, "settings": settings}
                for job_id, settings in self.jobs.items()
                if settings.get("name", "").lower() == name
            ]
            return {"jobs": found} if found else {}
        if (method, path) == ("POST", "/api/2.2/jobs/create"):
            job_id = 1000 + len(self.jobs)
            self.jobs[job_id] = payload
            return {"job_id": job_id}
        if (method, path) == ("POST", "/api/2.2/jobs/reset"):
            self.jobs[payload["job_id"]] = payload["new_settings"]
            return {}
        raise AssertionError(f"deploy called an endpoint the fake does not serve: {method} {path}")

    def calls(self, method: str, path: str) -> list[Any]:
        return [body for m, p, body in self.requests if (m, p) == (method, path)]


def _form(body: bytes, kind: str) -> dict[str, bytes]:
    """The fields of a multipart/form-data body (the workspace import upload)."""
    message = BytesParser().parsebytes(f"Content-Type: {kind}\r\n\r\n".encode() + body)
    return {
        str(part.get_param("name", header="content-disposition")): part.get_payload(decode=True)
        for part in message.get_payload()
    }


@pytest.fixture
def workspace(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeWorkspace, str]]:
    for name in ("DATABRICKS_HOST", "DATABRICKS_TOKEN", "DATABRICKS_CONFIG_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", "/nonexistent/databrickscfg")
    fake = FakeWorkspace()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            url = urlparse(self.path)
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            query = {key: values[0] for key, values in parse_qs(url.query).items()}
            kind = self.headers.get("Content-Type", "")
            try:
                reply, status = fake.handle(self.command, url.path, query, body, kind), 200
            except (AssertionError, LookupError) as exc:
                reply, status = {"error_code": "NOT_FOUND", "message": str(exc)}, 404
            data = json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = _serve

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield fake, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def bundle(tmp_path: Path) -> Bundle:
    """The project's bundle files, copied so that a fake build can write tmp/dist."""
    shutil.copy(REPO / "bundle.yml", tmp_path / "bundle.yml")
    shutil.copytree(REPO / "resources", tmp_path / "resources")
    return load_bundle(tmp_path, "dev")


def fake_build(artifact: Artifact) -> Path:
    wheel = artifact.path / "dist" / WHEEL
    wheel.parent.mkdir(exist_ok=True)
    wheel.write_bytes(b"PK fake wheel")
    return wheel


def client(host: str) -> WorkspaceClient:
    return WorkspaceClient(host=host, token="test-token")


def test_first_deploy_uploads_the_wheel_and_creates_every_job(
    workspace: tuple[FakeWorkspace, str], bundle: Bundle
) -> None:
    fake, host = workspace

    deployed = deploy(bundle, client(host), fake_build)

    assert fake.calls("POST", "/api/2.0/workspace/mkdirs") == [{"path": ARTIFACTS}]
    assert fake.files == {f"{ARTIFACTS}/{WHEEL}": b"PK fake wheel"}
    assert [d.created for d in deployed] == [True, True, True]
    names = sorted(settings["name"] for settings in fake.calls("POST", "/api/2.2/jobs/create"))
    assert names == [
        "[dev] binlake bronze snapshot",
        "[dev] binlake silver catch-up",
        "[dev] binlake silver stream",
    ]


def test_deployed_tasks_use_the_uploaded_wheel_and_carry_the_bundle_tags(
    workspace: tuple[FakeWorkspace, str], bundle: Bundle
) -> None:
    fake, host = workspace

    deployed = {d.key: d.job_id for d in deploy(bundle, client(host), fake_build)}

    settings = fake.jobs[deployed["silver_catchup"]]
    assert [task["libraries"] for task in settings["tasks"]] == [
        [{"whl": f"{ARTIFACTS}/{WHEEL}"}],
        [{"whl": f"{ARTIFACTS}/{WHEEL}"}],
    ]
    assert settings["tags"] == {
        "binlake_bundle": "binlake",
        "binlake_target": "dev",
        "binlake_job": "silver_catchup",
    }


def test_deployed_cluster_reads_the_password_from_the_secret_scope(
    workspace: tuple[FakeWorkspace, str], bundle: Bundle
) -> None:
    fake, host = workspace

    deploy(bundle, client(host), fake_build)

    for settings in fake.jobs.values():
        cluster = settings["job_clusters"][0]["new_cluster"]
        assert cluster["spark_env_vars"] == {
            "BINLAKE_SOURCE_PASSWORD": "{{secrets/binlake/source-password}}"
        }


def test_second_deploy_resets_the_same_jobs_and_creates_none(
    workspace: tuple[FakeWorkspace, str], bundle: Bundle
) -> None:
    fake, host = workspace
    first = deploy(bundle, client(host), fake_build)
    creates = len(fake.calls("POST", "/api/2.2/jobs/create"))

    second = deploy(bundle, client(host), fake_build)

    assert len(fake.calls("POST", "/api/2.2/jobs/create")) == creates == 3
    assert [d.created for d in second] == [False, False, False]
    assert [d.job_id for d in second] == [d.job_id for d in first]
    assert sorted(r["job_id"] for r in fake.calls("POST", "/api/2.2/jobs/reset")) == sorted(
        d.job_id for d in first
    )
    assert len(fake.jobs) == 3


def test_second_deploy_sends_changed_settings(
    workspace: tuple[FakeWorkspace, str], bundle: Bundle, tmp_path: Path
) -> None:
    fake, host = workspace
    deployed = {d.key: d.job_id for d in deploy(bundle, client(host), fake_build)}

    changed = load_bundle(tmp_path, "dev", {"snapshot_parallelism": "16"})
    deploy(changed, client(host), fake_build)

    parameters = fake.jobs[deployed["bronze_snapshot"]]["parameters"]
    assert {"name": "snapshot_parallelism", "default": "16"} in parameters


def test_job_of_the_same_name_without_the_bundle_tags_is_not_overwritten(
    workspace: tuple[FakeWorkspace, str], bundle: Bundle
) -> None:
    fake, host = workspace
    fake.jobs[7] = {"name": "[dev] binlake bronze snapshot"}

    with pytest.raises(BundleError, match=r"job 7 is named .* not deployed by this bundle"):
        deploy(bundle, client(host), fake_build)
    assert fake.calls("POST", "/api/2.2/jobs/reset") == []
    assert fake.jobs[7] == {"name": "[dev] binlake bronze snapshot"}


def test_deploy_to_a_target_without_workspace_is_refused(
    workspace: tuple[FakeWorkspace, str], tmp_path: Path, bundle: Bundle
) -> None:
    fake, host = workspace

    with pytest.raises(BundleError, match=r"target 'local' has no workspace\.root_path"):
        deploy(load_bundle(tmp_path, "local"), client(host), fake_build)
    assert fake.requests == []


def test_api_failure_names_the_step_that_failed(
    workspace: tuple[FakeWorkspace, str], bundle: Bundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, host = workspace
    monkeypatch.setattr(FakeWorkspace, "handle", lambda *args: _refuse())

    with pytest.raises(BundleError, match=f"creating {ARTIFACTS} failed"):
        deploy(bundle, client(host), fake_build)


def _refuse() -> None:
    raise AssertionError("refused")


def test_client_uses_the_target_host_and_the_token_from_the_environment(
    workspace: tuple[FakeWorkspace, str], bundle: Bundle, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, host = workspace
    monkeypatch.setenv("DATABRICKS_TOKEN", "env-token")
    bundle = dataclasses.replace(bundle, workspace=Workspace(host, bundle.workspace.root_path))

    client = workspace_client(bundle)
    deploy(bundle, client, fake_build)

    assert (client.config.host, client.config.token) == (host, "env-token")
    assert len(fake.jobs) == 3


def test_build_wheel_returns_the_wheel_the_build_command_wrote(tmp_path: Path) -> None:
    script = "import pathlib; p = pathlib.Path('dist'); p.mkdir(); (p / 'x-1.whl').touch()"
    artifact = Artifact("wheel", tmp_path, f'python -c "{script}"')

    assert build_wheel(artifact) == tmp_path / "dist" / "x-1.whl"


def test_failing_build_is_an_error_with_its_output(tmp_path: Path) -> None:
    artifact = Artifact("wheel", tmp_path, "python -c \"raise SystemExit('no pyproject')\"")

    with pytest.raises(BundleError, match=r"building artifact 'wheel' .* no pyproject"):
        build_wheel(artifact)
