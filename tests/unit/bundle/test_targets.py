"""The project's targets, as Databricks' `default-python` template has them: `dev` the default
(`mode: development`, everything of a developer's own), `prod` (`mode: production`, run as a
service principal, nothing scheduled until a person unpauses it after the first run), and
`local` for `binlake bundle run-local` only; the CLI version the bundle's Python code needs."""

from __future__ import annotations

import argparse
import re
import tomllib
from importlib.metadata import metadata
from typing import Any

import yaml

from binlake.bundle.cli import LOCAL_TARGET, add_bundle_command
from binlake.bundle.definition import Bundle

from .bundles import PRINCIPAL, REPO, StubWorkspace, load


def _isolated(bundle: Bundle) -> dict[str, Any]:
    """What two developers' deploys must not share."""
    resources = bundle.resources
    return {
        "schemas": sorted(schema.name for schema in resources["schemas"].values()),
        "secret scope": [scope.name for scope in resources["secret_scopes"].values()],
        "root path": bundle.root_path,
        **{
            f"{key} {what}": job.parameter_defaults[parameter]
            for key, job in bundle.jobs.items()
            for what, parameter in (("lake", "lake_root"), ("ids", "source_server_id_range"))
        },
        **{f"{key} name": job.settings.name for key, job in bundle.jobs.items()},
    }


def test_dev_is_the_default_target_in_development_mode() -> None:
    bundle = load(REPO)

    assert (bundle.target, bundle.mode) == ("dev", "development")


def test_dev_gives_each_developer_their_own_of_everything_a_deploy_creates() -> None:
    jane = _isolated(load(REPO, "dev", connect=StubWorkspace("jane.doe@example.com")))
    john = _isolated(load(REPO, "dev", connect=StubWorkspace("john.roe@example.com")))

    shared = {what: value for what, value in jane.items() if john.get(what) == value}
    assert not shared, f"two developers' dev deploys share {shared}"
    assert jane["secret scope"] == ["jane_doe_binlake"]


def test_prod_runs_as_the_service_principal_with_nothing_running_until_unpaused() -> None:
    bundle = load(REPO, "prod")

    assert bundle.mode == "production"
    for key, job in bundle.jobs.items():
        settings = job.settings
        assert settings.run_as is not None
        assert settings.run_as.service_principal_name == PRINCIPAL, key
        for trigger in (settings.schedule, settings.continuous, settings.trigger):
            assert trigger is None or trigger.pause_status.value == "PAUSED", key


def test_run_local_defaults_to_the_local_target_and_validate_to_the_bundles_default() -> None:
    parser = argparse.ArgumentParser()
    add_bundle_command(
        parser.add_subparsers(dest="command"), argparse.ArgumentParser(add_help=False)
    )

    assert parser.parse_args(["bundle", "run-local", "silver_catchup"]).target == LOCAL_TARGET
    assert parser.parse_args(["bundle", "validate"]).target is None
    config = yaml.safe_load((REPO / "bundle.yml").read_text())
    assert not config["targets"][LOCAL_TARGET].get("default")


def test_the_bundle_requires_the_cli_version_its_python_package_requires() -> None:
    """`databricks-bundles` (the mutators' package, pinned) documents the CLI it needs."""
    readme = str(metadata("databricks-bundles").get_payload())  # type: ignore[attr-defined]
    (required,) = re.findall(r"Databricks CLI\]\([^)]*\), version (\S+) or above", readme)
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    config = yaml.safe_load((REPO / "bundle.yml").read_text())

    assert f"databricks-bundles=={required}" in project["dependencies"]
    assert config["bundle"]["databricks_cli_version"] == f">= {required}"
