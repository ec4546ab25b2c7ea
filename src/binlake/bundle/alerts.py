"""The bundle's Databricks SQL alerts: the alerts of the files in `resources/alerts/`, added where
the bundle variable `alert_warehouse_id` names the SQL warehouse that runs their queries, each
with the `notification_emails` subscribed; where it is empty, none, so a deploy without a
warehouse deploys everything else.

A resource loader of the `databricks-bundles` package, listed under `python.resources` in
bundle.yml: the Databricks CLI calls it at deploy in the bundle's root (its working directory)
and resolves the `${...}` references of what it returns; binlake's bundle loader calls the same
function. The files are not in bundle.yml's `include`, which would deploy them whether or not
there is a warehouse: a mutator cannot remove a resource.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from databricks.bundles.alerts import Alert
from databricks.bundles.core import Bundle, Resources

#: The alert files, relative to the bundle root.
ALERTS_FOLDER = Path("resources") / "alerts"
#: The variable naming the SQL warehouse the alerts run on; empty: no alerts.
WAREHOUSE_VARIABLE = "alert_warehouse_id"
#: The variable listing the addresses each alert notifies.
EMAILS_VARIABLE = "notification_emails"


def sql_alerts(bundle: Bundle) -> Resources:
    """Every alert of `ALERTS_FOLDER` with the `notification_emails` subscribed, if
    `alert_warehouse_id` is set; no resources otherwise. ValueError for a malformed file or
    variable (the CLI shows it as the loader's error, binlake as one line)."""
    resources = Resources()
    if not str(bundle.variables.get(WAREHOUSE_VARIABLE) or "").strip():
        return resources
    emails = _emails(bundle.variables.get(EMAILS_VARIABLE))
    for key, spec in alert_specs(ALERTS_FOLDER).items():
        resources.add_alert(key, Alert.from_dict(subscribed(spec, emails)))  # type: ignore[arg-type]
    return resources


def alert_specs(folder: Path) -> dict[str, dict[str, Any]]:
    """The alerts of the `*.yml` files in `folder`, by key."""
    specs: dict[str, dict[str, Any]] = {}
    for path in sorted(folder.glob("*.yml")):
        for key, spec in _alerts_of(path).items():
            if key in specs:
                raise ValueError(f"alert {key!r} is defined twice (again in {path})")
            specs[key] = spec
    return specs


def _alerts_of(path: Path) -> dict[str, Any]:
    """The file's `resources.alerts`, which is all it may hold."""
    document = yaml.safe_load(path.read_text())
    if not isinstance(document, dict) or list(document) != ["resources"]:
        raise ValueError(f"{path} must hold resources.alerts and nothing else")
    resources = document["resources"]
    if not isinstance(resources, dict) or list(resources) != ["alerts"]:
        raise ValueError(f"{path} must hold resources.alerts and nothing else")
    alerts: dict[str, Any] = resources["alerts"]
    return alerts


def subscribed(spec: dict[str, Any], emails: list[str]) -> dict[str, Any]:
    """`spec` with `emails` added to its notification's subscriptions."""
    evaluation = dict(spec.get("evaluation") or {})
    notification = dict(evaluation.get("notification") or {})
    notification["subscriptions"] = [
        *(notification.get("subscriptions") or []),
        *({"user_email": email} for email in emails),
    ]
    return {**spec, "evaluation": {**evaluation, "notification": notification}}


def _emails(value: Any) -> list[str]:
    if value in (None, ""):
        return []
    if not isinstance(value, list) or not all(isinstance(email, str) for email in value):
        raise ValueError(f"variable {EMAILS_VARIABLE} must be a list of addresses, found {value!r}")
    return value
