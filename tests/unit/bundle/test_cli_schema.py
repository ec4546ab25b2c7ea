"""The bundle's YAML as the Databricks CLI reads it: `bundle.yml`, every file it includes and the
alert files its resource loader adds (`binlake.bundle.alerts`), validated against the CLI's own
JSON schema (`databricks bundle schema`, kept in `fixtures/databricks-cli-schema`). binlake's own
model (`binlake bundle validate`) checks what binlake knows; this checks every key and value
type the CLI would refuse at deploy, offline."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import regex
import yaml
from jsonschema.exceptions import ValidationError, best_match

from binlake.bundle.alerts import ALERTS_FOLDER

ROOT = Path(__file__).resolve().parents[3]
SCHEMA = ROOT / "fixtures" / "databricks-cli-schema" / "cli-1.13.0-jsonschema.json"


def _go_pattern(
    validator: Any, pattern: str, instance: Any, schema: dict[str, Any]
) -> Iterator[ValidationError]:
    """`pattern` with Go's RE2 classes (`\\p{L}`), which `re` cannot compile and `regex` can."""
    if validator.is_type(instance, "string") and not regex.search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


@cache
def _validator() -> Any:
    cli_validator = jsonschema.validators.extend(
        jsonschema.Draft202012Validator, {"pattern": _go_pattern}
    )
    return cli_validator(json.loads(SCHEMA.read_text()))


def _bundle_files() -> list[Path]:
    """`bundle.yml`, the files its `include` globs name, as the CLI loads them, and the alert
    files, whose alerts the CLI gets from the resource loader."""
    bundle = ROOT / "bundle.yml"
    included = yaml.safe_load(bundle.read_text()).get("include", [])
    alerts = sorted((ROOT / ALERTS_FOLDER).glob("*.yml"))
    return [bundle, *sorted({p for glob in included for p in ROOT.glob(glob)}), *alerts]


def _errors(document: dict[str, Any]) -> list[str]:
    found = list(_validator().iter_errors(document))
    if not found:
        return []
    deepest = best_match(found)
    return [f"{'.'.join(map(str, deepest.absolute_path))}: {deepest.message[:300]}"]


@pytest.mark.parametrize("path", _bundle_files(), ids=lambda p: p.name)
def test_every_bundle_file_is_valid_for_the_databricks_cli(path: Path) -> None:
    assert _errors(yaml.safe_load(path.read_text())) == []


def test_the_include_globs_find_every_resource_file() -> None:
    resources = {p.name for p in (ROOT / "resources").glob("*.yml")}
    assert resources and resources <= {p.name for p in _bundle_files()}


def test_there_are_alert_files_to_check() -> None:
    assert any(p.is_relative_to(ROOT / ALERTS_FOLDER) for p in _bundle_files())


_MISTAKES = {
    "misspelt key": lambda job: job.update(max_concurent_runs=1),
    "string for an integer": lambda job: job.update(max_concurrent_runs="one"),
    "unknown pause status": lambda job: job["continuous"].update(pause_status="SOMETIMES"),
    "task without a key": lambda job: job["tasks"][0].pop("task_key"),
}


@pytest.mark.parametrize("mistake", _MISTAKES)
def test_the_schema_catches_what_the_cli_would_refuse(mistake: str) -> None:
    """The control: the same file with one mistake a deploy would fail on."""
    document = yaml.safe_load((ROOT / "resources" / "silver_stream.job.yml").read_text())
    broken = copy.deepcopy(document)
    _MISTAKES[mistake](broken["resources"]["jobs"]["silver_stream"])
    assert _errors(broken), f"the schema accepted a {mistake}"


_ALERT_MISTAKES = {
    "alert without a warehouse": lambda alert: alert.pop("warehouse_id"),
    "unknown operator": lambda alert: alert["evaluation"].update(comparison_operator="ABOVE"),
    "schedule without a time zone": lambda alert: alert["schedule"].pop("timezone_id"),
}


@pytest.mark.parametrize("mistake", _ALERT_MISTAKES)
def test_the_schema_catches_an_alert_the_cli_would_refuse(mistake: str) -> None:
    path = ROOT / ALERTS_FOLDER / "stream_lag.alert.yml"
    broken = copy.deepcopy(yaml.safe_load(path.read_text()))
    _ALERT_MISTAKES[mistake](broken["resources"]["alerts"]["stream_lag"])
    assert _errors(broken), f"the schema accepted an {mistake}"
