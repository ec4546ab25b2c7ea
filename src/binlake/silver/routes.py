"""Routes (`silver.routes`): the shards of one table, in several databases or under several
names, merged into one silver table.

Bronze and the changelog stay one per source table: they are where a table lands as it is, and
the ledger's chunks, the snapshot's high watermarks and the changelog's offsets are a source
table's own. The route's silver holds every member's rows, its key led by `_source_db` and
`_source_table`, so equal keys of two shards stay two rows. Every step silver takes for one
table takes only its member's rows: the MERGE (its condition names the member, its inserts carry
the member's names), the rows a join replaces, a TRUNCATE, a table created again, a column's
default. Members of one silver table are written one after another (two MERGEs into one Delta
table would conflict), tables of different silvers side by side.

Their schemas are reconciled as schema changes are: a column any member has is silver's (NULL in
the rows of members without it), a column two members type differently is widened in place to
hold both (Delta type widening), and types of which neither holds the other are refused. A
member's DDL only ever adds or widens: its dropped column stays (other members may hold it),
its renamed column is added under the new name, as `stream.schema_changes: lenient` does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from binlake.config.settings import Config
from binlake.errors import SchemaChangeError
from binlake.lake.paths import SOURCE_DB, SOURCE_TABLE
from binlake.lake.tables import LakeTable, column_mapping, column_name, enable_column_mapping, widen
from binlake.model.capture import split_qualified
from binlake.mysql.schema_changes import widens


@dataclass(frozen=True)
class Member:
    """A routed source table: its rows in its route's silver are those naming it."""

    database: str
    table: str

    @property
    def rows(self) -> Column:
        """Silver's rows of this member (a target-only predicate: literals, never SQL text)."""
        return (F.col(SOURCE_DB) == F.lit(self.database)) & (
            F.col(SOURCE_TABLE) == F.lit(self.table)
        )

    def values(self) -> dict[str, Column]:
        """The route columns of a row this member inserts, as MERGE assignments."""
        return {SOURCE_DB: F.lit(self.database), SOURCE_TABLE: F.lit(self.table)}

    def columns(self) -> list[Column]:
        """The route columns, to select before a member's rows."""
        return [value.alias(name) for name, value in self.values().items()]


def member_of(config: Config, table: str) -> Member | None:
    """`table` ("db.table") as a member of its route; None when it lands in a silver of its
    own."""
    if config.silver.route_of(table) is None:
        return None
    return Member(*split_qualified(table))


def silver_name(config: Config, table: str) -> tuple[str, str]:
    """The (database, table) naming the silver table `table` ("db.table") lands in."""
    return split_qualified(config.silver.route_of(table) or table)


def group_by_silver(config: Config, tables: Iterable[str]) -> list[list[str]]:
    """`tables` ("db.table") grouped by the silver table they land in, in their order: the
    members of one group must be written one after another."""
    groups: dict[tuple[str, str], list[str]] = {}
    for table in tables:
        groups.setdefault(silver_name(config, table), []).append(table)
    return list(groups.values())


def reconcile(
    spark: SparkSession,
    silver: LakeTable,
    held: T.StructType,
    member: str,
    fields: Iterable[T.StructField],
) -> None:
    """Silver takes the columns `fields` of member `member` ("db.table") (see
    `reconciliation`), before any row of the member is written."""
    silver_fields = {f.name.lower(): f for f in held.fields}
    for field, action in reconciliation(held, fields):
        if action == "refuse":
            own = silver_fields[field.name.lower()]
            raise SchemaChangeError(
                f"silver.routes merges {member} into {silver}, whose column {own.name} is "
                f"{own.dataType.simpleString()}, and {member}'s {field.name} is "
                f"{field.dataType.simpleString()}: neither type holds the other's values. "
                "Give the shards one type for it, or route this table elsewhere"
            )
        if action == "add":
            if column_mapping([field.name]):
                enable_column_mapping(spark, silver)
            kind = field.dataType.simpleString()
            spark.sql(f"ALTER TABLE {silver.sql} ADD COLUMNS ({column_name(field.name)} {kind})")
        else:
            widen(spark, silver, column_name(field.name), field.dataType)


def reconciliation(
    held: T.StructType, fields: Iterable[T.StructField]
) -> list[tuple[T.StructField, Literal["add", "widen", "refuse"]]]:
    """What silver's columns `held` need to take a member's `fields`: a column silver lacks is
    added, one it holds narrower is widened (names compare case-insensitively, as Spark's and
    MySQL's do); one it holds as wide or wider needs nothing, and types neither of which holds
    the other's values are refused."""
    by_name = {f.name.lower(): f.dataType for f in held.fields}
    needed: list[tuple[T.StructField, Literal["add", "widen", "refuse"]]] = []
    for field in fields:
        own = by_name.get(field.name.lower())
        if own is None:
            needed.append((field, "add"))
        elif own == field.dataType or widens(field.dataType, own):
            continue
        elif widens(own, field.dataType):
            needed.append((field, "widen"))
        else:
            needed.append((field, "refuse"))
    return needed
