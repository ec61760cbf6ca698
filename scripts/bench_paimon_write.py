"""pypaimon's Python writer against its native (Rust, pypaimon-rust) writer, per table layout.

The durable-write committer uses the native writer (`write.native.enabled`); this measures why:
the same batches written and committed by each writer into fresh tables, rounds alternating,
medians, in one process (imports and table creation outside the clock).

    .venv/bin/python scripts/bench_paimon_write.py [--rows 200000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402
from pypaimon import CatalogFactory, Schema  # noqa: E402

LAYOUTS = {  # name: (primary keys, options)
    "append, bucket -1": ([], {"bucket": "-1"}),
    "append, 4 fixed buckets": ([], {"bucket": "4", "bucket-key": "id"}),
    "primary key, 4 fixed buckets": (["id"], {"bucket": "4"}),
    "primary key, dynamic buckets": (["id"], {"bucket": "-1"}),
}
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("amount", pa.float64()), ("name", pa.string()),
                    ("ts", pa.timestamp("us"))])


def data(rows: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array(range(rows), pa.int64()), pa.array([i * 0.5 for i in range(rows)]),
                            pa.array([f"name-{i % 1000}" for i in range(rows)]),
                            pa.array(range(rows), pa.timestamp("us"))], schema=SCHEMA)


def write_once(catalog, name: str, keys, options, native: bool, batch: pa.RecordBatch) -> float:
    catalog.create_table(name, Schema.from_pyarrow_schema(SCHEMA, primary_keys=keys or None, options=options), False)
    table = catalog.get_table(name)
    if native:
        table = table.copy({"write.native.enabled": "true"})
    start = time.perf_counter()
    builder = table.new_batch_write_builder()
    writer = builder.new_write()
    writer.write_arrow_batch(batch)
    builder.new_commit().commit(writer.prepare_commit())
    writer.close()
    return time.perf_counter() - start


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--out", default=str(ROOT / "docs" / "bench-results" / "paimon_write.json"))
    args = p.parse_args()
    batch = data(args.rows)
    catalog = CatalogFactory.create({"warehouse": tempfile.mkdtemp(prefix="bench-write-")})
    catalog.create_database("b", True)
    write_once(catalog, "b.warmup", [], {}, True, batch.slice(0, 1000))  # first native call loads the library
    times: dict[tuple[str, bool], list[float]] = {}
    n = 0
    for _ in range(args.rounds):
        for layout, (keys, options) in LAYOUTS.items():
            for native in (False, True):  # alternating within each round
                n += 1
                times.setdefault((layout, native), []).append(write_once(catalog, f"b.t{n}", keys, options, native, batch))
    results = []
    print(f"{args.rows:,} rows per write+commit, medians of {args.rounds} (load {os.getloadavg()[0]:.2f})")
    for layout in LAYOUTS:
        py, rs = statistics.median(times[(layout, False)]), statistics.median(times[(layout, True)])
        results.append({"layout": layout, "python_rows_per_s": args.rows / py, "native_rows_per_s": args.rows / rs,
                        "speedup": py / rs})
        print(f"{layout:32} python {args.rows / py:>12,.0f} rows/s   native {args.rows / rs:>12,.0f} rows/s   "
              f"x{py / rs:.1f}")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({"rows": args.rows, "rounds": args.rounds, "load": os.getloadavg()[0],
                                          "results": results}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
