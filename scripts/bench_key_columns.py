"""What writing the key columns costs durable writes into a primary-key table (issue 45 item 1).

    .venv/bin/python scripts/bench_key_columns.py [--rounds 3] [--batches 40] [--rows 65536]

pypaimon-rust's native writer leaves a primary-key file's `_KEY_<pk>` columns out; Java Paimon
0.9 requires them, so the server's writers add them (compat.merge_tree.add_key_columns: each file
read back and written again before its commit). One named producer pushes `--batches` batches of
`--rows` rows into a fresh primary-key table (4 buckets, write-only: no compaction in the way) of
an in-process server, once with the key columns added and once without (the native writer's files
as they are), rounds alternating; the server is the same process, so CPU is the process's. Prints
rows/s (wall, until the last ack) and rows per CPU-second per variant, medians of the rounds.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flight_server.paimon.compat import catalog as compat_catalog  # noqa: E402
from producers import Client  # noqa: E402
from tests.conftest import RunningServer  # noqa: E402

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("ts", pa.timestamp("us")), ("user_id", pa.int64()),
                    ("amount", pa.float64()), ("name", pa.string())])


def batch(start: int, rows: int) -> pa.RecordBatch:
    ids = np.arange(start, start + rows)
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array(ids * 1000, pa.timestamp("us")),
                            pa.array(ids % 997, pa.int64()), pa.array(ids * 0.5),
                            pa.array([f"name-{i}" for i in ids % 10_000])], schema=SCHEMA)


def run(with_keys: bool, batches: list[pa.RecordBatch]) -> tuple[float, float]:
    keep = compat_catalog._with_key_columns
    if not with_keys:
        compat_catalog._with_key_columns = lambda table: None
    try:
        with tempfile.TemporaryDirectory() as warehouse:
            server = RunningServer(warehouse)
            try:
                client = Client(server.uri, timeout=120)
                client.create_table("db.k", SCHEMA, primary_keys=["id"], options={"bucket": "4", "write-only": "true"})
                wall, cpu = time.perf_counter(), time.process_time()
                with client.paimon_sink("db.k", producer="bench") as sink:
                    for b in batches:
                        sink.write(b)
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                client.close()
            finally:
                server.stop()
    finally:
        compat_catalog._with_key_columns = keep
    rows = sum(b.num_rows for b in batches)
    return rows / wall, rows / cpu


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--rows", type=int, default=65536)
    args = p.parse_args()
    batches = [batch(i * args.rows, args.rows) for i in range(args.batches)]
    results: dict[str, list[tuple[float, float]]] = {"key columns": [], "native only": []}
    for r in range(args.rounds):
        for name in (("key columns", "native only") if r % 2 == 0 else ("native only", "key columns")):
            results[name].append(run(name == "key columns", batches))
            print(f"round {r + 1} {name}: {results[name][-1][0]:,.0f} rows/s, {results[name][-1][1]:,.0f} rows/CPU-s",
                  flush=True)
    medians = {n: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v)) for n, v in results.items()}
    for name, (wall, cpu) in medians.items():
        print(f"{name}: {wall:,.0f} rows/s, {cpu:,.0f} rows/CPU-s (median of {args.rounds})")
    print(f"key columns / native only: {medians['key columns'][0] / medians['native only'][0]:.2f} wall, "
          f"{medians['key columns'][1] / medians['native only'][1]:.2f} CPU")


if __name__ == "__main__":
    main()
