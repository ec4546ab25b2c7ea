"""`binlake bundle deploy` against a fake Workspace/Jobs API on 127.0.0.1 (no workspace is
reachable from here): the requests it makes, what mode, presets, run_as, permissions and
BUNDLE_VAR_* overrides do to them, and that a second deploy updates, never duplicates."""

from __future__ import annotations

import functools
import json
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from email.parser import BytesParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml
from databricks.sdk import WorkspaceClient

from binlake import cli
from binlake.bundle.definition import Artifact, Bundle, load_bundle
from binlake.bundle.deploy import build_wheel, deploy
from binlake.bundle.errors import BundleError
from binlake.bundle.workspace import (
    HTTP_TIMEOUT_SECONDS,
    RETRY_TIMEOUT_SECONDS,
    Connection,
    workspace_client,
)

REPO = Path(__file__).resolve().parents[2]
USER = "Alice.Smith@example.com"
SHORT = "alice_smith"
DEV_ROOT = f"/Workspace/Users/{USER}/.bundle/binlake/dev"
WHEEL = "binlake-0.1.0-py3-none-any.whl"
SERVICE_PRINCIPAL = "9f3c2b4e-1d2a-4c1b-8e9f-0a1b2c3d4e5f"
JOB_NAMES = ["binlake bronze snapshot", "binlake silver catch-up", "binlake silver stream"]


