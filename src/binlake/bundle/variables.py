"""`${...}` references of a bundle, resolved the way the Databricks CLI resolves them at deploy.

References name entries of one table (`bundle.name`, `bundle.target`, `workspace.root_path`,
`var.<name>`, …) whose values may reference each other. `{{...}}` is left alone: those are the
Jobs service's dynamic value references (`{{job.parameters.x}}`, `{{secrets/scope/key}}`),
resolved when a job runs, not when it is deployed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from binlake.bundle.errors import BundleError

_REFERENCE = re.compile(r"\$\{([^{}\s]+)\}")


class Interpolator:
    """Resolves references against `table`; each entry is resolved once, cycles are errors."""

    def __init__(self, table: Mapping[str, Any]) -> None:
        self._table = dict(table)
        self._resolved: dict[str, Any] = {}

    def resolve(self, value: Any, where: str) -> Any:
        """`value` with every reference replaced, recursively through mappings and lists.

        A string that is exactly one reference takes the referenced value with its type
        (`num_workers: ${var.num_workers}` stays an int); a reference inside a longer string is
        formatted into it.
        """
        return self._resolve(value, where, ())

    def _resolve(self, value: Any, where: str, chain: tuple[str, ...]) -> Any:
        if isinstance(value, dict):
            return {key: self._resolve(item, where, chain) for key, item in value.items()}
        if isinstance(value, list):
            return [self._resolve(item, where, chain) for item in value]
        if not isinstance(value, str):
            return value
        whole = _REFERENCE.fullmatch(value)
        if whole:
            return self._lookup(whole.group(1), where, chain)
        return _REFERENCE.sub(lambda m: _text(self._lookup(m.group(1), where, chain)), value)

    def _lookup(self, name: str, where: str, chain: tuple[str, ...]) -> Any:
        if name in self._resolved:
            return self._resolved[name]
        if name in chain:
            cycle = " → ".join(f"${{{n}}}" for n in (*chain[chain.index(name) :], name))
            raise BundleError(f"references form a cycle: {cycle}")
        if name not in self._table:
            raise BundleError(
                f"{where} references ${{{name}}}, which {_unknown(name, self._table)}"
            )
        value = self._resolve(self._table[name], f"${{{name}}}", (*chain, name))
        self._resolved[name] = value
        return value


def _text(value: Any) -> str:
    """How a value reads inside a longer string: YAML's spelling for booleans and null."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _unknown(name: str, table: Mapping[str, Any]) -> str:
    if name.startswith("var."):
        return "is not declared under `variables` in bundle.yml"
    if name.startswith("workspace."):
        known = sorted(n for n in table if n.startswith("workspace."))
        if not known:
            return "this target cannot provide: it has no `workspace` with a root_path"
        return f"is not one of {', '.join(known)}"
    known = sorted({n.split(".")[0] + ".*" for n in table})
    return f"binlake cannot resolve (it resolves {', '.join(known)})"
