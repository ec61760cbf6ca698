"""Stream a CSV file into a push table, batch by batch, without loading it whole.

    python -m producers.examples.csv_file trips data.csv --register --block-size 1048576
"""

from __future__ import annotations

import argparse
import os
import sys

import pyarrow as pa
import pyarrow.csv as pcsv
import pyarrow.flight as flight

from producers import Client, SinkError
from producers.client import error_message


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("table")
    p.add_argument("path")
    p.add_argument("--uri", default=os.environ.get("FLIGHT_PAIMON_URI", "grpc://127.0.0.1:8815"),
                   help="server URI (environment: FLIGHT_PAIMON_URI)")
    p.add_argument("--partition", type=int, default=0)
    p.add_argument("--register", action="store_true", help="register the table with the file's schema")
    p.add_argument("--block-size", type=int, default=1 << 20, help="bytes of CSV per batch")
    args = p.parse_args(argv)
    try:
        return run(args)
    except (OSError, flight.FlightError, KeyError, pa.ArrowInvalid, SinkError) as e:  # a user's mistake or a failed stream
        print(f"csv_file: {error_message(e)}", file=sys.stderr)
        return 1


def run(args) -> int:
    reader = pcsv.open_csv(args.path, read_options=pcsv.ReadOptions(block_size=args.block_size))
    client = Client(args.uri)
    if args.register:
        client.register(args.table, reader.schema)
    rows = 0
    with client.sink(args.table, args.partition) as sink:
        for batch in reader:
            sink.write(batch)
            rows += batch.num_rows
    print(f"pushed {rows} rows from {args.path} into {args.table!r} partition {args.partition}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
