"""The incremental snapshot: chunks planned by key, read in parallel without locks and
corrected by the binlog between their watermarks, committed to bronze and the chunk ledger.
"""
