"""The keys of a bundle file the Databricks CLI documents, so binlake accepts what the CLI accepts.

These are names only, not Databricks' schema: job resources are checked against the typed job
model of `databricks-sdk` (see `definition`), and the value of a key binlake does not act on
(`sync`, `scripts`, `python`, `experimental`, `git`, …) is left for the Databricks CLI. A key
outside these sets is a typo or a misplaced setting, reported with the nearest known key.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from typing import Any

from binlake.errors import BundleError

TOP_LEVEL = frozenset(
    {
        "artifacts",
        "bundle",
        "environments",  # the deprecated name of `targets`
        "experimental",
        "include",
        "permissions",
        "presets",
        "python",
        "resources",
        "run_as",
        "scripts",
        "sync",
        "targets",
        "variables",
        "workspace",
    }
)
TARGET = frozenset(
    {
        "artifacts",
        "bundle",
        "cluster_id",
        "compute_id",
        "default",
        "git",
        "mode",
        "permissions",
        "presets",
        "resources",
        "run_as",
        "sync",
        "variables",
        "workspace",
    }
)
BUNDLE = frozenset(
    {
        "cluster_id",
        "compute_id",
        "databricks_cli_version",
        "deployment",
        "engine",
        "git",
        "name",
        "uuid",
    }
)
WORKSPACE = frozenset(
    {
        "account_id",
        "artifact_path",
        "auth_type",
        "azure_client_id",
        "azure_environment",
        "azure_login_app_id",
        "azure_tenant_id",
        "azure_use_msi",
        "azure_workspace_resource_id",
        "client_id",
        "experimental_is_unified_host",
        "file_path",
        "google_service_account",
        "host",
        "profile",
        "resource_path",
        "root_path",
        "state_path",
        "workspace_id",
    }
)
PRESETS = frozenset(
    {
        "artifacts_dynamic_version",
        "catalog",
        "jobs_max_concurrent_runs",
        "name_prefix",
        "pipelines_development",
        "schema",
        "source_linked_deployment",
        "tags",
        "trigger_pause_status",
    }
)
ARTIFACT = frozenset({"build", "dynamic_version", "executable", "files", "path", "type"})
VARIABLE = frozenset({"default", "description", "lookup", "type"})
#: What a variable's `lookup` can name; its value is the object's id in the workspace.
LOOKUP = frozenset(
    {
        "alert",
        "cluster",
        "cluster_policy",
        "dashboard",
        "instance_pool",
        "job",
        "metastore",
        "notification_destination",
        "pipeline",
        "query",
        "service_principal",
        "warehouse",
    }
)
PRINCIPAL = frozenset({"group_name", "service_principal_name", "user_name"})
PERMISSION = PRINCIPAL | {"level"}
RUN_AS = frozenset({"service_principal_name", "user_name"})
#: Resource types of a bundle; binlake deploys `jobs`, the Databricks CLI all of them.
RESOURCES = frozenset(
    {
        "alerts",
        "apps",
        "catalogs",
        "clusters",
        "dashboards",
        "database_catalogs",
        "database_instances",
        "experiments",
        "external_locations",
        "jobs",
        "model_serving_endpoints",
        "models",
        "pipelines",
        "quality_monitors",
        "registered_models",
        "schemas",
        "secret_scopes",
        "sql_warehouses",
        "synced_database_tables",
        "volumes",
    }
)
#: Keys of a job resource that the bundle format adds to the Jobs API's job settings.
JOB_BUNDLE_ONLY = frozenset({"lifecycle", "permissions"})


def check_keys(document: Mapping[str, Any], allowed: Collection[str], where: str) -> None:
    """Raise on the first key of `document` outside `allowed`, naming the closest allowed key."""
    for key in document:
        if key not in allowed:
            raise BundleError(f"{where}: unknown key {key!r}{did_you_mean(key, allowed)}")


def did_you_mean(word: str, choices: Collection[str]) -> str:
    """`; did you mean 'x'?` for the closest choice, or the choices when none is close."""
    close = difflib.get_close_matches(word, sorted(choices), n=1)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f" (known: {', '.join(sorted(choices))})"
