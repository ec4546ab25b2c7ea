"""The source password as a Databricks secret: `source.password_secret: <scope>/<key>`.

Serverless jobs take no environment variables from the job's cluster, so the secret reference
that a classic job cluster resolves into `BINLAKE_SOURCE_PASSWORD` has nowhere to go. binlake
reads the secret itself, once per process, through the workspace's Secrets API with the
credentials the run already has (on Databricks the run's identity, which needs READ on the
scope; elsewhere the SDK's unified authentication: `DATABRICKS_HOST` and a token or profile).
The value is never logged: the SDK's debug log of a response masks its `value` (a test at
debug level holds it to that).
"""

from __future__ import annotations

import base64
import functools

from databricks.sdk.errors import DatabricksError, NotFound, PermissionDenied

from binlake.errors import ConfigError
from binlake.runtime.workspace import Connection, workspace_client


@functools.cache
def read_secret(reference: str) -> str:
    """The secret `<scope>/<key>`'s value, as text."""
    scope, _, key = reference.partition("/")
    where = f"source.password_secret {reference!r}"
    try:
        client = workspace_client(Connection(()))
        value = client.secrets.get_secret(scope, key).value
    except NotFound:
        raise ConfigError(
            f"{where}: the workspace has no secret {key!r} in scope {scope!r}: create it with "
            f"`databricks secrets put-secret {scope} {key}`"
        ) from None
    except PermissionDenied:
        raise ConfigError(
            f"{where}: the identity this runs as may not read scope {scope!r}: grant it READ "
            f"(`databricks secrets put-acl {scope} <principal> READ`)"
        ) from None
    except (DatabricksError, OSError, ValueError) as exc:
        first = next(iter(str(exc).strip().splitlines()), type(exc).__name__)
        raise ConfigError(f"{where}: cannot read it from the workspace: {first}") from None
    if value is None:
        raise ConfigError(f"{where}: the workspace returned no value")
    return base64.b64decode(value).decode()
