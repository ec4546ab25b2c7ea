"""The job bundle: `bundle.yml` and `resources/*.yml`, in the Databricks Asset Bundle format,
which the Databricks CLI deploys (`databricks bundle deploy`).

- `compute`, `readers`, `alerts`: the mutators and the resource loader the Databricks CLI runs at
  deploy (the jobs' compute and each developer's server ids; the readers of silver; the SQL
  alerts); they import nothing of Spark;
- `definition`, `variables`: load the files for a target, the subset of the CLI's target
  resolution that a job's tasks depend on (no modes, presets, run_as or permissions);
- `tasks`: a job's tasks in dependency order and the `binlake` command line of each;
- `validate`: binlake's own checks; `local`: run a job here; `cli`: `binlake bundle
  validate|run-local`.
"""
