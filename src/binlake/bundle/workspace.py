"""Talking to a target's workspace: the client, the current user, variable lookups.

Everything here is asked lazily: a bundle that references no `${workspace.current_user.*}`, has
no `mode: development`, no default root path in use and no variable `lookup` loads without any
network call. Every call is bounded (`HTTP_TIMEOUT_SECONDS`, `RETRY_TIMEOUT_SECONDS`), so an
unreachable host ends in one `BundleError` line instead of the SDK's five minutes of retries.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from databricks.sdk import WorkspaceClient
from databricks.sdk.core import Config

from binlake.bundle.errors import BundleError

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


@dataclass(frozen=True)
class CurrentUser:
    """The identity a deploy runs as, as `${workspace.current_user.*}` sees it."""

    user_name: str
    short_name: str

    @classmethod
    def of(cls, user_name: str, display_name: str | None = None) -> CurrentUser:
        """The Databricks CLI's short name: the local part of the user name (of a service
        principal, whose user name is an application id, its display name), lower-cased, with
        every character that is not a letter or a digit replaced by `_`."""
        name = display_name if display_name and _is_uuid(user_name) else user_name
        local = name.partition("@")[0].lower()
        return cls(user_name, "".join(c if c.isalnum() else "_" for c in local))


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


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


#: Per lookup kind: list the objects, read one's name, read its id.
_LOOKUPS: dict[str, tuple[Callable[[WorkspaceClient], Iterable[Any]], str, str]] = {
    "alert": (lambda c: c.alerts.list(), "display_name", "id"),
    "cluster": (lambda c: c.clusters.list(), "cluster_name", "cluster_id"),
    "cluster_policy": (lambda c: c.cluster_policies.list(), "name", "policy_id"),
    "dashboard": (lambda c: c.lakeview.list(), "display_name", "dashboard_id"),
    "instance_pool": (lambda c: c.instance_pools.list(), "instance_pool_name", "instance_pool_id"),
    "job": (lambda c: c.jobs.list(), "settings.name", "job_id"),
    "metastore": (lambda c: c.metastores.list(), "name", "metastore_id"),
    "notification_destination": (
        lambda c: c.notification_destinations.list(),
        "display_name",
        "id",
    ),
    "pipeline": (lambda c: c.pipelines.list_pipelines(), "name", "pipeline_id"),
    "query": (lambda c: c.queries.list(), "display_name", "id"),
    "service_principal": (lambda c: c.service_principals.list(), "display_name", "application_id"),
    "warehouse": (lambda c: c.warehouses.list(), "name", "id"),
}


class Remote:
    """The workspace as loading a bundle needs it: connects on the first question only, and
    without `connect` (a library caller working offline) says which setting needed it."""

    def __init__(
        self, connection: Connection, connect: Callable[[Connection], WorkspaceClient] | None
    ) -> None:
        self._connection = connection
        self._connect = connect
        self._user: CurrentUser | None = None

    def current_user(self, why: str) -> CurrentUser:
        """The deploying identity (`GET /api/2.0/preview/scim/v2/Me`); `why` names the setting
        that needs it."""
        if self._user is None:
            with self._asking(f"asking for the current user (for {why})"):
                me = self._client().current_user.me()
            if not me.user_name:
                raise BundleError(f"{self._connection.describe()} returned no current user name")
            self._user = CurrentUser.of(me.user_name, me.display_name)
        return self._user

    def lookup(self, kind: str, name: str, variable: str) -> str:
        """The id of the `kind` object called `name`, for variable `variable`'s `lookup`."""
        lister, name_of, id_of = _LOOKUPS[kind]
        with self._asking(f"looking up {kind} {name!r} for variable {variable!r}"):
            found = [item for item in lister(self._client()) if _get(item, name_of) == name]
        if len(found) != 1:
            raise BundleError(
                f"variable {variable!r}: {len(found) or 'no'} {kind} named {name!r} on "
                f"{self._connection.describe()}, expected exactly one"
            )
        return str(_get(found[0], id_of))

    def _client(self) -> WorkspaceClient:
        if self._connect is None:
            raise BundleError(
                "no workspace connection was given (binlake bundle validate gives one)"
            )
        return self._connect(self._connection)

    @contextlib.contextmanager
    def _asking(self, action: str) -> Iterator[None]:
        """Name the question in any failure: a missing connection, bad credentials, no answer."""
        with calling(action, self._connection.describe()):
            try:
                yield
            except BundleError as exc:
                raise BundleError(f"{action} failed: {exc}") from None


def _get(item: Any, path: str) -> Any:
    try:
        return attrgetter(path)(item)
    except AttributeError:
        return None