@dataclass
class FakeWorkspace:
    """The Workspace, SCIM, Jobs and Permissions endpoints a deploy calls, kept in memory."""

    user_name: str = USER
    requests: list[tuple[str, str, Any]] = field(default_factory=list)
    jobs: dict[int, dict[str, Any]] = field(default_factory=dict)
    permissions: dict[int, list[dict[str, Any]]] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)

    def handle(self, method: str, path: str, query: dict[str, str], body: bytes, kind: str) -> Any:
        payload = json.loads(body) if body and "json" in kind else None
        if not path.startswith("/api/"):
            raise LookupError(path)  # the SDK's optional host-metadata probe
        self.requests.append((method, path, payload if payload is not None else query))
        if (method, path) == ("GET", "/api/2.0/preview/scim/v2/Me"):
            return {"userName": self.user_name, "displayName": "Alice Smith"}
        if (method, path) == ("POST", "/api/2.0/workspace/mkdirs"):
            return {}
        if (method, path) == ("POST", "/api/2.0/workspace/import"):
            form = _form(body, kind)
            self.files[form["path"].decode()] = form["content"]
            return {}
        if (method, path) == ("GET", "/api/2.2/jobs/list"):
            return self._list(query.get("name", ""))
        if (method, path) == ("POST", "/api/2.2/jobs/create"):
            return {"job_id": self._create(payload)}
        if (method, path) == ("POST", "/api/2.2/jobs/reset"):
            self.jobs[payload["job_id"]] = payload["new_settings"]
            return {}
        if path.startswith("/api/2.0/permissions/jobs/"):
            return self._permissions(method, int(path.rsplit("/", 1)[1]), payload)
        raise AssertionError(f"deploy called an endpoint the fake does not serve: {method} {path}")

    def _list(self, name: str) -> dict[str, Any]:
        found = [
            {"job_id": job_id, "settings": settings}
            for job_id, settings in self.jobs.items()
            if settings.get("name", "").lower() == name.lower()
        ]
        return {"jobs": found} if found else {}

    def _create(self, payload: dict[str, Any]) -> int:
        """Like the Jobs API: the access control list is not a setting, and the creator owns
        the job unless the list names an owner."""
        job_id = 1000 + len(self.jobs)
        payload = dict(payload)
        acl = list(payload.pop("access_control_list", []))
        if not any(entry["permission_level"] == "IS_OWNER" for entry in acl):
            acl.append({"user_name": self.user_name, "permission_level": "IS_OWNER"})
        self.jobs[job_id], self.permissions[job_id] = payload, acl
        return job_id

    def _permissions(self, method: str, job_id: int, payload: Any) -> dict[str, Any]:
        if method == "PUT":
            self.permissions[job_id] = payload["access_control_list"]
        return {
            "object_id": f"/jobs/{job_id}",
            "access_control_list": [
                {
                    **{k: v for k, v in entry.items() if k != "permission_level"},
                    "all_permissions": [
                        {"permission_level": entry["permission_level"], "inherited": False}
                    ],
                }
                for entry in self.permissions.get(job_id, [])
            ],
        }

    def calls(self, method: str, path: str) -> list[Any]:
        return [body for m, p, body in self.requests if (m, p) == (method, path)]

    def job_named(self, name: str) -> dict[str, Any]:
        (settings,) = [s for s in self.jobs.values() if s["name"] == name]
        return settings


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

        do_GET = do_POST = do_PUT = _serve

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield fake, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def project(tmp_path: Path, workspace: tuple[FakeWorkspace, str]) -> Path:
    """The project's bundle files, copied with every target's host pointed at the fake (and a
    fake build can write tmp/dist)."""
    _, host = workspace
    document = yaml.safe_load((REPO / "bundle.yml").read_text())
    for target in document["targets"].values():
        if "host" in target.get("workspace", {}):
            target["workspace"]["host"] = host
    (tmp_path / "bundle.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    shutil.copytree(REPO / "resources", tmp_path / "resources")
    return tmp_path


def connect(connection: Connection) -> WorkspaceClient:
    return WorkspaceClient(host=connection.host, token="test-token")


def load(project: Path, target: str, **options: Any) -> Bundle:
    return load_bundle(project, target, connect=connect, **options)


def fake_build(artifact: Artifact) -> Path:
    wheel = artifact.path / "dist" / WHEEL
    wheel.parent.mkdir(exist_ok=True)
    wheel.write_bytes(b"PK fake wheel")
    return wheel


def deploy_target(project: Path, target: str, **options: Any) -> dict[str, int]:
    bundle = load(project, target, **options)
    return {d.key: d.job_id for d in deploy(bundle, connect(bundle.connection), fake_build)}


PROD = {"environ": {"BUNDLE_VAR_prod_service_principal": SERVICE_PRINCIPAL}}


def test_development_deploy_uploads_the_wheel_under_the_users_own_root_path(
    workspace: tuple[FakeWorkspace, str], project: Path
) -> None:
    fake, _ = workspace

    deploy_target(project, "dev")

    folder = f"{DEV_ROOT}/artifacts/.internal"
    assert fake.calls("POST", "/api/2.0/workspace/mkdirs") == [{"path": folder}]
    assert fake.files == {f"{folder}/{WHEEL}": b"PK fake wheel"}
    assert len(fake.calls("GET", "/api/2.0/preview/scim/v2/Me")) == 1


def test_development_deploy_prefixes_tags_and_pauses_the_jobs(
    workspace: tuple[FakeWorkspace, str], project: Path
) -> None:
    fake, _ = workspace

    deploy_target(project, "dev")

    names = sorted(settings["name"] for settings in fake.calls("POST", "/api/2.2/jobs/create"))
    assert names == [f"[dev {SHORT}] {name}" for name in JOB_NAMES]
    catchup = fake.job_named(f"[dev {SHORT}] binlake silver catch-up")
    assert catchup["tags"] == {
        "dev": SHORT,
        "binlake_bundle": "binlake",
        "binlake_target": "dev",
        "binlake_job": "silver_catchup",
    }
    assert catchup["schedule"]["pause_status"] == "PAUSED"
    stream = fake.job_named(f"[dev {SHORT}] binlake silver stream")
    assert stream["continuous"]["pause_status"] == "PAUSED"


def test_each_developer_gets_a_lake_of_their_own(
    workspace: tuple[FakeWorkspace, str], project: Path
) -> None:
    fake, _ = workspace

    deploy_target(project, "dev")
    fake.user_name = "bob@example.com"
    deploy_target(project, "dev")

    roots = {
        settings["name"]: {p["name"]: p["default"] for p in settings["parameters"]}["lake_root"]
        for settings in fake.jobs.values()
        if "bronze" in settings["name"]
    }
    assert roots == {
        f"[dev {SHORT}] binlake bronze snapshot": f"/Volumes/dev/binlake/lakehouse/{SHORT}",
        "[dev bob] binlake bronze snapshot": "/Volumes/dev/binlake/lakehouse/bob",
    }
    assert len(fake.jobs) == 6


def test_deployed_tasks_use_the_uploaded_wheel(
    workspace: tuple[FakeWorkspace, str], project: Path
) -> None:
    fake, _ = workspace

    deployed = deploy_target(project, "dev")

    wheel = f"{DEV_ROOT}/artifacts/.internal/{WHEEL}"
    settings = fake.jobs[deployed["silver_catchup"]]
    assert [task["libraries"] for task in settings["tasks"]] == [[{"whl": wheel}], [{"whl": wheel}]]


def test_deployed_cluster_reads_the_password_from_the_secret_scope(
    workspace: tuple[FakeWorkspace, str], project: Path
) -> None:
    fake, _ = workspace

    deploy_target(project, "dev")

    for settings in fake.jobs.values():
        cluster = settings["job_clusters"][0]["new_cluster"]
        assert cluster["spark_env_vars"] == {
            "BINLAKE_SOURCE_PASSWORD": "{{secrets/binlake/source-password}}"
        }


def test_production_deploy_runs_as_the_service_principal_with_the_bundle_permissions(
    workspace: tuple[FakeWorkspace, str], project: Path
) -> None:
    fake, _ = workspace

    deploy_target(project, "prod", **PROD)

    created = fake.calls("POST", "/api/2.2/jobs/create")
    assert sorted(settings["name"] for settings in created) == JOB_NAMES
    for settings in created:
        assert settings["run_as"] == {"service_principal_name": SERVICE_PRINCIPAL}
        assert settings["access_control_list"] == [
            {"group_name": "binlake-operators", "permission_level": "CAN_MANAGE_RUN"}
        ]
        assert settings["email_notifications"] == {"on_failure": ["binlake-oncall@example.com"]}
    assert fake.files == {
        f"/Workspace/Users/{SERVICE_PRINCIPAL}/.bundle/binlake/prod/artifacts/.internal/{WHEEL}": (
            b"PK fake wheel"
        )
    }
    catchup = fake.job_named("binlake silver catch-up")
    assert catchup["schedule"]["pause_status"] == "UNPAUSED"
    assert "dev" not in catchup["tags"]


def test_second_production_deploy_replaces_permissions_and_keeps_the_owner(
    workspace: tuple[FakeWorkspace, str], project: Path
) -> None:
    fake, _ = workspace
    first = deploy_target(project, "prod", **PROD)

    deploy_target(project, "prod", environ={**PROD["environ"], "BUNDLE_VAR_operators_group": "sre"})

    job_id = first["bronze_snapshot"]
    assert fake.calls("PUT", f"/api/2.0/permissions/jobs/{job_id}") == [
        {
            "access_control_list": [
                {"group_name": "sre", "permission_level": "CAN_MANAGE_RUN"},
                {"user_name": USER, "permission_level": "IS_OWNER"},
            ]
        }
    ]


def test_second_deploy_resets_the_same_jobs_and_creates_none(
    workspace: tuple[FakeWorkspace, str], project: Path
) -> None:
    fake, _ = workspace
    first = deploy_target(project, "dev")

    second = deploy_target(project, "dev")

    assert len(fake.calls("POST", "/api/2.2/jobs/create")) == 3
    assert second == first
    assert sorted(r["job_id"] for r in fake.calls("POST", "/api/2.2/jobs/reset")) == sorted(
        first.values()
    )
    assert len(fake.jobs) == 3


@pytest.mark.parametrize(
    ("environ", "variables", "expected"),
    [
        ({}, {}, "4"),
        ({"BUNDLE_VAR_snapshot_parallelism": "6"}, {}, "6"),
        ({"BUNDLE_VAR_snapshot_parallelism": "6"}, {"snapshot_parallelism": "16"}, "16"),
    ],
)
def test_bundle_var_environment_overrides_reach_the_deployed_job(
    workspace: tuple[FakeWorkspace, str],
    project: Path,
    environ: dict[str, str],
    variables: dict[str, str],
    expected: str,
) -> None:
    fake, _ = workspace

    deployed = deploy_target(project, "dev", environ=environ, variables=variables)

    parameters = fake.jobs[deployed["bronze_snapshot"]]["parameters"]
    assert {"name": "snapshot_parallelism", "default": expected} in parameters


def test_job_of_the_same_name_without_the_bundle_tags_is_not_overwritten(
    workspace: tuple[FakeWorkspace, str], project: Path
) -> None:
    fake, _ = workspace
    fake.jobs[7] = {"name": f"[dev {SHORT}] binlake bronze snapshot"}

    with pytest.raises(BundleError, match=r"job 7 is named .* not deployed by this bundle"):
        deploy_target(project, "dev")
    assert fake.calls("POST", "/api/2.2/jobs/reset") == []
    assert fake.jobs[7] == {"name": f"[dev {SHORT}] binlake bronze snapshot"}


def test_bundle_with_resources_binlake_does_not_deploy_is_refused(
    workspace: tuple[FakeWorkspace, str], project: Path
) -> None:
    fake, _ = workspace
    (project / "resources" / "pipeline.yml").write_text(
        yaml.safe_dump({"resources": {"pipelines": {"p": {"name": "p"}}}})
    )

    with pytest.raises(BundleError, match=r"jobs only.*resources\.pipelines.*databricks bundle"):
        deploy_target(project, "dev")
    assert fake.files == {}


def test_api_failure_names_the_step_that_failed(
    workspace: tuple[FakeWorkspace, str], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle = load(project, "dev")
    monkeypatch.setattr(FakeWorkspace, "handle", lambda *args: _refuse())

    with pytest.raises(BundleError, match=f"creating {DEV_ROOT}/artifacts/.internal on .* failed"):
        deploy(bundle, connect(bundle.connection), fake_build)


def _refuse() -> None:
    raise AssertionError("refused")


def test_client_takes_the_host_and_token_of_the_targets_profile(
    workspace: tuple[FakeWorkspace, str], project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake, host = workspace
    config = project / "databrickscfg"
    config.write_text(f"[alice]\nhost = {host}\ntoken = profile-token\n")
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", str(config))
    document = yaml.safe_load((project / "bundle.yml").read_text())
    document["targets"]["dev"]["workspace"] = {"profile": "alice"}
    (project / "bundle.yml").write_text(yaml.safe_dump(document))
    clients = functools.cache(workspace_client)

    bundle = load_bundle(project, "dev", connect=clients)
    deploy(bundle, clients(bundle.connection), fake_build)

    client = clients(bundle.connection)
    assert (client.config.host, client.config.token) == (host, "profile-token")
    assert len(fake.jobs) == 3


def test_client_timeouts_are_bounded(
    workspace: tuple[FakeWorkspace, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, host = workspace
    monkeypatch.setenv("DATABRICKS_TOKEN", "test-token")

    client = workspace_client(Connection.of({"host": host, "profile": None}))

    assert client.config.http_timeout_seconds == HTTP_TIMEOUT_SECONDS <= 30
    assert client.config.retry_timeout_seconds == RETRY_TIMEOUT_SECONDS <= 60


def test_unreachable_host_is_a_prompt_error_not_a_hang(
    project: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    document = yaml.safe_load((project / "bundle.yml").read_text())
    document["targets"]["dev"]["workspace"]["host"] = f"http://127.0.0.1:{port}"
    (project / "bundle.yml").write_text(yaml.safe_dump(document))
    monkeypatch.setenv("DATABRICKS_TOKEN", "test-token")
    quick = functools.partial(workspace_client, http_timeout_seconds=1, retry_timeout_seconds=1)
    started = time.monotonic()

    with pytest.raises(BundleError, match=rf"current user .* on http://127.0.0.1:{port} failed"):
        load_bundle(project, "dev", connect=quick)
    assert time.monotonic() - started < 15


def test_validate_command_shows_the_development_jobs(
    workspace: tuple[FakeWorkspace, str],
    project: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DATABRICKS_TOKEN", "test-token")

    code = cli.main(["bundle", "validate", "--target", "dev", "--root", str(project)])

    out = capsys.readouterr().out
    assert code == 0, out
    assert f"root path {DEV_ROOT}" in out
    assert f"silver_catchup ([dev {SHORT}] binlake silver catch-up): snapshot → stream" in out


def test_build_wheel_returns_the_wheel_the_build_command_wrote(tmp_path: Path) -> None:
    script = "import pathlib; p = pathlib.Path('dist'); p.mkdir(); (p / 'x-1.whl').touch()"
    artifact = Artifact("wheel", tmp_path, f'python -c "{script}"')

    assert build_wheel(artifact) == tmp_path / "dist" / "x-1.whl"


def test_failing_build_is_an_error_with_its_output(tmp_path: Path) -> None:
    artifact = Artifact("wheel", tmp_path, "python -c \"raise SystemExit('no pyproject')\"")

    with pytest.raises(BundleError, match=r"building artifact 'wheel' .* no pyproject"):
        build_wheel(artifact)


def test_artifact_binlake_cannot_build_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(BundleError, match=r"artifacts\.lib: binlake builds `type: whl`"):
        build_wheel(Artifact("lib", tmp_path, None, "jar"))
