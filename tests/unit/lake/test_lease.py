"""Leases: one holder at a time, refusals that name it, take-over of a dead holder only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from binlake.errors import LeaseError
from binlake.lake import lease as leases
from binlake.lake.files import ArrowFiles
from binlake.lake.lease import STALE_S, Lease


class Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def lease_at(root: Path, clock: Clock | None = None) -> Lease:
    return Lease(ArrowFiles(), str(root), "snapshot", "a snapshot of this lake", clock or time.time)


def other_holder(lease: Lease, version: int, host: str = "elsewhere", pid: int = 4242) -> None:
    """Another process's version of the lease, as its `create_text` leaves it."""
    holder = {"command": "binlake snapshot", "host": host, "pid": pid, "since": "x", "token": "t"}
    assert lease.files.create_text(lease.version_path(version), json.dumps({"holder": holder}))


def dead_pid() -> int:
    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], check=True,
                           capture_output=True, text=True)  # fmt: skip
    return int(child.stdout)


def test_a_second_taker_is_refused_with_the_holder_named(tmp_path: Path) -> None:
    lease = lease_at(tmp_path)
    with lease.held("binlake snapshot --reset"):
        holder = lease.holder()
        assert holder is not None and holder.pid == os.getpid()
        with pytest.raises(LeaseError) as refused, lease_at(tmp_path).held("binlake snapshot"):
            pass
        message = str(refused.value)
        assert "a snapshot of this lake is running already" in message
        assert f"pid {os.getpid()}" in message and "binlake snapshot --reset" in message
    assert lease.holder() is None, "released when the block ended"
    with lease.held("binlake snapshot") as again:
        assert again.version == 2, "taken, released, taken: versions 0, 1 (release), 2"


def test_released_on_failure(tmp_path: Path) -> None:
    lease = lease_at(tmp_path)
    with pytest.raises(RuntimeError), lease.held("binlake snapshot"):
        raise RuntimeError("the job failed")
    assert lease.holder() is None


def test_a_holder_elsewhere_is_taken_over_only_when_its_heartbeat_is_stale(
    tmp_path: Path,
) -> None:
    clock = Clock()
    lease = lease_at(tmp_path, clock)
    other_holder(lease, 0)
    clock.now += STALE_S - 5
    with pytest.raises(LeaseError, match="pid 4242 on elsewhere"), lease.held("binlake snapshot"):
        pass
    clock.now += 10
    assert lease.holder() is None
    with lease.held("binlake snapshot") as held:
        assert held.version == 1


def test_a_dead_holder_on_this_host_is_taken_over_at_once(tmp_path: Path) -> None:
    import socket

    lease = lease_at(tmp_path)
    other_holder(lease, 0, host=socket.gethostname(), pid=dead_pid())
    with lease.held("binlake snapshot") as held:
        assert held.version == 1


def test_this_pid_in_a_lease_this_process_does_not_hold_is_a_dead_process(tmp_path: Path) -> None:
    """A process that died holding the lease, whose pid this process now has."""
    import socket

    lease = lease_at(tmp_path)
    other_holder(lease, 0, host=socket.gethostname(), pid=os.getpid())
    assert lease.holder() is None


def test_of_takers_racing_exactly_one_wins(tmp_path: Path) -> None:
    takers = 8
    start = threading.Barrier(takers)
    won: list[int] = []
    refused: list[str] = []
    hold = threading.Event()

    def take() -> None:
        start.wait()
        try:
            with lease_at(tmp_path).held("binlake snapshot"):
                won.append(1)
                hold.wait(10)
        except LeaseError as exc:
            refused.append(str(exc))

    threads = [threading.Thread(target=take) for _ in range(takers)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while len(won) + len(refused) < takers and len(refused) < takers - 1:
        assert time.monotonic() < deadline
        time.sleep(0.01)
    hold.set()
    for thread in threads:
        thread.join()
    assert len(won) == 1 and len(refused) == takers - 1


def test_a_holder_taken_over_stops_at_its_next_check(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(leases, "HEARTBEAT_S", 0.05)
    lease = lease_at(tmp_path)
    with lease.held("binlake stream") as held:
        held.check()
        other_holder(lease, held.version + 1)  # it stood still; another process took over
        deadline = time.monotonic() + 5
        while not held.lost:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        with pytest.raises(LeaseError, match="taken over"):
            held.check()
    holder = lease.holder()
    assert holder is not None and holder.host == "elsewhere", "its release undid no one's lease"


def test_the_heartbeat_keeps_a_long_holder_alive(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(leases, "HEARTBEAT_S", 0.05)
    lease = lease_at(tmp_path)
    with lease.held("binlake stream") as held:
        path = lease.version_path(held.version)
        first = lease.files.modified(path)
        time.sleep(0.3)
        later = lease.files.modified(path)
        assert first is not None and later is not None and later > first


def test_old_versions_are_pruned(tmp_path: Path) -> None:
    lease = lease_at(tmp_path)
    for _ in range(10):
        with lease.held("binlake snapshot"):
            pass
    assert len(lease.versions()) <= leases.KEPT_VERSIONS + 2
