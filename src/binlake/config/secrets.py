"""The source's secrets, resolved: its password and the salt of hashed columns.

The config holds only references to them (`config.settings.SourceConfig`): an environment
variable's name, an inline value for local use, or a Databricks secret `<scope>/<key>`. Here they
are read, once on the driver (`with_resolved_password`), so Spark tasks need no environment of
their own. Both stay `SecretStr` and appear in no log line or error message.

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
import logging
import os

from pydantic import SecretStr

from binlake.config.settings import SourceConfig
from binlake.errors import ConfigError


def source_password(source: SourceConfig) -> str:
    """The password, read at the moment it is needed: the inline `source.password`, else the
    workspace secret `source.password_secret`, else the environment variable
    `source.password_env`; "" with none of them. Raises `ConfigError` for a named environment
    variable that is not set."""
    if source.password is not None:
        return source.password.get_secret_value()
    if source.password_secret:
        return read_secret(source.password_secret)
    if source.password_env:
        value = os.environ.get(source.password_env)
        if value is None:
            raise ConfigError(
                f"source.password_env names the environment variable {source.password_env!r}, "
                "which is not set: export it, or set source.password for a local setup"
            )
        return value
    return ""


def hash_salt(source: SourceConfig) -> str:
    """The salt of hashed columns: the one `source` carries (resolved on the driver, see
    `with_hash_salt`), else read now from the workspace secret `source.hash_salt_secret` or
    the environment variable `source.hash_salt_env`. Raises `ConfigError` when it is unset."""
    carried = source.carried_hash_salt
    if carried is not None:
        return carried.get_secret_value()
    if source.hash_salt_secret:
        return read_secret(source.hash_salt_secret)
    value = os.environ.get(source.hash_salt_env or "")
    if not value:
        raise ConfigError(
            f"source.column_rules hash columns, and the environment variable "
            f"{source.hash_salt_env!r} (source.hash_salt_env) holding their salt is not set: "
            "export a long random salt there (or set source.hash_salt_secret); keep it, "
            "since another salt hashes the same value differently"
        )
    return value


def with_hash_salt(source: SourceConfig) -> SourceConfig:
    """A copy of `source` carrying the salt, for Spark tasks that have no environment of their
    own (the salt is resolved only when a rule hashes)."""
    if not source.hashes:
        return source.with_secrets()
    return source.with_secrets(hash_salt=SecretStr(hash_salt(source)))


def with_resolved_password(source: SourceConfig) -> SourceConfig:
    """Resolve the password (and the salt of hashed columns) once on the driver, so Spark tasks
    need no environment of their own. Both stay SecretStr: never printed, never logged.

    The tasks' pickled functions carry it to the JVM through py4j, which logs every command it
    sends (base64 bytes included) at DEBUG: py4j's logger is held at INFO or above, so debug
    logging in the calling process (`-v`, a notebook's root logger) cannot print it.
    """
    py4j = logging.getLogger("py4j")
    py4j.setLevel(max(py4j.level, logging.INFO))
    return with_hash_salt(source).with_secrets(password=SecretStr(source_password(source)))


@functools.cache
def read_secret(reference: str) -> str:
    """The workspace secret `<scope>/<key>`'s value, as text, read once per process. Raises
    `ConfigError` naming the reference and the remedy, never the value."""
    # Imported here: the SDK is slow to import, and Spark's Python workers import this module
    # (through the source connection) without ever reading a workspace secret.
    from databricks.sdk.errors import DatabricksError, NotFound, PermissionDenied

    from binlake.runtime.workspace import Connection, workspace_client

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
