"""Leases: one process at a time on a chunk ledger, and on a stream job's checkpoint.

Two snapshots planning one ledger at once write two plans for a table (and one of them dies on
Delta's concurrent-commit checks); two streams on one checkpoint apply each change twice and
evict each other's binlog reader. So each of those jobs holds a lease in the lake while it runs,
and a second process refuses at once, naming the holder.

A lease is a folder of versions under `_system/leases/<name>/`, `<n>.json`, the newest one in
force: a holder's record, or a release. A process takes the lease by creating the next version,
which of racing creators exactly one can (`LakeFiles.create_text`); it holds it by rewriting its
version every `HEARTBEAT_S` (the file's modification time is the heartbeat); it gives it back by
creating a release after it. A holder that died leaves its version in force: it is taken over at
once when it ran on this host and its process is gone, otherwise when its heartbeat is
`STALE_S` old. A holder that finds a newer version than its own was taken over (it stood still
longer than `STALE_S`) and stops before its next commit (`HeldLease.check`).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime

from binlake.config.settings import Config
from binlake.errors import LeaseError
from binlake.lake.files import ArrowFiles, LakeFiles, join, local_path
from binlake.lake.paths import leases_root

log = logging.getLogger(__name__)

#: A holder rewrites its version this often.
HEARTBEAT_S = 10.0
#: A holder on another host whose heartbeat is this old is gone.
STALE_S = 60.0
#: Versions kept behind the newest (older ones are removed by whoever creates a version).
KEPT_VERSIONS = 3
#: The leases this process holds: its own pid in a lease without one of these is a process
#: that died before this one took its pid.
_HELD: set[str] = set()


@dataclass(frozen=True)
class Holder:
    """Who holds a lease: which command, in which process on which host, since when."""

    command: str
    host: str
    pid: int
    since: str
    token: str

    @classmethod
    def of_this_process(cls, command: str) -> Holder:
        since = datetime.now(UTC).isoformat(timespec="seconds")
        return cls(command, socket.gethostname(), os.getpid(), since, uuid.uuid4().hex)

    def __str__(self) -> str:
        return f"`{self.command}` (pid {self.pid} on {self.host}, since {self.since})"

    def gone_here(self) -> bool:
        """Whether the holder ran on this host and its process is gone."""
        if self.host != socket.gethostname():
            return False
        if self.pid == os.getpid():
            return self.token not in _HELD
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:  # alive, another user's
            return False
        return False


class Lease:
    """The lease `name` under `folder` of the work `what` (for messages), read and taken
    through `files`."""

    def __init__(
        self,
        files: LakeFiles,
        folder: str,
        name: str,
        what: str,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.files = files
        self.path = join(folder, name)
        self.name = name
        self.what = what
        self.clock = clock

    def holder(self) -> Holder | None:
        """The live holder of the lease; None if no one holds it (never taken, released, or its
        holder is gone)."""
        version, holder = self._newest()
        if holder is None or self._gone(version, holder):
            return None
        return holder

    def refuse_if_held(self) -> None:
        """Raise `LeaseError` naming the holder if a live process holds the lease."""
        holder = self.holder()
        if holder is not None:
            raise self._refusal(holder)

    @contextmanager
    def held(self, command: str) -> Iterator[HeldLease]:
        """Hold the lease while the block runs `command`, with a heartbeat; released when the
        block ends, however it ends."""
        held = self._take(command)
        try:
            yield held
        finally:
            held.release()

    def _take(self, command: str) -> HeldLease:
        me = Holder.of_this_process(command)
        while True:
            version, holder = self._newest()
            if holder is not None and not self._gone(version, holder):
                raise self._refusal(holder)
            if holder is not None:
                log.warning("taking over the lease %s from %s, which is gone", self.name, holder)
            _HELD.add(me.token)
            if self.files.create_text(self.version_path(version + 1), _record(me)):
                self._prune(version + 1)
                return HeldLease(self, version + 1, me)
            _HELD.discard(me.token)  # another process created that version first: look again

    def _gone(self, version: int, holder: Holder) -> bool:
        if holder.gone_here():
            return True
        beat = self.files.modified(self.version_path(version))
        return beat is None or self.clock() - beat > STALE_S

    def _refusal(self, holder: Holder) -> LeaseError:
        return LeaseError(
            f"{self.what} is running already: {holder} holds its lease {self.path}. Wait for it to "
            f"end, or stop it; a holder that died without a trace on this host is taken over "
            f"once its heartbeat is {STALE_S:.0f} s old"
        )

    def _newest(self) -> tuple[int, Holder | None]:
        """(newest version, its holder: None if released); (-1, None) if never taken."""
        versions = self.versions()
        if not versions:
            return -1, None
        newest = versions[-1]
        text = self.files.read_text(self.version_path(newest))
        if text is None:  # pruned after this listing: a newer version exists
            return self._newest()
        record = json.loads(text)
        return newest, (Holder(**record["holder"]) if record.get("holder") else None)

    def versions(self) -> list[int]:
        return sorted(
            int(n.removesuffix(".json"))
            for n in self.files.names(self.path)
            if n.endswith(".json") and n.removesuffix(".json").isdigit()
        )

    def version_path(self, version: int) -> str:
        return join(self.path, f"{version:010d}.json")

    def _prune(self, newest: int) -> None:
        for version in self.versions():
            if version < newest - KEPT_VERSIONS:
                self.files.delete(self.version_path(version))


class HeldLease:
    """A lease this process holds: its heartbeat thread, `check` before a commit, `release`."""

    def __init__(self, lease: Lease, version: int, holder: Holder) -> None:
        self.lease = lease
        self.version = version
        self.holder = holder
        self.lost = False
        self._stop = threading.Event()
        self._beat = threading.Thread(
            target=self._heartbeat, name=f"binlake-lease-{lease.name}", daemon=True
        )
        self._beat.start()

    def check(self) -> None:
        """Raise `LeaseError` if another process took the lease over: this one stood still
        longer than `STALE_S`, and its next commit could undo the other's."""
        if self.lost:
            raise LeaseError(
                f"the lease {self.lease.path} was taken over while this process stood still "
                f"(no heartbeat for {STALE_S:.0f} s): it stops here; the other process goes on"
            )

    def release(self) -> None:
        self._stop.set()
        self._beat.join()
        try:
            if self._still_mine():
                release = self.lease.version_path(self.version + 1)
                self.lease.files.create_text(release, _record(None))
        finally:
            _HELD.discard(self.holder.token)

    def _heartbeat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                if not self._still_mine():
                    self.lost = True
                    log.error("lease %s was taken over by another process", self.lease.name)
                    return
                mine = self.lease.version_path(self.version)
                self.lease.files.write_text(mine, _record(self.holder))
            except Exception as exc:  # a failed beat is retried; staleness takes a minute
                log.warning("lease %s: heartbeat failed (%s)", self.lease.name, exc)

    def _still_mine(self) -> bool:
        versions = self.lease.versions()
        return bool(versions) and versions[-1] == self.version


