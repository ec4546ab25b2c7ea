"""What binlake runs on: the Spark session (local, Spark Connect or a Databricks runtime) and
the Databricks workspace client.
"""
