"""Resource sampling: RSS and CPU of the driver (this Python + its JVM), the PySpark Python
workers (`pyspark.daemon` and its forks) and mariadbd, per benchmark phase; machine facts."""

from __future__ import annotations

import os
import platform
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import psutil

MB = 1024 * 1024
CATEGORIES = ("driver_python", "driver_jvm", "workers", "mariadbd", "other")


def _mariadbd() -> psutil.Process | None:
    pid_file = Path(os.environ.get("BINLAKE_DB_DIR", Path(__file__).resolve().parents[1] / ".db"))
    try:
        return psutil.Process(int((pid_file / "mysqld.pid").read_text().strip()))
    except (OSError, ValueError, psutil.Error):
        return None


def _category(proc: psutil.Process, me: int) -> str:
    if proc.pid == me:
        return "driver_python"
    try:  # a short-lived child may end between any two of these calls
        cmd = " ".join(proc.cmdline())
        if "pyspark.daemon" in cmd or "pyspark.worker" in cmd:
            return "workers"
        if proc.name() == "java" or "java" in cmd.split(" ", 1)[0]:
            return "driver_jvm"
    except psutil.Error:
        pass
    return "other"  # the mariadb client, py-spy, shells


class Monitor:
    """A daemon thread sampling every `interval` s; `phase(name)` tags what is running."""

    def __init__(self, interval: float = 0.25) -> None:
        self.interval = interval
        self.me = os.getpid()
        self.db = _mariadbd()
        self._cpu: dict[int, tuple[str, float]] = {}  # pid -> (category, last cpu seconds)
        self.peak_mb: dict[str, float] = {"driver": 0.0, "workers": 0.0, "worker_single": 0.0}
        self.phase_peak_mb: dict[str, dict[str, float]] = {}
        self.phase_cpu: dict[str, dict[str, float]] = {}
        self._phase: str | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="bench-monitor", daemon=True)

    def start(self) -> Monitor:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _procs(self) -> list[tuple[str, psutil.Process]]:
        root = psutil.Process(self.me)
        procs = [("driver_python", root)]
        for child in root.children(recursive=True):
            procs.append((_category(child, self.me), child))
        if self.db is not None:
            procs.append(("mariadbd", self.db))
        return procs

    def sample(self) -> dict[str, float]:
        rss = dict.fromkeys(CATEGORIES, 0.0)
        single = 0.0
        for category, proc in self._procs():
            try:
                with proc.oneshot():
                    mem = proc.memory_info().rss / MB
                    cpu = proc.cpu_times()
                self._cpu[proc.pid] = (category, cpu.user + cpu.system)
            except psutil.Error:
                continue
            rss[category] += mem
            if category == "workers":
                single = max(single, mem)
        driver = rss["driver_python"] + rss["driver_jvm"]
        with self._lock:
            self.peak_mb["driver"] = max(self.peak_mb["driver"], driver)
            self.peak_mb["workers"] = max(self.peak_mb["workers"], rss["workers"])
            self.peak_mb["worker_single"] = max(self.peak_mb["worker_single"], single)
            if self._phase:
                peaks = self.phase_peak_mb.setdefault(self._phase, {"driver": 0.0, "workers": 0.0})
                peaks["driver"] = max(peaks["driver"], driver)
                peaks["workers"] = max(peaks["workers"], rss["workers"])
                for part in ("driver_python", "driver_jvm", "other"):  # the driver's split
                    peaks[part] = max(peaks.get(part, 0.0), rss[part])
        return rss

    def cpu_totals(self) -> dict[str, float]:
        totals = dict.fromkeys(CATEGORIES, 0.0)
        for category, seconds in self._cpu.values():
            totals[category] += seconds
        return totals

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    @contextmanager
    def phase(self, name: str):
        """Tag samples with `name`; record CPU seconds per category and machine-wide busy %."""
        self.sample()
        before, wall0, sys0 = self.cpu_totals(), time.monotonic(), psutil.cpu_times()
        with self._lock:
            self._phase = name
        try:
            yield
        finally:
            with self._lock:
                self._phase = None
            self.sample()
            after, wall, sys1 = self.cpu_totals(), time.monotonic() - wall0, psutil.cpu_times()
            busy = (sum(sys1) - sys1.idle - getattr(sys1, "iowait", 0.0)) - (
                sum(sys0) - sys0.idle - getattr(sys0, "iowait", 0.0)
            )
            used = {k: round(after[k] - before[k], 2) for k in CATEGORIES if k != "other"}
            acc = self.phase_cpu.setdefault(name, {"wall_s": 0.0, "machine_busy_cpu_s": 0.0})
            acc["wall_s"] = round(acc["wall_s"] + wall, 2)
            acc["machine_busy_cpu_s"] = round(acc["machine_busy_cpu_s"] + busy, 2)
            for k, v in used.items():
                acc[f"{k}_cpu_s"] = round(acc.get(f"{k}_cpu_s", 0.0) + v, 2)


def machine(mariadb_version: str, spark_version: str) -> dict[str, object]:
    model = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from importlib.metadata import version

    packages = {}
    for name in ("pyspark", "delta-spark", "pyarrow", "PyMySQL", "mysql-replication", "pandas"):
        try:
            packages[name] = version(name)
        except Exception:
            packages[name] = None
    return {
        "cores": os.cpu_count(),
        "ram_gb": round(psutil.virtual_memory().total / 1024**3, 1),
        "cpu_model": model,
        "mariadb_version": mariadb_version,
        "spark_version": spark_version,
        "python": platform.python_version(),
        "os": platform.platform(),
        "packages": packages,
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
    }
