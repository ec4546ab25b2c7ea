"""Applying changes to silver: one MERGE per table per batch, SCD2 history, following a
table's schema changes, routes of shards into one table.
"""
