"""The Databricks workspace client: how to reach a workspace, and every call bounded.

Every call is bounded (`HTTP_TIMEOUT_SECONDS`, `RETRY_TIMEOUT_SECONDS`), so an unreachable host ends
in one `BundleError` line instead of the SDK's five minutes of retries. The job pause and the
secrets a config names reach the workspace through here.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from databricks.sdk import WorkspaceClient
from databricks.sdk.core import Config

from binlake.errors import BundleError

#: One HTTP request's limit, and the limit of the SDK's retries of one call.
HTTP_TIMEOUT_SECONDS = 10
RETRY_TIMEOUT_SECONDS = 15
#: `workspace` keys that are `databricks.sdk` client settings (host, profile, auth_type, …).
_CLIENT_KEYS = frozenset(attribute.name for attribute in Config.attributes())


@dataclass(frozen=True)
class Connection:
    """How to reach a target's workspace: the target's `workspace` keys that configure the SDK
    client (host, profile, auth_type, azure_*, …), as sorted pairs so that it can key a cache."""

    settings: tuple[tuple[str, Any], ...]

    @classmethod
    def of(cls, workspace: Mapping[str, Any]) -> Connection:
        return cls(tuple(sorted((k, v) for k, v in workspace.items() if k in _CLIENT_KEYS)))

    @property
    def host(self) -> str | None:
        """The target's own host; without one the SDK looks at its profile or the environment."""
        host = dict(self.settings).get("host")
        return str(host) if host else None

    def describe(self) -> str:
        """The host, or where the SDK looks for one; never a credential."""
        profile = dict(self.settings).get("profile")
        if self.host:
            return self.host
        if profile:
            return f"the host of profile {profile!r}"
        return (
            os.environ.get("DATABRICKS_HOST")
            or "the host of DATABRICKS_HOST or the default profile"
        )


def workspace_client(
    connection: Connection,
    http_timeout_seconds: float = HTTP_TIMEOUT_SECONDS,
    retry_timeout_seconds: int = RETRY_TIMEOUT_SECONDS,
) -> WorkspaceClient:
    """A client for the target's workspace (or DATABRICKS_HOST), authenticated the SDK's standard
    way: the target's `profile`, DATABRICKS_TOKEN, ~/.databrickscfg or any other unified-auth
    source, with bounded timeouts."""
    try:
        config = Config(
            **dict(connection.settings),
            http_timeout_seconds=http_timeout_seconds,
            retry_timeout_seconds=retry_timeout_seconds,
        )
    except ValueError as exc:
        raise BundleError(
            f"cannot authenticate to {connection.describe()}: {_first_line(exc)}; set "
            "DATABRICKS_TOKEN, or `workspace.profile` naming a ~/.databrickscfg profile"
        ) from None
    return WorkspaceClient(config=config)


@contextlib.contextmanager
def calling(action: str, where: str) -> Iterator[None]:
    """Turn an API failure or an unreachable host into a `BundleError` naming the step."""
    try:
        yield
    except OSError as exc:  # DatabricksError, requests' errors and the SDK's timeouts
        hint = " (is the host reachable from here?)" if isinstance(exc, TimeoutError) else ""
        raise BundleError(f"{action} on {where} failed: {_first_line(exc)}{hint}") from None


def _first_line(exc: BaseException) -> str:
    return next(iter(str(exc).strip().splitlines()), type(exc).__name__)
