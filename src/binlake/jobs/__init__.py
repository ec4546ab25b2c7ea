"""The commands users run: the CLI, the entry points it and the bundle's tasks call, the
checks before Spark starts, status, verify and the job pause.
"""
