"""The project's targets, as Databricks' `default-python` template has them: `dev` the default
(`mode: development`, everything of a developer's own), `prod` (`mode: production`, run as a
service principal, nothing scheduled until a person unpauses it after the first run), and
`local` for `binlake bundle run-local` only; the CLI version the bundle's Python code needs.
The mode's own work (name prefixes, tags, run_as) is the Databricks CLI's, at deploy."""

from __future__ import annotations

import argparse
import re
import tomllib
from importlib.metadata import metadata

import yaml

from binlake.bundle.cli import LOCAL_TARGET, add_bundle_command

from .bundles import REPO, load

#: The variables naming what a deploy creates or uses (schemas, secret scope, server ids): in
#: `dev`, each must be the deploying developer's own.
DEVELOPERS_OWN = (
    "system_schema",
    "bronze_schema",
    "silver_schema",
    "secret_scope",
    "developer",
)


def test_dev_is_the_default_target_in_development_mode() -> None:
    bundle = load(REPO)

    assert (bundle.target, bundle.mode) == ("dev", "development")


def test_dev_gives_each_developer_their_own_of_everything_a_deploy_creates() -> None:
    """The lake root, the volume and the server ids derive from these (test_definition)."""
    dev = yaml.safe_load((REPO / "bundle.yml").read_text())["targets"]["dev"]["variables"]

    for name in DEVELOPERS_OWN:
        assert "${workspace.current_user.short_name}" in dev[name], name


def test_prod_deploys_nothing_running_until_a_person_unpauses_it() -> None:
    for key, job in load(REPO, "prod").jobs.items():
        settings = job.settings
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
