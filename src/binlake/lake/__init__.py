"""Where bronze, the changelog, silver and binlake's own files live, and how each is written:
paths, Delta tables, small files, the event log, leases, table layout.
"""
