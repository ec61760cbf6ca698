"""A producer process the fault runs kill, stop, time out or end badly.

    python -m chaos.producer URI push:NAME|paimon:DB.TABLE --batches N --rows R [--rate B]
        [--producer ID] [--end marker|plain-close|error] [--deadline S]

Push batch i holds ids i*R .. i*R+R-1 (counter rows); Paimon batch seq s holds ids s*1_000_000 ..
(events rows), so a reader tells whole batches, partial ones and resends apart. `--end` is how
the stream ends: the end marker (clean), a plain half-close without it, or an in-band error.
Prints `sent N` after each batch is handed over (Paimon: `sent N acked K`, K batches committed so
far) and `done` after a clean close.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.wire import messages, names
from producers import Client
from producers.examples import counter, events

ERROR = "chaos: the producer gave up"


def batch(args, i: int) -> pa.RecordBatch:
    if args.target.startswith("push:"):
        return counter.make_batch(i * args.rows, args.rows)
    return events.batch(args.producer or "anonymous", i, args.rows)


def plain_close(client: Client, args) -> None:
    """A plain Flight writer that half-closes without the end marker (what a crashed producer's
    destructors send)."""
    kind, name = args.target.split(":", 1)
    if kind == "push":
        descriptor = flight.FlightDescriptor.for_path(*names.push_path(name, 0))
    elif args.producer:
        descriptor = flight.FlightDescriptor.for_command(json.dumps({"write": name, "producer": args.producer}))
    else:
        descriptor = flight.FlightDescriptor.for_path(*names.paimon_path(name))
    first = batch(args, 0)
    writer, _ = client.flight.do_put(descriptor, first.schema, options=client.options(args.deadline))
    for i in range(args.batches):
        writer.write_with_metadata(batch(args, i), pa.py_buffer(messages.batch_seq(i)))
        print(f"sent {i}", flush=True)
        pace(args)
    writer.close()


def pace(args) -> None:
    if args.rate:
        time.sleep(1 / args.rate)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("uri")
    p.add_argument("target")
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--rate", type=float, default=0)
    p.add_argument("--producer")
    p.add_argument("--end", choices=["marker", "plain-close", "error"], default="marker")
    p.add_argument("--deadline", type=float, help="the do_put call's deadline, seconds")
    p.add_argument("--reconnect-timeout", type=float, default=120,
                   help="seconds a named producer waits for its server to come back (a restart after a kill, "
                        "and what a scenario checks before it, on a loaded machine)")
    args = p.parse_args()
    client = Client(args.uri, timeout=10)
    if args.end == "plain-close":
        plain_close(client, args)
        return 0
    kind, name = args.target.split(":", 1)
    if kind == "push":
        sink = client.sink(name, 0, call_timeout=args.deadline)
    else:
        sink = client.paimon_sink(name, args.producer, call_timeout=args.deadline, reconnect_timeout=args.reconnect_timeout)
    last = getattr(sink, "last_seq", None)  # a named Paimon producer resumes after the table's last seq
    first = 0 if last is None else last + 1
    for i in range(first, args.batches):
        sink.write(batch(args, i))
        # A Paimon sink's `acked` counts batches committed (in order): a lower bound at a kill.
        print(f"sent {i}" + (f" acked {sink.acked}" if kind == "paimon" else ""), flush=True)
        pace(args)
    if args.end == "error":
        sink.fail(ERROR)
        return 0
    sink.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
