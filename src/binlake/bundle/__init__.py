"""The job bundle: `bundle.yml` and `resources/*.yml`, in the Databricks Asset Bundle format.

- `definition`: load the files for a target and resolve `${...}` references;
- `tasks`: a job's tasks in dependency order and the `binlake` command line of each;
- `validate`: offline checks; `local`: run a job here; `deploy`: create or update it on a
  workspace; `cli`: `binlake bundle validate|run|deploy`.
"""
