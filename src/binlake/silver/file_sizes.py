"""How many rows a silver file holds: silver is created in key order, `SILVER_FILE_ROWS` per
file, so each file covers a narrow, disjoint key range that a MERGE of a few keys can find by
the files' key statistics; MERGEs that rewrite the files they touch keep to the same size
(`silver_file_settings`).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from binlake.lake.tables import column_name
from binlake.model.schema import TableSchema

#: Rows per silver file (see `merge.ensure_silver`, `silver_file_settings`).
SILVER_FILE_ROWS = 50_000


def key_ordered(rows: DataFrame, table: TableSchema, bronze_rows: int | None) -> DataFrame:
    """`rows` in key order, in files of disjoint key ranges (see `merge.ensure_silver`): sorted
    in one task where bronze is known to fit one file (`bronze_rows`), else range-partitioned."""
    key = [F.col(column_name(k)) for k in table.key]
    one_file = bronze_rows is not None and bronze_rows <= SILVER_FILE_ROWS
    return (rows.coalesce(1) if one_file else rows.repartitionByRange(*key)).sortWithinPartitions(
        *key
    )


def creation_file_options() -> dict[str, int]:
    """The write option that cuts silver's first files at `SILVER_FILE_ROWS` rows."""
    return {"maxRecordsPerFile": SILVER_FILE_ROWS}


def silver_file_settings() -> dict[str, str]:
    """The session setting that keeps the files a MERGE rewrites (`settings_choice`) to
    `SILVER_FILE_ROWS` rows, as silver's creation lays them out. Delta writes a MERGE's output
    as one file per task, and the rewrite of a few touched files is one task or a few: without
    it, the touched files came back as one, which each later batch touching it rewrote again,
    larger, until one file held most of the table. The rewrite's join sorts each task's rows by
    key. Not for MERGEs that write deletion vectors: they write only the changed rows, and the
    cap made a large MERGE slower (`bench/results/2026-12-05-stream-rewrites.md`; the rewrites'
    own limit and drift: docs/performance.md, `bench/results/rewrite-drift-2026-12-05-cap.md`)."""
    return {"spark.sql.files.maxRecordsPerFile": str(SILVER_FILE_ROWS)}
