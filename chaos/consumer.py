"""A consumer process the fault runs kill or stop: drains partition 0 of a push table.

    python -m chaos.consumer URI TABLE [--pause S]

Prints `reading` after its first batch, then one JSON line at the end:
{"outcome": "complete"|"error", "rows": N, "in_order": true if the ids were 0..N-1, "error": "..."}.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import pyarrow.flight as flight

from producers import Client


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("uri")
    p.add_argument("table")
    p.add_argument("--pause", type=float, default=0, help="seconds per batch")
    args = p.parse_args()
    client = Client(args.uri, timeout=10)
    ids: list[int] = []
    result = {"outcome": "complete"}
    try:
        reader = client.flight.do_get(client.info(args.table).endpoints[0].ticket, options=client.options(None))
        for chunk in reader:
            if not ids:
                print("reading", flush=True)
            ids += chunk.data.column("id").to_pylist()
            time.sleep(args.pause)
    except flight.FlightError as e:
        result = {"outcome": "error", "error": str(e).splitlines()[0] if str(e) else type(e).__name__}
    result.update(rows=len(ids), in_order=ids == list(range(len(ids))))
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
