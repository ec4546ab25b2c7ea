"""A stop that a retry cannot fix pauses the Databricks job that runs binlake.

A continuous job restarts a failed run forever (with backoff, on a new cluster each time), and a
scheduled one runs again at its next tick. After a stop that needs a person (a purged binlog
under `on_binlog_purged: stop`, a schema-change stop, an unfinished snapshot, a wrong setting:
`BinlakeError.retry_helps` is false) every restart would fail the same way, and the alert that
matters drowns in repeats. The bundle's tasks pass `--job-id={{job.id}}`; on such a stop binlake
pauses that job's continuous trigger, schedule and file trigger (whichever it has) through the
Jobs API, with the credentials of the identity the run is running as, and logs what it paused.
An operator fixes the cause and unpauses the job. Failures a retry can fix (a source that is
down, a lease another run holds, an unexpected error) leave the job as it is.
"""

from __future__ import annotations

import dataclasses
import logging

from databricks.sdk.service.jobs import JobSettings, PauseStatus

from binlake.errors import BinlakeError, BundleError
from binlake.lake.event_log import event
from binlake.runtime.workspace import Connection, calling, workspace_client

log = logging.getLogger("binlake.jobs.pause")

#: The job settings that start runs by themselves, each with a `pause_status`.
_STARTS_RUNS = ("continuous", "schedule", "trigger")


def pause_after(job_id: str | None, failure: BinlakeError) -> list[str]:
    """Pause job `job_id` when `failure` is one a retry cannot fix; the settings paused. Never
    raises: the stop's own error is what the run must report, so a pause that fails is a warning
    (the job then restarts as before)."""
    if not job_id or failure.retry_helps:
        return []
    try:
        paused = pause_job(int(job_id))
    except (BundleError, ValueError) as exc:
        log.warning("could not pause job %s after a stop a retry cannot fix: %s", job_id, exc)
        return []
    if paused:
        log.warning(
            "paused job %s (%s): it stopped for a reason a retry cannot fix (exit %d); "
            "unpause it once the cause is fixed",
            job_id, ", ".join(paused), failure.exit_code,
            extra=event("job_paused"),
        )  # fmt: skip
    return paused


class JobPause:
    """`pause_after` for one run's job, at most once: inside the job's event recording (so the
    event log says the job was paused), or, for a stop before Spark started, by the CLI."""

    def __init__(self, job_id: str) -> None:
        self.job_id = job_id
        self.done = False

    def __call__(self, failure: BinlakeError) -> None:
        if not self.done:
            self.done = True
            pause_after(self.job_id, failure)


def pause_job(job_id: int) -> list[str]:
    """Set `pause_status: PAUSED` on each of the job's settings that start runs (a job started
    only by hand has none); the names of those paused. Each setting is sent whole, as read,
    since the Jobs API replaces a top-level setting that an update names."""
    client = workspace_client(Connection(()))
    where = client.config.host or "the workspace"
    with calling(f"reading job {job_id}", where):
        settings = client.jobs.get(job_id).settings or JobSettings()
    paused = {
        name: dataclasses.replace(getattr(settings, name), pause_status=PauseStatus.PAUSED)
        for name in _STARTS_RUNS
        if getattr(settings, name) is not None
        and getattr(settings, name).pause_status != PauseStatus.PAUSED
    }
    if paused:
        with calling(f"pausing job {job_id}", where):
            client.jobs.update(job_id, new_settings=JobSettings(**paused))
    return sorted(paused)