def snapshot_lease(files: LakeFiles, config: Config) -> Lease:
    """The lease of the lake's chunk ledger: every snapshot, `--reset` included, holds it."""
    return Lease(files, leases_root(config), "snapshot", "a snapshot of this lake")


def stream_lease(files: LakeFiles, config: Config, job: str | None = None) -> Lease:
    """The lease of a stream job's checkpoint (`stream.job_name`, or `job`)."""
    job = job or config.stream.job_name
    return Lease(files, leases_root(config), f"stream-{job}", f"the stream job {job!r}")


def refuse_if_running(config: Config, command: str) -> None:
    """Refuse `command` (snapshot, stream, run) before anything else, if another process runs
    the work it would do: preflight's binlog dump takes the server id of the job's own first
    reader, and would evict the running one's. A lake on an object store is checked when its
    job takes the lease, through Spark and its credentials."""
    if local_path(config.lake.root) is None:
        return
    files = ArrowFiles()
    leases = {
        "snapshot": [snapshot_lease(files, config)],
        "stream": [stream_lease(files, config)],
        "run": [snapshot_lease(files, config), stream_lease(files, config)],
    }
    for lease in leases.get(command, []):
        lease.refuse_if_held()


def _record(holder: Holder | None) -> str:
    return json.dumps({"holder": asdict(holder) if holder else None})
