"""Who may read silver: the bundle variable `silver_readers`, granted on every silver schema the
bundle declares, after the grant of the identity the jobs run as.

A schema's `grants` in a bundle are authoritative: each deploy sets them to exactly the list the
bundle holds, revoking any other. So a reader granted by hand (`GRANT SELECT ...`) would lose
it at the next deploy; readers named in this variable keep theirs. A schema mutator of the
`databricks-bundles` package, listed under `python.mutators` in bundle.yml: the Databricks CLI
runs it at deploy and binlake's bundle loader runs the same function.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from databricks.bundles.core import Bundle, schema_mutator
from databricks.bundles.schemas import Schema, SchemaGrant

#: The variable holding the reader grants: a list of `{principal, privileges}`.
READERS_VARIABLE = "silver_readers"


@schema_mutator
def silver_readers(bundle: Bundle, schema: Schema) -> Schema:
    """`schema` with the readers' grants added if it is a silver schema (named
    `<silver_schema>_...`, the variable `silver_schema`); any other schema unchanged."""
    readers = reader_grants(bundle.variables.get(READERS_VARIABLE))
    prefix = f"{bundle.variables.get('silver_schema') or ''}_"
    if not readers or not str(schema.name).startswith(prefix):
        return schema
    grants = schema.grants if isinstance(schema.grants, list) else []
    return dataclasses.replace(schema, grants=[*grants, *readers])


def reader_grants(value: Any) -> list[SchemaGrant]:
    """The grants `silver_readers` names; ValueError naming the entry for a malformed one (the
    CLI shows it as the mutator's error, binlake as one line)."""
    if value in (None, ""):
        return []
    if not isinstance(value, list):
        raise ValueError(
            f"variable {READERS_VARIABLE} must be a list of {{principal, privileges}}, "
            f"found {value!r}"
        )
    grants = []
    for index, entry in enumerate(value):
        where = f"variable {READERS_VARIABLE}[{index}]"
        if not isinstance(entry, dict) or not entry.get("principal"):
            raise ValueError(f"{where} needs a principal (a user, group or service principal)")
        privileges = entry.get("privileges")
        if not isinstance(privileges, list) or not privileges:
            raise ValueError(f"{where} needs privileges, a list such as [USE_SCHEMA, SELECT]")
        grants.append(
            SchemaGrant.from_dict({"principal": entry["principal"], "privileges": privileges})
        )
    return grants
