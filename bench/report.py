"""The result files: <date>.json (nested), <date>.md (a table), <date>.png (rows/s per system),
<date>-profile.txt."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_SYSTEMS = [
    ("client_rows_s", "A: mariadb --quick\n(C client, no write)"),
    ("jdbc_p2_rows_s", "B: Spark JDBC p2\n→ Delta"),
    ("binlake_p1_rows_s", "binlake p1\n→ Delta"),
    ("binlake_p2_rows_s", "binlake p2\n→ Delta"),
    ("binlake_p2_under_load_rows_s", "binlake p2 + 500\nupdates/s → Delta"),
]


def _fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "–"
    if isinstance(value, float | int):
        return f"{value:,.{digits}f}"
    return str(value)


def markdown(r: dict[str, Any]) -> str:
    s, st, m, mc = r["snapshot"], r["stream"], r["memory"], r["machine"]
    samples = s["samples"]
    lines = [
        f"# binlake benchmark {r['date']}",
        "",
        f"{r['rows']:,} rows of a TPC-DS `customer`-shaped table; median of {r['repetitions']} "
        f"repetitions (min–max in brackets); {mc['cores']} cores, {mc['ram_gb']} GB, "
        f"{mc['cpu_model']}; MariaDB {mc['mariadb_version']}; Spark {mc['spark_version']} "
        f"local[2]; load average {mc['loadavg_at_start']} → {mc['loadavg_at_end']}.",
        "",
        "| snapshot | rows/s | vs client (A) | vs Spark JDBC (B) |",
        "|---|---:|---:|---:|",
    ]
    for key, label in _SYSTEMS:
        v = s[key]
        rng = samples.get(key, [])
        span = f" ({min(rng):,.0f}–{max(rng):,.0f})" if rng else ""
        lines.append(
            f"| {label.replace(chr(10), ' ')} | {_fmt(v)}{span} | "
            f"{v / s['client_rows_s']:.2f} | {v / s['jdbc_p2_rows_s']:.2f} |"
        )
    lines += [
        "",
        f"binlake: chunk_size {s['chunk_size']}, {s['chunks']} chunks, chunks_per_commit "
        f"{s['chunks_per_commit']} (effective {s['chunks_per_commit_effective_p2']}); "
        f"concurrent workload achieved {_fmt(s['concurrent_updates_s'])} updates/s.",
        "",
        "| stream | value |",
        "|---|---:|",
        f"| burst applied to silver (available-now) | {_fmt(st['changes_s'])} changes/s "
        f"({st['changes']:,} changes in {st['seconds']} s, {st['batches']} batch(es)) |",
        f"| silver matches source after the burst | {st['silver_matches_source']} |",
        f"| end-to-end latency p50 / p95 (trigger {st.get('trigger_interval')}) | "
        f"{_fmt(st.get('latency_p50_s'), 2)} s / {_fmt(st.get('latency_p95_s'), 2)} s |",
        f"| latency seen by polling silver p50 / p95 | {_fmt(st.get('latency_polled_p50_s'), 2)} s"
        f" / {_fmt(st.get('latency_polled_p95_s'), 2)} s |",
        f"| binlog row images decoded/s: python-mysql-replication / binlake "
        f"| {_fmt(st.get('decode', {}).get('library_images_s'))} / "
        f"{_fmt(st.get('decode', {}).get('binlake_images_s'))} "
        f"({_fmt(st.get('decode', {}).get('speedup'), 2)}×) |",
        "",
        "| memory (peak RSS) | MB |",
        "|---|---:|",
        f"| driver (Python + JVM) | {_fmt(m['driver_peak_mb'])} |",
        f"| Python workers (sum) | {_fmt(m['worker_peak_mb'])} |",
        f"| largest single Python worker | {_fmt(m['worker_single_peak_mb'])} |",
        "",
        "| phase | wall s | machine busy CPU s | JVM CPU s | driver Python CPU s | workers CPU s | mariadbd CPU s |",  # noqa: E501
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for phase, c in r["cpu_by_phase"].items():
        lines.append(
            f"| {phase} | {c['wall_s']} | {c['machine_busy_cpu_s']} | "
            f"{c.get('driver_jvm_cpu_s')} | {c.get('driver_python_cpu_s')} | "
            f"{c.get('workers_cpu_s')} | {c.get('mariadbd_cpu_s')} |"
        )
    return "\n".join(lines) + "\n"


def chart(path: Path, r: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s, st = r["snapshot"], r["stream"]
    labels = [label for _, label in _SYSTEMS] + ["binlake stream\nchanges/s → silver"]
    values = [s[k] for k, _ in _SYSTEMS] + [st["changes_s"]]
    spans = [s["samples"].get(k, [s[k]]) for k, _ in _SYSTEMS] + [[st["changes_s"]]]
    low = [v - min(sp) for v, sp in zip(values, spans, strict=True)]
    high = [max(sp) - v for v, sp in zip(values, spans, strict=True)]
    colors = ["#888888", "#5b8def", "#f0a030", "#e07020", "#c04010", "#40a060"]
    fig, ax = plt.subplots(figsize=(10, 5), dpi=120)
    bars = ax.bar(range(len(values)), values, yerr=[low, high], capsize=4, color=colors)
    for bar, v in zip(bars, values, strict=True):
        ax.annotate(
            f"{v:,.0f}",
            (bar.get_x() + bar.get_width() / 2, v),
            ha="center",
            va="bottom",
            fontsize=8,
            xytext=(0, 3),
            textcoords="offset points",
        )
    ax.set_xticks(range(len(values)), labels, fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("rows/s (log scale; stream: row changes/s)")
    ax.set_title(
        f"binlake {r['date']}: {r['rows']:,} rows, median of {r['repetitions']} "
        f"(bars: min–max), {r['machine']['cores']} cores"
    )
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def write(directory: Path, stamp: str, results: dict[str, Any], profile_text: str) -> list[Path]:
    paths = [directory / f"{stamp}.json", directory / f"{stamp}.md", directory / f"{stamp}.png"]
    paths[0].write_text(json.dumps(results, indent=2, default=str) + "\n")
    paths[1].write_text(markdown(results))
    chart(paths[2], results)
    if profile_text:
        paths.append(directory / f"{stamp}-profile.txt")
        paths[-1].write_text(profile_text)
    return paths
