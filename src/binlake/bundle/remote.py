"""The workspace as loading a bundle asks it: the current user and variable lookups.

Everything here is asked lazily: a bundle that references no `${workspace.current_user.*}`, has
no `mode: development`, no default root path in use and no variable `lookup` loads without any
network call.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from operator import attrgetter
from typing import Any

from databricks.sdk import WorkspaceClient

from binlake.errors import BundleError
from binlake.runtime.workspace import Connection, calling


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
