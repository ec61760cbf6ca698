"""Push numbered rows (id, name, ts) into a push-table partition at a chosen pace.

    python -m producers.examples.counter orders --batches 100 --rows 1000 --rate 50
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import pyarrow as pa
import pyarrow.flight as flight

from producers import Client, SinkError
from producers.client import error_message

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("ts", pa.timestamp("us"))])


def make_batch(first_id: int, rows: int) -> pa.RecordBatch:
    ids = pa.array(range(first_id, first_id + rows), pa.int64())
    now_us = time.time_ns() // 1000
    return pa.record_batch(
        [ids, pa.array([f"row-{i}" for i in range(first_id, first_id + rows)]),
         pa.array([now_us] * rows, pa.timestamp("us"))],
        schema=SCHEMA,
    )


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("table")
    p.add_argument("--uri", default=os.environ.get("FLIGHT_PAIMON_URI", "grpc://127.0.0.1:8815"),
                   help="server URI (environment: FLIGHT_PAIMON_URI)")
    p.add_argument("--partition", type=int, default=0)
    p.add_argument("--register", action="store_true", help="register the table first (capacity 16)")
    p.add_argument("--capacity", type=int, default=16, help="with --register: the table's capacity in batches")
    p.add_argument("--idle-timeout", type=float,
                   help="with --register: the table's idle_timeout_s (a partition whose producers send nothing "
                        "this long fails)")
    p.add_argument("--batches", type=int, default=10)
    p.add_argument("--rows", type=int, default=5)
    p.add_argument("--rate", type=float, default=0, help="batches per second (0: as fast as possible)")
    p.add_argument("--raise-after", type=int, help="raise inside the sink after this many batches")
    p.add_argument("--timeout", type=float, help="deadline of the whole do_put call, seconds")
    args = p.parse_args(argv)

    try:
        return run(args)
    # a user's mistake or a failed stream (an unreachable server: pyarrow raises get_schema's as an OSError)
    except (flight.FlightError, OSError, KeyError, pa.ArrowInvalid, SinkError) as e:
        print(f"counter: {error_message(e)}", file=sys.stderr)
        return 1


def run(args) -> int:
    client = Client(args.uri)
    if args.register:
        client.register(args.table, SCHEMA, capacity=args.capacity, idle_timeout_s=args.idle_timeout)
    sink = client.sink(args.table, args.partition, call_timeout=args.timeout)
    start = time.monotonic()
    # Closing waits until the server has taken every batch: say so when that takes a while.
    waiting = threading.Timer(2.0, lambda: print(
        f"counter: waiting for the server to take the last batches (acked up to {sink.acked}); the "
        "partition is full: is a reader running?", file=sys.stderr, flush=True))
    with sink:
        for i in range(args.batches):
            if args.raise_after is not None and i == args.raise_after:
                raise RuntimeError(f"counter producer gave up after {i} batches")
            sink.write(make_batch(i * args.rows, args.rows))
            print(f"sent {i} (acked {sink.acked + 1})", flush=True)
            if args.rate:
                time.sleep(max(0.0, start + (i + 1) / args.rate - time.monotonic()))
        waiting.start()
    waiting.cancel()
    print(f"done {args.batches} batches, last seq {sink.acked}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
