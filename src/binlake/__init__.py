"""binlake: Flink CDC 2.0's lock-free incremental snapshot, rebuilt on PySpark and Delta Lake."""

__version__ = "0.1.0"
