"""A named, exactly-once producer: numbered event batches into a Paimon table (durable writes).

    flight_cli create db.events --schema "producer:string,seq:int64,id:int64"
    python -m producers.examples.events db.events --producer p1 --batches 100 --rows 1000 --rate 20

Batch `seq` holds ROWS rows with ids seq * 1_000_000 + i, so a reader can tell a whole batch from
part of one, and the same batch from a resend. At start it asks the table where this producer
stopped (`producer_state`) and goes on from there; if the server goes away mid-run it reconnects
and resends only what the table lacks. Prints `resume LAST_SEQ`, then `acked SEQ` as acks arrive.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import pyarrow as pa
import pyarrow.flight as flight

from producers import Client, SinkError
from producers.client import error_message

SCHEMA = pa.schema([("producer", pa.string()), ("seq", pa.int64()), ("id", pa.int64())])


def batch(producer: str, seq: int, rows: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array([producer] * rows), pa.array([seq] * rows, pa.int64()),
                            pa.array(range(seq * 1_000_000, seq * 1_000_000 + rows), pa.int64())], schema=SCHEMA)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("table", help="DB.TABLE with columns producer:string, seq:int64, id:int64")
    p.add_argument("--uri", default=os.environ.get("FLIGHT_PAIMON_URI", "grpc://127.0.0.1:8815"),
                   help="server URI (environment: FLIGHT_PAIMON_URI)")
    p.add_argument("--producer", required=True, help="this producer's name: the table remembers its last seq")
    p.add_argument("--batches", type=int, default=10, help="stop after batch seq BATCHES - 1")
    p.add_argument("--rows", type=int, default=100)
    p.add_argument("--rate", type=float, default=0, help="batches per second (0: as fast as acks allow)")
    p.add_argument("--reconnect-timeout", type=float, default=60, help="seconds to wait for a server that went away")
    args = p.parse_args(argv)
    try:
        return run(args)
    except (flight.FlightError, OSError, KeyError, pa.ArrowInvalid, SinkError) as e:
        print(f"events: {error_message(e)}", file=sys.stderr)
        return 1


def run(args) -> int:
    sink = Client(args.uri).paimon_sink(args.table, producer=args.producer, reconnect_timeout=args.reconnect_timeout)
    print(f"resume {sink.last_seq}", flush=True)
    start_seq = 0 if sink.last_seq is None else sink.last_seq + 1
    shown, start = sink.last_seq, time.monotonic()
    with sink:
        for n, seq in enumerate(range(start_seq, args.batches)):
            sink.write(batch(args.producer, seq, args.rows), seq=seq)
            if sink.last_seq != shown:
                shown = sink.last_seq
                print(f"acked {shown}", flush=True)
            if args.rate:
                time.sleep(max(0.0, start + (n + 1) / args.rate - time.monotonic()))
    print(f"acked {sink.last_seq}", flush=True)
    print(f"done: the table holds batches 0..{sink.last_seq} of {args.producer} (snapshot {sink.last_snapshot}, "
          f"{sink.reconnects} reconnect(s))", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
