"""Which code each benchmark result measures, the stamp a run leaves on it, and whether it is stale.

    .venv/bin/python scripts/bench_freshness.py run NAME [FOLDER] -- CMD ...

`run` runs CMD (a bench_*.py writing FOLDER/NAME.json, FOLDER docs/bench-results by default),
samples the 1-minute load average while it runs, and adds to the JSON a `measured` object: the
commit checked out at the start (and which files under the part's paths differed from it), the
date, the run's minutes and its load. `stale` says which results are older than the code they
measure (a result without the stamp is); scripts/bench_report.py names their figures and fails.
"""

from __future__ import annotations

import datetime
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Result file (without .json) -> the code its figures measure, the benchmark scripts included: a
# figure is fresh while no commit since the one it measured changed these paths.
MEASURES: dict[str, tuple[str, ...]] = {
    "push": ("flight_server/push/", "flight_server/wire/", "scripts/bench_push.py"),
    "paimon": ("flight_server/paimon/", "scripts/bench_paimon.py"),
    "spark": ("spark_reader/", "scripts/bench_spark.py", "scripts/bench_selective.py"),
    "security": ("flight_server/auth.py", "flight_server/auth_file.py", "flight_server/middleware.py",
                 "scripts/bench_security.py"),
    "maintenance": ("flight_server/maintenance/", "flight_server/ingest/", "scripts/bench_maintenance.py"),
    "maintenance-acks": ("flight_server/maintenance/", "flight_server/ingest/", "scripts/bench_maintenance.py"),
}
LOAD_SAMPLE_S = 15.0


def git(repo: Path, *args: str, check: bool = True) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise RuntimeError(f"git {' '.join(args)} failed in {repo}: {done.stderr.strip()}")
    return done.stdout.strip()


def load_1min() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


def run(name: str, cmd: list[str], folder: Path, repo: Path = ROOT) -> int:
    """Run one part; when it succeeds, stamp folder/NAME.json with the code and machine it measured."""
    if name not in MEASURES:
        raise SystemExit(f"bench_freshness: unknown part {name!r}; parts: {', '.join(MEASURES)}")
    commit = git(repo, "rev-parse", "HEAD")
    dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain=v1", "-z", "--", *MEASURES[name]],
                           capture_output=True, text=True, check=True).stdout.split("\0")  # "XY path" entries
    loads, stop = [load_1min()], threading.Event()
    loadavg_start = Path("/proc/loadavg").read_text().split()[:3]

    def sample() -> None:
        while not stop.wait(LOAD_SAMPLE_S):
            loads.append(load_1min())

    sampler = threading.Thread(target=sample, name="load-sampler", daemon=True)
    started, t0 = datetime.datetime.now(datetime.UTC), time.monotonic()
    sampler.start()
    try:
        rc = subprocess.run(cmd, cwd=repo).returncode
    finally:
        stop.set()
        sampler.join()
    if rc != 0:
        return rc
    path = folder / f"{name}.json"
    data = json.loads(path.read_text())
    data["measured"] = {
        "commit": commit,
        "uncommitted": [entry[3:] for entry in dirty if entry[2:3] == " "],
        "date": started.strftime("%Y-%m-%d %H:%M UTC"),
        "minutes": round((time.monotonic() - t0) / 60, 1),
        "load_1min": {"start": loads[0], "median": statistics.median(loads), "max": max(loads),
                      "samples": len(loads), "every_s": LOAD_SAMPLE_S},
        "loadavg_1_5_15": {"start": [float(x) for x in loadavg_start],
                           "end": [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]},
        "cpus": len(os.sched_getaffinity(0)),
    }
    path.write_text(json.dumps(data, indent=2) + "\n")
    return 0


def describe(measured: dict | None, path: Path | None = None, repo: Path = ROOT) -> str:
    """The 'measured' column of docs/benchmarks.md (without a stamp: when `path` was committed)."""
    if not measured:
        committed = git(repo, "log", "-1", "--format=%cs", "--", str(path), check=False) if path else ""
        return f"not recorded (committed {committed})" if committed else "not recorded"
    load = measured["load_1min"]
    text = f"{measured['date'][:10]}, {measured['commit'][:7]}, load {load['median']:.1f} (max {load['max']:.1f})"
    return text + (", uncommitted changes" if measured.get("uncommitted") else "")


def stale(folder: Path, repo: Path = ROOT) -> dict[str, str]:
    """Result name -> why, for each result in folder whose figures are older than the code they measure."""
    out = {}
    for name, paths in MEASURES.items():
        path = folder / f"{name}.json"
        if not path.exists():
            continue
        measured = json.loads(path.read_text()).get("measured")
        last = git(repo, "log", "-1", "--format=%H", "--", *paths)
        if not last:
            continue  # none of its code is in this history
        where = ", ".join(paths)
        if not measured:
            out[name] = (f"no commit recorded (measured before runs were stamped); the code it measures "
                         f"last changed in {last[:7]} ({where}); run scripts/bench {name}")
            continue
        commit = measured["commit"]
        if subprocess.run(["git", "-C", str(repo), "cat-file", "-e", f"{commit}^{{commit}}"],
                          capture_output=True).returncode != 0:
            out[name] = (f"measured at {commit[:7]}, a commit this repository does not have; "
                         f"run scripts/bench {name}")
            continue
        fresh = subprocess.run(["git", "-C", str(repo), "merge-base", "--is-ancestor", last, commit],
                               capture_output=True).returncode == 0
        if fresh:
            continue
        since = git(repo, "log", "--format=%h %s", f"{commit}..{last}", "--", *paths).splitlines()
        listed = "; ".join(line[:90] for line in since[:5]) + (f"; and {len(since) - 5} more" if len(since) > 5 else "")
        out[name] = (f"measured at {commit[:7]} ({measured['date']}); since then {len(since)} "
                     f"commit(s) changed {where}: {listed}; run scripts/bench {name}")
    return out


def main(argv: list[str]) -> int:
    if len(argv) >= 4 and argv[0] == "run" and "--" in argv[2:]:
        sep = argv.index("--", 2)
        folder = Path(argv[2]) if sep == 3 else ROOT / "docs" / "bench-results"
        return run(argv[1], argv[sep + 1:], folder)
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
