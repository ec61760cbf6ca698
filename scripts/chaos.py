"""Fault, abuse and soak runs; writes docs/reliability.md.

    .venv/bin/python scripts/chaos.py                 # every scenario, full counts (~25 min), and the doc
    .venv/bin/python scripts/chaos.py --short         # a few runs of each (the CI version)
    .venv/bin/python scripts/chaos.py --only push --runs 5
    .venv/bin/python scripts/chaos.py --soak-minutes 30   # the soak too (its plot, by matplotlib, goes in docs/)

Loopback only; every process a run starts is stopped by its pid when the run ends. The exit
status is 1 if any run was not ok or lost or duplicated a row where the scenario promises not to.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SOAK_JSON = ROOT / "docs" / "bench-results" / "soak.json"
sys.path.insert(0, str(ROOT))

from chaos import report  # noqa: E402
from chaos.harness import SCENARIOS, run_scenario, scratch  # noqa: E402
from chaos.scenarios import load  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--short", action="store_true", help="the CI version: each scenario's short count")
    p.add_argument("--runs", type=int, help="runs per scenario (default: its full or short count)")
    p.add_argument("--only", action="append", help="scenarios whose group or name contains this (repeatable)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--soak-minutes", type=float, default=0, help="also soak for this long (0: no soak)")
    p.add_argument("--out", type=Path, help="write the report here (default: docs/reliability.md for a full run)")
    args = p.parse_args()
    if args.soak_minutes:
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            p.error("the soak draws its plot with matplotlib: .venv/bin/python -m pip install 'matplotlib>=3.8'")
    load()
    chosen = [s for s in SCENARIOS if not args.only or any(o in f"{s.group} {s.name}" for o in args.only)]
    if not chosen and not args.soak_minutes:
        p.error(f"no scenario matches {args.only}; groups: {sorted({s.group for s in SCENARIOS})}")
    root = scratch()
    rows = []
    started = time.monotonic()
    for sc in chosen:
        runs = args.runs or (sc.short if args.short else sc.full)
        if not runs:
            continue  # not in the short version (tests/test_chaos.py says which, and why)
        t0 = time.monotonic()
        results = run_scenario(sc, runs, args.seed, root, short=args.short)
        rows.append((sc, results))
        print(report.line(sc, results, time.monotonic() - t0), flush=True)
    soak = None
    if args.soak_minutes:
        from chaos.soak import soak as run_soak
        soak = run_soak(args.soak_minutes * 60, root, ROOT / "docs" / "reliability_soak.png")
        soak["command"] = f"scripts/chaos.py --only soak --soak-minutes {args.soak_minutes:g}"
        print(report.soak_line(soak), flush=True)
        SOAK_JSON.write_text(json.dumps(soak, indent=1))
    out = args.out or (None if (args.short or args.only or args.runs) else ROOT / "docs" / "reliability.md")
    command = " ".join(["scripts/chaos.py", *sys.argv[1:]])
    if out and soak is None and SOAK_JSON.exists():
        soak = json.loads(SOAK_JSON.read_text())  # the last soak run by hand (it takes 30 minutes)
    if out:
        out.write_text(report.markdown(rows, soak, command, time.monotonic() - started))
        print(f"wrote {out}")
    return 0 if report.all_ok(rows) and (soak is None or soak["ok"]) else 1


if __name__ == "__main__":
    sys.exit(main())
