"""The static Spark settings binlake's own compute starts with, wherever binlake starts it: a
local session (`spark`), a Spark Connect server, a classic job cluster (`bundle.compute`).

Apart from `spark` because the bundle's job mutators read them at deploy, in a venv that need
not hold pyspark (docs/bundle.md#deploying-needs-no-spark): this module imports nothing.
"""

from __future__ import annotations

#: Generated classes Spark keeps compiled (`spark.sql.codegen.cache.maxEntries`, a static
#: setting; Spark's default is 100). One micro-batch of one table (its summary, changelog append,
#: MERGE and their Delta log reads) generates more than 100 classes, so with the default each
#: batch evicted what the batch before had compiled and compiled it again, in every small MERGE
#: (docs/performance.md#measured-constants). With room for them, a batch compiles
#: only what its literals change (a MERGE's key values, 14 classes) and a replayed or
#: same-shaped batch none. A generated class is tens of KB: 1,000 of them hold tens of MB.
CODEGEN_CACHE_ENTRIES = 1000


def compute_settings() -> dict[str, str]:
    """The static settings binlake's own compute starts with: set when a session or cluster
    starts, never changeable after."""
    return {"spark.sql.codegen.cache.maxEntries": str(CODEGEN_CACHE_ENTRIES)}
