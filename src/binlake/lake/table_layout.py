"""Per-table Delta layout (`lake.table_layout`): liquid clustering columns and table properties.

A layout is applied to a table's Delta tables after they exist, by `ALTER TABLE`, not by the
writer that creates them: Delta's DataFrameWriter ignores `clusterBy` on a path table, and an
overwrite (a reset's empty bronze, a silver rebuilt from bronze) keeps the properties but drops
the clustering. So it is applied where those tables are made or replaced (a snapshot's end for
bronze, silver's creation or check at each stream start, the changelog's first append), each
time comparing what the table has (`DESCRIBE DETAIL`) with the config and changing only what
differs; a table without a layout costs nothing. Clustering takes effect for data written (or
`OPTIMIZE`d) after it is set.
"""

from __future__ import annotations

import logging

from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from binlake.config.settings import Config, TableLayout
from binlake.errors import LakeError
from binlake.lake.tables import BRONZE_STATS_COLUMNS, STATS_COLUMNS, LakeTable, column_name
from binlake.model.schema import TableSchema

log = logging.getLogger(__name__)


def apply_layout(
    spark: SparkSession, config: Config, table: TableSchema, target: LakeTable, cluster: bool
) -> None:
    """Give `target` (one of `table`'s Delta tables) the layout of `table`: its properties,
    and its clustering columns where `cluster` (the changelog holds its rows' values in
    structs, so it takes the properties alone)."""
    layout = config.lake.layout_of(table.qualified)
    if layout is None or not target.exists(spark):
        return
    try:
        _apply(spark, target, layout, cluster)
    except PySparkException as exc:
        first = str(exc).strip().splitlines()[0]
        raise LakeError(
            f"lake.table_layout of {table.qualified}: {target} refused it ({first})"
        ) from None


def _apply(spark: SparkSession, target: LakeTable, layout: TableLayout, cluster: bool) -> None:
    detail = spark.sql(f"DESCRIBE DETAIL {target.sql}").first()
    assert detail is not None
    has = dict(detail["properties"] or {})
    changed = {k: v for k, v in layout.properties.items() if has.get(k) != v}
    if changed:
        spark.sql(f"ALTER TABLE {target.sql} SET TBLPROPERTIES ({_pairs(changed)})")
        log.info("%s: table properties %s set (lake.table_layout)", target, sorted(changed))
    if not cluster or not layout.cluster_by:
        return
    columns = set(target.schema(spark).fieldNames())  # type: ignore[union-attr]
    wanted = [c for c in layout.cluster_by if c in columns]
    if missing := [c for c in layout.cluster_by if c not in columns]:
        log.warning("%s has no column %s to cluster by any more", target, ", ".join(missing))
    if stats := _statistics_for(layout, has, wanted):
        spark.sql(f"ALTER TABLE {target.sql} SET TBLPROPERTIES ({_pairs({STATS_COLUMNS: stats})})")
    if wanted and list(detail["clusteringColumns"] or []) != wanted:
        spark.sql(f"ALTER TABLE {target.sql} CLUSTER BY ({', '.join(map(column_name, wanted))})")
        log.info("%s: clustered by %s (lake.table_layout)", target, ", ".join(wanted))


def _statistics_for(layout: TableLayout, has: dict[str, str], clustered: list[str]) -> str | None:
    """The statistics columns a table of binlake's own list (bronze's) needs to be clustered by
    `clustered`: Delta clusters only by columns it has statistics of. None: nothing to change
    (the table keeps Delta's default statistics, the layout sets its own list, or it holds
    them already)."""
    if STATS_COLUMNS not in has or STATS_COLUMNS in layout.properties:
        return None
    wanted = ", ".join([BRONZE_STATS_COLUMNS, *map(column_name, clustered)])
    return wanted if has[STATS_COLUMNS] != wanted else None


def before_schema_overwrite(spark: SparkSession, bronze: LakeTable) -> None:
    """Bronze's statistics columns back to binlake's own before an overwrite that changes its
    schema: a clustering column (or a layout's own list) may name a column the change renames
    or drops, and Delta refuses to overwrite a table whose statistics columns are missing. The
    snapshot's end applies the layout again (`apply_layout`)."""
    detail = spark.sql(f"DESCRIBE DETAIL {bronze.sql}").first()
    stats = dict(detail["properties"] or {}).get(STATS_COLUMNS) if detail else None
    if stats is not None and stats != BRONZE_STATS_COLUMNS:
        reset = _pairs({STATS_COLUMNS: BRONZE_STATS_COLUMNS})
        spark.sql(f"ALTER TABLE {bronze.sql} SET TBLPROPERTIES ({reset})")


def _pairs(properties: dict[str, str]) -> str:
    return ", ".join(f"{_literal(k)} = {_literal(v)}" for k, v in properties.items())


def _literal(text: str) -> str:
    """A SQL string literal (table property names and values come from the config, not from
    the source; still quoted, never spliced)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"
