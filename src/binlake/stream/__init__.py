"""The silver streaming task: the binlog as a Spark source, the high-watermark filter, the
batch sink and the re-snapshots it asks for.
"""
