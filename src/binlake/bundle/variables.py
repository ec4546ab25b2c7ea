"""`${...}` references of a bundle and the values of its variables, as `binlake.bundle.definition`
resolves them (its docstring says which subset of the Databricks CLI's resolution that is).

References name entries of one table (`bundle.name`, `var.<name>`, …) whose values may reference
each other. `{{...}}` is left alone: those are the Jobs service's dynamic value references
(`{{job.parameters.x}}`, `{{secrets/scope/key}}`), resolved when a job runs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from binlake.errors import BundleError

#: `BUNDLE_VAR_<name>` sets variable `<name>`, as with the Databricks CLI.
ENV_PREFIX = "BUNDLE_VAR_"

_REFERENCE = re.compile(r"\$\{([^{}\s]+)\}")


class Interpolator:
    """Resolves references against `table`; each entry is resolved once, cycles are errors."""

    def __init__(self, table: Mapping[str, Any]) -> None:
        self._table = dict(table)
        self._resolved: dict[str, Any] = {}

    def extended(self, table: Mapping[str, Any]) -> Interpolator:
        """An interpolator of this table with `table`'s entries added, keeping what this one has
        resolved already."""
        extended = Interpolator({**self._table, **table})
        extended._resolved = dict(self._resolved)
        return extended

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
    return (
        "binlake does not resolve (it resolves var.*, bundle.name, bundle.target, "
        "workspace.current_user.* and resources.<kind>.<key>.<field>)"
    )


def variable_values(
    declared: Mapping[str, Any],
    target: str,
    target_values: Mapping[str, Any],
    overrides: Mapping[str, str],
    environ: Mapping[str, str],
) -> dict[str, Any]:
    """Each declared variable's value: `overrides` (`--var`), else the environment's
    `BUNDLE_VAR_<name>`, else the target's value, else the variable's default. A `lookup`, which
    the Databricks CLI answers from the workspace at deploy, is the stand-in text
    `lookup(<kind>: <name>)`."""
    where = f"targets.{target}.variables"
    for source, names in ((where, target_values), ("--var", overrides)):
        undeclared = sorted(set(names) - set(declared))
        if undeclared:
            raise BundleError(f"{source} sets {', '.join(undeclared)}, not declared in `variables`")
    values: dict[str, Any] = {}
    for name, spec in declared.items():
        if not isinstance(spec, dict):
            raise BundleError(f"variables.{name} must be a mapping (description, default, …)")
        given = overrides.get(name, environ.get(ENV_PREFIX + name))
        if given is not None and spec.get("type") == "complex":
            raise BundleError(
                f"variable {name!r} is complex: set it in the bundle files, not with --var or "
                f"{ENV_PREFIX}{name}"
            )
        if given is not None:
            values[name] = given
        elif name in target_values:
            values[name] = _value(_target_spec(target_values[name]))
        elif "default" in spec or "lookup" in spec:
            values[name] = _value(spec)
        else:
            raise BundleError(
                f"variable {name!r} has no value for target {target!r}: give it a default, set "
                f"it under {where}, in the environment as {ENV_PREFIX}{name} or with --var "
                f"{name}=VALUE"
            )
    return values


def _target_spec(value: Any) -> dict[str, Any]:
    """A target's variable setting: `{default: …}` or `{lookup: …}`, or the value itself."""
    if isinstance(value, dict) and value and set(value) <= {"default", "lookup"}:
        return value
    return {"default": value}


def _value(spec: Mapping[str, Any]) -> Any:
    if "lookup" not in spec:
        return spec["default"]
    found = spec["lookup"]
    named = ", ".join(f"{kind}: {name}" for kind, name in dict(found or {}).items())
    return f"lookup({named})"
