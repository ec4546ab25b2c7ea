"""Everything that speaks to the source server: connections, prerequisites, the binlog and
its row images, DDL, each table's schema history, lineage and retention.
"""
