"""The workspace a bundle target names, against a fake SCIM API on 127.0.0.1 (no workspace is
reachable from here): binlake asks it only what validating a target needs (the current user of
a development target), with bounded timeouts, and deploys nothing itself (`databricks bundle
deploy` does)."""

from __future__ import annotations

import functools
import json
import shutil
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from binlake.bundle.definition import load_bundle
from binlake.errors import BundleError
from binlake.jobs import cli
from binlake.runtime.workspace import (
    HTTP_TIMEOUT_SECONDS,
    RETRY_TIMEOUT_SECONDS,
    Connection,
    workspace_client,
)

REPO = Path(__file__).resolve().parents[3]
USER = "Alice.Smith@example.com"
SHORT = "alice_smith"
DEV_ROOT = f"/Workspace/Users/{USER}/.bundle/binlake/dev"


@dataclass
class FakeWorkspace:
    """The SCIM endpoint validating a development target calls, and every request made."""

    user_name: str = USER
    requests: list[tuple[str, str]] = field(default_factory=list)

    def handle(self, method: str, path: str) -> Any:
        if not path.startswith("/api/"):
            raise LookupError(path)  # the SDK's optional host-metadata probe
        self.requests.append((method, path))
        if (method, path) == ("GET", "/api/2.0/preview/scim/v2/Me"):
            return {"userName": self.user_name, "displayName": "Alice Smith"}
        raise AssertionError(f"binlake called an endpoint it has no use for: {method} {path}")


@pytest.fixture
def workspace(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeWorkspace, str]]:
    for name in ("DATABRICKS_HOST", "DATABRICKS_TOKEN", "DATABRICKS_CONFIG_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABRICKS_CONFIG_FILE", "/nonexistent/databrickscfg")
    fake = FakeWorkspace()

    class Handler(BaseHTTPRequestHandler):
        def _serve(self) -> None:
            url = urlparse(self.path)
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                reply, status = fake.handle(self.command, url.path), 200
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
    """The project's bundle files, copied with every target's host pointed at the fake."""
    _, host = workspace
    document = yaml.safe_load((REPO / "bundle.yml").read_text())
    for target in document["targets"].values():
        if "mode" in target:  # the deployed ones: their host is the one authenticated to
            target.setdefault("workspace", {})["host"] = host
    (tmp_path / "bundle.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    shutil.copytree(REPO / "resources", tmp_path / "resources")
    return tmp_path


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

    client = clients(bundle.connection)
    assert (client.config.host, client.config.token) == (host, "profile-token")
    assert bundle.root_path == DEV_ROOT
    assert fake.requests == [("GET", "/api/2.0/preview/scim/v2/Me")]


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


def test_deploy_is_the_databricks_clis(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["bundle", "deploy", "--target", "dev", "--root", str(project)])

    err = capsys.readouterr().err
    assert code == 2
    assert "databricks bundle deploy -t dev" in err
