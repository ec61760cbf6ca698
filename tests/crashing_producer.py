"""A plain pyarrow producer that dies of an uncaught exception after K batches.

    python -m tests.crashing_producer URI TABLE K DELAY_S [--close-in-finally]

Its do_put writer is closed by destructors at interpreter exit (or by a `finally`), which sends
a clean half-close: without the end marker protocol that looked like a finished producer.
"""

from __future__ import annotations

import sys
import time

import pyarrow.flight as flight

from producers.examples.counter import SCHEMA, make_batch


def main() -> None:
    uri, table, k, delay = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    client = flight.FlightClient(uri)
    writer, _ = client.do_put(flight.FlightDescriptor.for_path("push", table, "0"), SCHEMA)
    try:
        for i in range(k):
            writer.write_batch(make_batch(i * 5, 5))
            time.sleep(delay)
        raise RuntimeError(f"the producer crashed after {k} batches")
    finally:
        if "--close-in-finally" in sys.argv:
            writer.close()


if __name__ == "__main__":
    main()
