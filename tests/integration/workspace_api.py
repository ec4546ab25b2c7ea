"""A Databricks workspace's REST API as binlake's jobs call it, served on loopback: one job's
settings (`/api/2.2/jobs/get`, `/api/2.2/jobs/update`, each update's body kept) and secrets
(`/api/2.0/secrets/get`). The real `databricks-sdk` client reaches it over HTTP through
`DATABRICKS_HOST` and `DATABRICKS_TOKEN`, as a job run reaches its workspace."""

from __future__ import annotations

import base64
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

JOB_ID = 4242
TOKEN = "dapi-test-token"


class Workspace:
    """What the fake workspace holds; tests change it between calls."""

    def __init__(self) -> None:
        self.job_settings: dict[str, Any] = {}
        self.updates: list[dict[str, Any]] = []
        self.secrets: dict[tuple[str, str], str] = {}
        self.may_manage_job = True  # False: the caller may not manage the job
        self.url = ""

    def answer_get(self, path: str, query: dict[str, str]) -> tuple[int, dict[str, Any]]:
        if path == "/api/2.2/jobs/get" and query.get("job_id") == str(JOB_ID):
            if not self.may_manage_job:
                denied = f"User does not have Manage permissions on Job {JOB_ID}."
                return 403, {"error_code": "PERMISSION_DENIED", "message": denied}
            return 200, {"job_id": JOB_ID, "settings": self.job_settings}
        if path == "/api/2.0/secrets/get":
            found = self.secrets.get((query.get("scope", ""), query.get("key", "")))
            if found is None:
                message = f"Failed to get secret {query.get('key')} in scope {query.get('scope')}"
                return 404, {"error_code": "RESOURCE_DOES_NOT_EXIST", "message": message}
            value = base64.b64encode(found.encode()).decode()
            return 200, {"key": query["key"], "value": value}
        return 404, {"error_code": "NOT_FOUND", "message": path}  # the SDK's host metadata too

    def answer_post(self, path: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if path == "/api/2.2/jobs/update":
            self.updates.append(body)
            return 200, {}
        return 404, {"error_code": "NOT_FOUND", "message": path}


@contextmanager
def serving(workspace: Workspace) -> Iterator[str]:
    """Serve `workspace` until the block ends; yields its URL."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlsplit(self.path)
            query = {key: values[0] for key, values in parse_qs(url.query).items()}
            self._send(*workspace.answer_get(url.path, query))

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            self._send(*workspace.answer_post(urlsplit(self.path).path, body))

        def _send(self, status: int, body: dict[str, Any]) -> None:
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
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
