"""A named producer writing numbered batches into a Paimon table, printing each ack it gets.

    python -m tests.durable_producer URI TABLE PRODUCER BATCHES ROWS

Batch `seq` holds ROWS rows with ids seq * 1_000_000 + i, so a reader can tell a whole batch
from part of one. Prints `resume LAST_SEQ` once, then `acked SEQ` whenever the table's last
seq for this producer moves; tests kill it at any point.
"""

from __future__ import annotations

import sys

import pyarrow as pa

from producers import Client

SCHEMA = pa.schema([("producer", pa.string()), ("seq", pa.int64()), ("id", pa.int64())])


def batch(producer: str, seq: int, rows: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array([producer] * rows), pa.array([seq] * rows, pa.int64()),
                            pa.array(range(seq * 1_000_000, seq * 1_000_000 + rows), pa.int64())], schema=SCHEMA)


def main() -> None:
    uri, table, producer, batches, rows = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    sink = Client(uri).paimon_sink(table, producer=producer)
    print(f"resume {sink.last_seq}", flush=True)
    start = 0 if sink.last_seq is None else sink.last_seq + 1
    shown = sink.last_seq
    for seq in range(start, batches):
        sink.write(batch(producer, seq, rows), seq=seq)
        if sink.last_seq != shown:
            shown = sink.last_seq
            print(f"acked {shown}", flush=True)
    sink.close()
    print(f"acked {sink.last_seq}", flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    main()
