"""Write docs/benchmarks.md and its plot from the JSON the bench_*.py scripts wrote, then fail when
a figure is older than the code it measures (scripts/bench_freshness.py says which code that is).

    .venv/bin/python scripts/bench_report.py docs/bench-results docs/benchmarks.md docs/benchmarks.png
    .venv/bin/python scripts/bench_report.py check [docs/bench-results]    # only the staleness check
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench_freshness import describe, stale


def load(folder: Path, name: str) -> dict | None:
    path = folder / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def maintenance_rows(m: dict | None, acks: dict | None = None) -> list[tuple[str, str, str, float | None, float | None, bool]]:
    """scripts/bench_maintenance.py: an hour of ingest at ten commits a second, simulated; with
    --acks, what maintenance costs the producers of the table it maintains."""
    out = []
    if acks:
        kept, plain = acks["maintained"], acks["write_only"]
        out += [
            ("maintenance", f"ack p50 into a maintained table ({acks['rate_batches_s']} x {acks['rows_per_batch']}-row "
             f"batches/s, {acks['commit_interval_ms']} ms commits)",
             f"{kept['p50_ms']:.0f} ms, p99 {kept['p99_ms']:.0f} (write-only table: {plain['p50_ms']:.0f} / "
             f"{plain['p99_ms']:.0f} ms)", kept["p50_ms"], 100, True),
            ("maintenance", "longest compaction commit between two group commits / the commit interval",
             f"{kept['compaction_commit_ms_max']:.0f} ms of {acks['commit_interval_ms']} "
             f"({kept['compaction_commits']} compaction commits)",
             kept["compaction_commit_ms_max"] / acks["commit_interval_ms"], 1, True),
        ]
    if not m:
        return out
    last = m["samples"][-1]
    return out + [
        ("maintenance", "full read of a maintained table / the same rows in one commit, worst sample (settled)",
         f"{m['worst_kept_vs_one_commit']:.2f}x (unmaintained: {last['raw_vs_one_commit']:.0f}x after "
         f"{last['commits']} commits)", m["worst_kept_vs_one_commit"], 1.2, True),
        ("maintenance", "ingest commits/s with maintenance / without (median of alternating rounds)",
         f"ratio {m['throughput_ratio_median']:.2f} ({m['commits_per_s_kept']:.0f} / {m['commits_per_s_raw']:.0f})",
         m["throughput_ratio_median"], 0.9, False),
        ("maintenance", "full read while maintenance catches up after 500 commits / one commit, worst (reported)",
         f"{m['worst_busy_kept_vs_one_commit']:.2f}x (docs/benchmarks_maintenance.md)",
         None, None, False),
        ("maintenance", "snapshots kept / live data files after the simulated hour (reported)",
         f"{last['kept_snapshots']} / {last['kept_files']} (unmaintained: {last['raw_snapshots']} / "
         f"{last['raw_files']})", None, None, False),
    ]


def rows(push, paimon, spark, security=None) -> list[tuple[str, str, str, float | None, float | None, bool]]:
    """(area, measurement, figure text, ratio-to-target value, target, lower-is-better)."""
    out = []
    if push:
        t, lat, rss = push["throughput"], push["latency"], push["rss"]
        out += [
            ("push", "end-to-end / raw do_put throughput",
             f"ratio {t['ratio']:.2f} ({t['end_to_end_mib_s']:.0f} / {t['baseline_mib_s']:.0f} MiB/s)",
             t["ratio"], 0.8, False),
        ]
        if "ratio_to_bridge" in t:
            out.append(("push", "end-to-end / minimal bridge (do_put -> queue -> RecordBatchStream)",
                        f"ratio {t['ratio_to_bridge']:.2f} ({t['end_to_end_mib_s']:.0f} / {t['bridge_mib_s']:.0f} MiB/s)",
                        t["ratio_to_bridge"], 0.95, False))
        if "ratio_plain_consumer" in t:
            out.append(("push", "same, consumer on glibc's malloc defaults",
                        f"ratio {t['ratio_plain_consumer']:.2f} ({t['end_to_end_plain_consumer_mib_s']:.0f} / "
                        f"{t['baseline_mib_s']:.0f} MiB/s)",
                        t["ratio_plain_consumer"], 0.8, False))
        out += [
            ("push", "write -> consumer latency p99 at 1000 batches/s (ms)",
             f"p50 {lat['p50_ms']:.2f}, p99 {lat['p99_ms']:.2f}", lat["p99_ms"], 5.0, True),
            ("push", f"server RSS growth pushing {rss['pushed_gib']:.1f} GiB, stalled consumer (MiB)",
             f"{rss['growth_mib']:.0f} (idle {rss['idle_rss_mib']:.0f}, peak {rss['peak_rss_mib']:.0f})",
             rss["growth_mib"], rss["bound_growth_mib"], True),
        ]
    if paimon:
        a, pk, f = paimon.get("append", {}), paimon.get("pk", {}), paimon.get("follow", {})
        if "ratio" in a:
            out.append(("paimon", "4-bucket parallel Flight read / pypaimon one process",
                        f"ratio {a['ratio']:.2f}" + (f" (/ pypaimon native {a['ratio_native']:.2f})"
                                                    if "ratio_native" in a else "")
                        + (f"; the Flight read's CPU / 2 cores allows at most {a['ceiling_ratio']:.2f}"
                           if "ceiling_ratio" in a else ""), a["ratio"], 0.9, False))
        h = paimon.get("history", {})
        if "ratio" in h:
            out.append(("paimon", f"same, table of {h.get('commits', '?')} commits",
                        f"ratio {h['ratio']:.2f} (/ pypaimon native {h['ratio_native']:.2f})", h["ratio"], 0.9, False))
        if paimon.get("planning"):
            out.append(("paimon", "get_flight_info / one endpoint's do_get (ms), by commits",
                        ", ".join(f"{p['commits']}: {p['get_flight_info_ms']:.0f} / {p['do_get_one_endpoint_ms']:.0f}"
                                  for p in paimon["planning"]), None, None, False))
        if pk:
            out.append(("paimon", "primary-key merged read (rows/s)",
                        ", ".join(f"{k} {v:,.0f}" for k, v in pk.items() if k.endswith("rows_s")), None, None, False))
        if f:
            out.append(("paimon", "follow latency p99, poll 100 ms (ms)",
                        f"p50 {f['p50_ms']:.0f}, p99 {f['p99_ms']:.0f}", f["p99_ms"], 150.0, True))
    if spark:
        s, c, lat = spark.get("scan", {}), spark.get("connect", {}), spark.get("latency", [])
        if "ratio" in s:
            out.append(("spark", "aggregation time flight-paimon / spark.read.parquet",
                        f"ratio {s['ratio']:.2f}", s["ratio"], 1.5, True))
        if "ratio" in c:
            out.append(("spark", "same aggregation through Spark Connect / classic (reported)",
                        f"ratio {c['ratio']:.2f} ({c['connect_median_s']:.2f} / {c['classic_median_s']:.2f} s)",
                        None, None, False))
        floor = {r["trigger_ms"]: r for r in spark.get("latency_baseline", [])}
        for row in [lat] if isinstance(lat, dict) else lat:  # one trigger (older results) or several
            if "p50_ms" not in row:
                continue
            trigger = row.get("trigger_ms", 200)
            target = 200.0 if trigger == 0 else 1000.0
            base = floor.get(trigger)
            out.append(("spark", f"push write -> foreachBatch latency p50, processingTime {trigger} ms (ms)",
                        f"p50 {row['p50_ms']:.0f}, p99 {row['p99_ms']:.0f}"
                        + (f" (a no-logic Python source: p50 {base['p50_ms']:.0f}, p99 {base['p99_ms']:.0f})"
                           if base else ""), row["p50_ms"], target, True))
    if security:
        p, r = security["push"], security["read"]
        out += [
            ("security", "push throughput, TLS + token / plain (reported)",
             f"ratio {p['ratio']:.2f} ({p['tls+token']['mib_s']:.0f} / {p['plain']['mib_s']:.0f} MiB/s)", None, None, False),
            ("security", "Paimon read throughput, TLS + token / plain (reported)",
             f"ratio {r['ratio']:.2f} ({r['tls+token']['mib_s']:.0f} / {r['plain']['mib_s']:.0f} MiB/s)", None, None, False),
            ("security", "token check / one 4 MiB batch's time, worst case one batch per call (%)",
             f"{security['rpc_overhead_share_of_batch']:.2%} per call end to end (the check itself "
             f"{security['check_share_of_batch']:.3%}, {security['check_us']:.1f} us)",
             security["rpc_overhead_share_of_batch"] * 100, 2.0, True),
        ]
    return out


def plot(table, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    measured = [(f"{a}: {m}", v / t, (v <= t) if lower else (v >= t))
                for a, m, _, v, t, lower in table if v is not None]
    fig, ax = plt.subplots(figsize=(10, 0.6 * len(measured) + 1.5))
    ax.barh([m for m, _, _ in measured], [r for _, r, _ in measured],
            color=["#4c72b0" if met else "#c44e52" for _, _, met in measured])
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_xlabel("measured / target (higher-is-better rows: >= 1 meets; lower-is-better rows: <= 1 meets)")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return True


def figures(folder: Path) -> list[tuple[str, tuple]]:
    """(result name, table row) for every figure the results in folder give, in the table's order."""
    got = {n: load(folder, n) for n in ("push", "paimon", "spark", "security", "maintenance", "maintenance-acks")}
    out = [(n, r) for n in ("push", "paimon", "spark", "security")
           for r in rows(*(got[k] if k == n else None for k in ("push", "paimon", "spark", "security")))]
    out += [("maintenance-acks", r) for r in maintenance_rows(None, got["maintenance-acks"])]
    return out + [("maintenance", r) for r in maintenance_rows(got["maintenance"])]


