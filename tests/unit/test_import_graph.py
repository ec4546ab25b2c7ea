"""binlake's packages stand on each other in one order: a module imports from its own package or
from a package below it, never from one above, and no modules import each other in a circle.

A circle forces imports inside functions and blurs where a module belongs; an import running up
means a lower room (say, the lake) knows about a higher one (say, the stream), so it can no longer
be read, tested or changed on its own.
"""

from __future__ import annotations

import ast
import re
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "binlake"

#: binlake's packages from the ground floor up; `binlake.errors` is below them all and
#: `binlake.__main__` above them all. docs/architecture.md says what each holds.
FLOORS = (
    "model",
    "runtime",
    "config",
    "lake",
    "bundle",
    "mysql",
    "snapshot",
    "silver",
    "stream",
    "jobs",
)


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """The binlake modules `path` imports at any depth of its code."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("binlake"):
            found.add(node.module)
            found.update(
                f"{node.module}.{a.name}"
                for a in node.names
                if (PACKAGE.parent / node.module.replace(".", "/") / f"{a.name}.py").exists()
            )
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("binlake"))
    return found


def _floor(module: str) -> int:
    """Where `module` stands: -1 the ground (`binlake`, `binlake.errors`), len(FLOORS) the roof."""
    parts = module.split(".")
    if len(parts) == 1 or parts[1] == "errors":
        return -1
    if parts[1] == "__main__":
        return len(FLOORS)
    return FLOORS.index(parts[1])


def _graph() -> dict[str, set[str]]:
    return {_module(p): _imports(p) - {_module(p)} for p in PACKAGE.rglob("*.py")}


def test_every_module_stands_on_a_known_floor() -> None:
    strays = [m for m in _graph() if len(m.split(".")) > 2 and m.split(".")[1] not in FLOORS]
    assert not strays, f"modules in no package of FLOORS: {strays}"


def test_no_module_imports_from_a_package_above_its_own() -> None:
    upward = [
        f"{module} -> {target}"
        for module, targets in _graph().items()
        for target in targets
        if _floor(target) > _floor(module)
    ]
    assert not upward, "imports running up:\n" + "\n".join(sorted(upward))


def test_the_modules_import_each_other_without_a_circle() -> None:
    try:
        tuple(TopologicalSorter(_graph()).static_order())
    except CycleError as exc:
        raise AssertionError(f"import circle: {' -> '.join(exc.args[1])}") from None


def test_the_architecture_tour_names_every_module() -> None:
    """docs/architecture.md lists each package's modules: a module added, moved or renamed without
    the tour following it fails here, so the tour cannot drift from the code."""
    tour = (PACKAGE.parents[1] / "docs" / "architecture.md").read_text()
    sections = dict(re.findall(r"^### binlake\.(\w+)\n(.*?)(?=^### |\Z)", tour, re.M | re.S))
    missing = [
        f"binlake.{package}.{module.stem}"
        for package in FLOORS
        for module in sorted((PACKAGE / package).glob("*.py"))
        if module.stem != "__init__" and f"`{module.stem}`" not in sections.get(package, "")
    ]
    assert set(sections) >= set(FLOORS), (
        f"packages without a section: {set(FLOORS) - set(sections)}"
    )
    assert not missing, f"modules docs/architecture.md does not name in their package: {missing}"
