"""Bundles for the bundle tests: the project's (`REPO`), and minimal ones written to a temp
dir."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from binlake.bundle.definition import Bundle, load_bundle

REPO = Path(__file__).resolve().parents[3]
PRINCIPAL = "9f3c2b4e-1d2a-4c1b-8e9f-0a1b2c3d4e5f"
PROD_ENV = {"BUNDLE_VAR_prod_service_principal": PRINCIPAL}


def load(root: Path, target: str | None = None, **options: Any) -> Bundle:
    options.setdefault("environ", PROD_ENV if target == "prod" else {})
    return load_bundle(root, target, **options)


def wheel_task(key: str, *parameters: str, depends_on: tuple[str, ...] = ()) -> dict[str, Any]:
    task: dict[str, Any] = {
        "task_key": key,
        "python_wheel_task": {
            "package_name": "binlake",
            "entry_point": "binlake",
            "parameters": list(parameters),
        },
    }
    if depends_on:
        task["depends_on"] = [{"task_key": name} for name in depends_on]
    return task


def write_bundle(
    root: Path,
    jobs: dict[str, Any],
    variables: dict[str, Any] | None = None,
    targets: dict[str, Any] | None = None,
    **extra: Any,
) -> Path:
    """A minimal bundle with the given targets (one `local` by default) and jobs in
    resources/jobs.yml."""
    document = {
        "bundle": {"name": "demo"},
        "include": ["resources/*.yml"],
        "variables": variables or {},
        "targets": targets or {"local": {"default": True}},
        **extra,
    }
    (root / "bundle.yml").write_text(yaml.safe_dump(document))
    (root / "resources").mkdir(exist_ok=True)
    (root / "resources" / "jobs.yml").write_text(yaml.safe_dump({"resources": {"jobs": jobs}}))
    return root
