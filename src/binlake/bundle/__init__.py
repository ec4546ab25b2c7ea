"""The job bundle: `bundle.yml` and `resources/*.yml`, in the Databricks Asset Bundle format.

- `keys`: the keys the Databricks CLI documents; `definition`: load the files for a target,
  merge the target in, resolve `${...}` (`variables`) and apply mode, presets, run_as and
  permissions (`modes`);
- `workspace`: the SDK client with bounded timeouts, the current user, variable lookups;
- `compute`, `readers`: the mutators the Databricks CLI runs at deploy (the jobs' compute and
  each developer's server ids; the readers of silver); they import nothing of Spark;
- `tasks`: a job's tasks in dependency order and the `binlake` command line of each;
- `validate`: binlake's own checks; `local`: run a job here; `cli`: `binlake bundle
  validate|run-local`. The Databricks CLI deploys the bundle (`databricks bundle deploy`).
"""
