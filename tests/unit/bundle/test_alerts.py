"""The stream lag alert (resources/alerts/, added by the resource loader
`binlake.bundle.alerts:sql_alerts`): a Databricks SQL alert over the event log that works on every
runtime, deployed where `alert_warehouse_id` names a SQL warehouse and absent without one, with
the query docs/events.md documents, the target's event log table and thresholds, and the
`notification_emails` subscribed."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from databricks.bundles.build import main as build

from binlake.bundle.alerts import sql_alerts
from binlake.errors import BundleError
from binlake.lake.paths import EVENTS_TABLE

from .bundles import REPO, load, wheel_task, write_bundle

WAREHOUSE = "0123456789abcdef"
TARGETS = ["local", "dev", "prod"]


def _alerts(target: str, **variables: Any) -> dict[str, Any]:
    return dict(load(REPO, target, variables=variables).resources.get("alerts", {}))


@pytest.mark.parametrize("target", TARGETS)
def test_the_alert_is_deployed_where_a_warehouse_is_named(target: str) -> None:
    alert = _alerts(target, alert_warehouse_id=WAREHOUSE)["stream_lag"]

    assert alert.warehouse_id == WAREHOUSE
    assert alert.evaluation.source.name == "stale"


@pytest.mark.parametrize("target", TARGETS)
def test_no_alert_is_deployed_without_a_warehouse(target: str) -> None:
    assert _alerts(target) == {}


def test_the_alert_reads_the_targets_event_log_at_its_thresholds() -> None:
    alert = _alerts(
        "prod",
        alert_warehouse_id=WAREHOUSE,
        catalog="lakehouse",
        source_database="orders",
        stream_warn_lag_s="120",
        stream_warn_idle_s="1800",
    )["stream_lag"]

    query = " ".join(alert.query_text.split())
    assert f"FROM lakehouse.silver_orders.{EVENTS_TABLE} " in query
    assert "coalesce(lag_s > 120, false)" in query
    assert "INTERVAL 1800 SECONDS" in query


def test_the_alert_is_the_query_the_event_log_docs_document() -> None:
    """docs/events.md's alert is written for `main.silver_shop` and the default thresholds."""
    docs = (REPO / "docs" / "events.md").read_text()
    section = docs[docs.index("## An alert") :]
    documented = re.search(r"```sql\n(.*?)```", section, re.DOTALL)
    assert documented is not None

    alert = _alerts("prod", alert_warehouse_id=WAREHOUSE, catalog="main")["stream_lag"]
    assert alert.query_text == documented.group(1)


def test_the_alert_notifies_the_notification_emails() -> None:
    alert = _alerts("prod", alert_warehouse_id=WAREHOUSE)["stream_lag"]

    notification = alert.evaluation.notification
    assert [s.user_email for s in notification.subscriptions] == ["binlake-oncall@example.com"]
    assert notification.notify_on_ok


def _cli_input(warehouse: str) -> dict[str, Any]:
    """What the CLI hands `databricks.bundles.build` for `load_resources`: the configuration
    before any resource loader ran, with the variables' values."""
    config = yaml.safe_load((REPO / "bundle.yml").read_text())
    values = {name: spec.get("default") for name, spec in config["variables"].items()}
    values["alert_warehouse_id"] = warehouse
    return {
        "bundle": {"name": config["bundle"]["name"], "target": "dev"},
        "python": config["python"],
        "variables": {name: {"value": value} for name, value in values.items()},
        "resources": {},
    }


@pytest.mark.parametrize("warehouse", ["", WAREHOUSE])
def test_the_cli_loads_the_alert_from_the_bundle_root_only_with_a_warehouse(
    warehouse: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The entry point the Databricks CLI runs, in the bundle root as the CLI runs it; the CLI
    resolves the `${...}` it leaves."""
    files = {name: tmp_path / f"{name}.json" for name in ("input", "output", "diagnostics")}
    files["input"].write_text(json.dumps(_cli_input(warehouse)))
    monkeypatch.chdir(REPO)

    code = build(["build", "--phase", "load_resources", *(f"--{n}={p}" for n, p in files.items())])

    assert code == 0, files["diagnostics"].read_text()
    alerts = json.loads(files["output"].read_text())["resources"].get("alerts", {})
    assert list(alerts) == (["stream_lag"] if warehouse else [])
    if warehouse:
        assert alerts["stream_lag"]["warehouse_id"] == "${var.alert_warehouse_id}"


def test_malformed_notification_emails_are_one_clear_error(tmp_path: Path) -> None:
    variables = {
        "alert_warehouse_id": {"default": WAREHOUSE},
        "notification_emails": {"default": "oncall@example.com"},
    }
    python = {"resources": [f"{sql_alerts.__module__}:{sql_alerts.__name__}"]}
    job = {"name": "j", "tasks": [wheel_task("t", "status")]}
    write_bundle(tmp_path, {"j": job}, variables=variables, python=python)

    with pytest.raises(BundleError, match=r"python\.resources\[0\] .*notification_emails"):
        load(tmp_path)
