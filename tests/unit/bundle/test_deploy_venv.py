"""Deploying needs no Spark: the Databricks CLI runs the bundle's Python code (`python.mutators`
in bundle.yml) in the project's venv, which a deploy-only machine installs without the `local`
extra (docs/bundle.md#deploying-needs-no-spark). So nothing the mutators import, nor any module of
`binlake.bundle`, may import pyspark, py4j, the MySQL drivers or Delta.

The proof runs in a subprocess whose import system refuses those packages: it imports every
module of `binlake.bundle`, then runs `databricks.bundles.build`, the entry point the CLI calls,
over the bundle's jobs for each compute kind, as `databricks bundle deploy` does."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from binlake.bundle.compute import COMPUTE_KINDS

from .bundles import REPO

#: Top-level packages a deploy-only venv need not hold.
SPARK_AND_DRIVERS = ("pyspark", "py4j", "pymysql", "pymysqlreplication", "delta")

_REFUSE = f"""
import importlib, importlib.abc, pkgutil, sys

class Refuse(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {SPARK_AND_DRIVERS!r}:
            raise ImportError(f"deploying imported {{name}}")
        return None

sys.meta_path.insert(0, Refuse())
import binlake.bundle
for module in pkgutil.iter_modules(binlake.bundle.__path__):
    importlib.import_module(f"binlake.bundle.{{module.name}}")
from databricks.bundles.build import main
for folder in sys.argv[1:]:
    files = [f"--{{name}}={{folder}}/{{name}}.json" for name in ("input", "output", "diagnostics")]
    if main(["build", "--phase", "apply_mutators", *files]) != 0:
        sys.exit(f"{{folder}}: " + open(f"{{folder}}/diagnostics.json").read())
"""

PACKAGE = REPO / "src" / "binlake"

_WHOLE_VARIABLE = re.compile(r"^\$\{var\.([A-Za-z0-9_]+)\}$")


def _cli_input(target: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """What the CLI hands `databricks.bundles.build`: the bundle's configuration with its
    resources, the variables' values, `${var.x}` standing alone replaced by its value."""
    config = yaml.safe_load((REPO / "bundle.yml").read_text())
    values = {name: spec.get("default") for name, spec in config["variables"].items()}
    values.update(overrides)

    def resolve(node: Any) -> Any:
        if isinstance(node, dict):
            return {key: resolve(value) for key, value in node.items()}
        if isinstance(node, list):
            return [resolve(value) for value in node]
        match = _WHOLE_VARIABLE.match(node) if isinstance(node, str) else None
        return values[match.group(1)] if match else node

    resources: dict[str, Any] = {}
    for path in sorted((REPO / "resources").glob("*.yml")):
        for kind, items in (yaml.safe_load(path.read_text()).get("resources") or {}).items():
            resources.setdefault(kind, {}).update(resolve(items))
    return {
        "bundle": {"name": config["bundle"]["name"], "target": target},
        "python": config["python"],
        "variables": {name: {"value": value} for name, value in values.items()},
        "resources": resources,
    }


def test_the_bundle_mutators_run_where_spark_and_the_drivers_cannot_be_imported(
    tmp_path: Path,
) -> None:
    """Every compute kind, in one interpreter (`databricks.bundles.build` once per kind)."""
    folders = {compute: tmp_path / compute for compute in COMPUTE_KINDS}
    for compute, folder in folders.items():
        folder.mkdir()
        cli_input = _cli_input("dev", {"compute": compute, "developer": "jd"})
        (folder / "input.json").write_text(json.dumps(cli_input))

    done = subprocess.run(
        [sys.executable, "-c", _REFUSE, *map(str, folders.values())],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr.strip().splitlines()[-1:]
    for compute, folder in folders.items():
        jobs = json.loads((folder / "output.json").read_text())["resources"]["jobs"]
        clusters = [job.get("job_clusters") for job in jobs.values()]
        assert all(clusters) != (compute == "serverless"), compute


def _imported(path: Path) -> set[str]:
    """Every module `path` imports, at any depth of its code (inside functions too)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def _source(module: str) -> Path | None:
    base = PACKAGE.parent / module.replace(".", "/")
    return next((p for p in (base.with_suffix(".py"), base / "__init__.py") if p.is_file()), None)


def test_no_module_binlake_bundle_reaches_imports_spark_or_the_drivers_even_lazily() -> None:
    """The static twin of the test above: it also sees imports inside functions, which a
    mutator could reach on one path only."""
    seen: set[str] = set()
    todo = [f"binlake.bundle.{p.stem}" for p in (PACKAGE / "bundle").glob("*.py")]
    offending: list[str] = []
    while todo:
        module = todo.pop()
        path = _source(module)
        if module in seen or path is None:
            continue
        seen.add(module)
        for name in _imported(path):
            if name.split(".")[0] in SPARK_AND_DRIVERS:
                offending.append(f"{module} imports {name}")
            elif name.startswith("binlake."):
                parts = name.split(".")
                todo.extend(".".join(parts[:n]) for n in range(2, len(parts) + 1))
    assert not offending, offending
