"""Plain value types with no I/O: binlog offsets, table schemas, the type map, row changes
and which tables a job captures. Every other package stands on these.
"""
