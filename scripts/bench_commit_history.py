"""What a Paimon commit costs as the table's history grows: pypaimon's commit as is, and with the
manifest merge durable ingest does (`compat.merge_manifests_on_commit`).

Two tables in one warehouse take the same small commits (200 rows each) in turn, so both see the
same machine. Printed per checkpoint: the median commit time of the last 100 commits of each, the
manifests its latest snapshot names, and the peak memory Python traced during those commits.

Usage: .venv/bin/python scripts/bench_commit_history.py [--commits 2400] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import tracemalloc

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from flight_server.paimon import compat  # noqa: E402
from producers.examples.events import SCHEMA, batch  # noqa: E402


class Writer:
    def __init__(self, catalog, name: str, merge: bool):
        compat.create_table(catalog, name, SCHEMA, None, None, {})
        self.table = catalog.get_table(name)
        builder = self.table.new_stream_write_builder()
        self.write, self.commit = builder.new_write(), builder.new_commit()
        if merge:
            compat.merge_manifests_on_commit(self.commit)
        self.times: list[float] = []
        self.peak = 0

    def one(self, i: int) -> None:
        self.write.write_arrow_batch(batch("bench", i, 200))
        messages = self.write.prepare_commit(i)
        tracemalloc.reset_peak()
        start = time.perf_counter()
        self.commit.commit(messages, i)
        self.times.append(time.perf_counter() - start)
        self.peak = max(self.peak, tracemalloc.get_traced_memory()[1])

    def checkpoint(self) -> dict:
        latest = self.table.snapshot_manager().get_latest_snapshot()
        manifests = len(self.commit.file_store_commit.manifest_list_manager.read_all(latest))
        row = {"median_ms": statistics.median(self.times[-100:]) * 1000, "manifests": manifests,
               "peak_traced_mib": self.peak / 2**20}
        self.peak = 0
        return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", type=int, default=2400)
    ap.add_argument("--every", type=int, default=300, help="a checkpoint every this many commits")
    ap.add_argument("--json", help="write the checkpoints here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as warehouse:
        catalog = compat.create_catalog(warehouse)
        writers = {"pypaimon": Writer(catalog, "db.plain", False), "merged": Writer(catalog, "db.merged", True)}
        tracemalloc.start()
        rows = []
        for i in range(1, args.commits + 1):
            for w in writers.values():
                w.one(i)
            if i % args.every == 0:
                row = {"commits": i, **{k: w.checkpoint() for k, w in writers.items()}}
                rows.append(row)
                print(f"{i:6d} commits: " + "  ".join(
                    f"{k} {r['median_ms']:6.1f} ms/commit, {r['manifests']:5d} manifests, peak "
                    f"{r['peak_traced_mib']:5.1f} MiB" for k, r in row.items() if k != "commits"), flush=True)
    first, last = rows[0], rows[-1]
    for k in writers:
        print(f"{k}: {first[k]['median_ms']:.1f} ms at {first['commits']} commits -> {last[k]['median_ms']:.1f} ms at "
              f"{last['commits']} (x{last[k]['median_ms'] / first[k]['median_ms']:.2f})")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"commits": args.commits, "checkpoints": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