def check(folder: Path, repo: Path | None = None) -> int:
    """Name every figure older than the code it measures, with its commit and what changed since; 1 if any."""
    why = stale(folder) if repo is None else stale(folder, repo)
    for name, reason in why.items():
        print(f"stale: {name}.json in {folder}: {reason}", file=sys.stderr)
        for n, (area, what, *_) in figures(folder):
            if n == name:
                print(f"  stale figure: {area} | {what}", file=sys.stderr)
    return 1 if why else 0


def main(folder: str, md: str, png: str) -> int:
    folder_p = Path(folder)
    named = figures(folder_p)
    table = [r for _, r in named]
    why = stale(folder_p)
    when = {n: describe((load(folder_p, n) or {}).get("measured"), folder_p / f"{n}.json")
            + (": **stale**, its code changed since" if n in why else "") for n, _ in named}
    lines = ["# Benchmarks", "",
             "Written by `scripts/bench` (which runs `scripts/bench_push.py`, `scripts/bench_paimon.py`,",
             "`scripts/bench_spark.py`, `scripts/bench_security.py`, `scripts/bench_maintenance.py` and",
             "`scripts/bench_report.py`). Every ratio is against a baseline measured in the same run; figures",
             "are medians of several runs on a 2-core machine. Each row says when it was measured: the date,",
             "the commit, and the machine's 1-minute load average during the run (median, max; 2 means both",
             "cores busy). `scripts/bench` fails, naming the figure, when a figure is older than the code it",
             "measures (`scripts/bench_freshness.py` lists that code; `.venv/bin/python scripts/bench_report.py",
             "check` checks without running anything). Details and discussion: [push](benchmarks_push.md),",
             "[Paimon](benchmarks_paimon.md), [Spark](benchmarks_spark.md); durable "
             "writes: [ingest](benchmarks_ingest.md) (scripts/bench_ingest.py, scripts/bench_paimon_write.py); TLS and "
             "tokens: [security](benchmarks_security.md) (scripts/bench_security.py); table maintenance: "
             "[maintenance](benchmarks_maintenance.md) (scripts/bench_maintenance.py).", "",
             "| area | measurement | result | target | met | measured |", "|---|---|---|---|---|---|"]
    for name, (area, what, text, value, target, lower) in named:
        met = "" if value is None else ("yes" if (value <= target if lower else value >= target) else "**no**")
        bound = "" if target is None else f"{'<=' if lower else '>='} {target:g}"
        lines.append(f"| {area} | {what} | {text} | {bound} | {met} | {when[name]} |")
    if plot(table, Path(png)):
        lines += ["", f"![measured / target]({Path(png).name})"]
    lines += ["", "Raw results: `docs/bench-results/*.json` (each with its `measured` stamp).", ""]
    Path(md).write_text("\n".join(lines))
    print("\n".join(lines))
    return check(folder_p)  # the same staleness, named on stderr


if __name__ == "__main__":
    if sys.argv[1:2] == ["check"]:
        sys.exit(check(Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).resolve().parent.parent
                       / "docs" / "bench-results"))
    sys.exit(main(*sys.argv[1:4]))
