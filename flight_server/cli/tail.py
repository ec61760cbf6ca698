"""`flight_cli tail`: print rows of a push table or a Paimon follow as they arrive.

With `--consumer-id` on a Paimon table it commits the consumer's progress after printing, from the
follow's `{"done": N}` marks: a crash repeats at most what was not committed and never skips.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
import time

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.cli import CliError
from flight_server.wire import allocator, names
from producers.client import Client, FollowProgress, error_message


class _Printer:
    """Prints rows as they arrive and a live rate on stderr."""

    def __init__(self, fmt: str, limit: int | None):
        self.fmt, self.limit = fmt, limit
        self.rows = 0
        self.start = self.last_rate = time.monotonic()
        self.header_done = False

    def batch(self, batch: pa.RecordBatch) -> bool:
        """Print `batch`; return False once the limit is reached."""
        rows = batch.to_pylist()
        if self.limit is not None:
            rows = rows[: self.limit - self.rows]
        if self.fmt == "jsonl":
            out = "\n".join(json.dumps(r, default=str) for r in rows)
        else:
            lines = [] if self.header_done else [" | ".join(batch.schema.names)]
            self.header_done = True
            lines += [" | ".join("NULL" if v is None else str(v) for v in r.values()) for r in rows]
            out = "\n".join(lines)
        if out:
            print(out, flush=True)
        self.rows += len(rows)
        now = time.monotonic()
        if now - self.last_rate >= 1.0:
            self.last_rate = now
            print(f"\r{self.rows} rows, {self.rows / (now - self.start):,.0f} rows/s", end="",
                  file=sys.stderr, flush=True)
        return self.limit is None or self.rows < self.limit


def cmd_tail(args, client: Client) -> int:
    allocator.reuse_batch_buffers()
    table = args.target.removeprefix(names.PAIMON + ":")
    if args.target.startswith(names.PUSH + ":"):
        if args.consumer_id or args.start != "latest":
            raise CliError("--consumer-id and --from are for Paimon tables (DB.TABLE); a push table is "
                           "read as its producers push.")
        info = client.info(args.target[len(names.PUSH) + 1:])
    elif table.count(".") == 1:
        cmd = {names.TABLE: table, names.FOLLOW: True, names.START: args.start,
               names.POLL_INTERVAL_MS: args.poll_interval_ms}
        if args.consumer_id:
            cmd[names.CONSUMER_ID] = args.consumer_id
        info = client.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(cmd)),
                                              options=client.options())
    else:
        raise CliError(f"target {args.target!r} is neither push:NAME nor DB.TABLE (or paimon:DB.TABLE).")
    printer = _Printer(args.format, args.limit)
    progress = FollowProgress(len(info.endpoints))
    results: queue.Queue = queue.Queue(maxsize=8)
    done = object()

    def pull(i: int, endpoint):
        try:
            reader = client.flight.do_get(endpoint.ticket, options=client.options(None))
            for chunk in reader:
                results.put((i, chunk.data, chunk.app_metadata))
        except Exception as e:  # noqa: BLE001 - every failure is printed and sets the exit status
            results.put(e)
        finally:
            results.put(done)

    for i, ep in enumerate(info.endpoints):
        threading.Thread(target=pull, args=(i, ep), daemon=True, name="tail-pull").start()
    open_streams, status = len(info.endpoints), 0
    try:
        while open_streams:
            item = results.get()
            if item is done:
                open_streams -= 1
                continue
            if isinstance(item, BaseException):
                print(f"\nflight_cli tail: {error_message(item)}", file=sys.stderr)
                status = 1
                break
            i, batch, metadata = item
            if batch.num_rows and not printer.batch(batch):
                break
            # Printed first, committed after: a crash repeats at most what was not committed.
            nxt = progress.update(i, metadata)
            if nxt is not None and args.consumer_id:
                client.action(names.CONSUMER_COMMIT, {names.TABLE: table,
                                                      names.CONSUMER_ID: args.consumer_id, "next_snapshot": nxt})
    except KeyboardInterrupt:
        status = 130
    elapsed = time.monotonic() - printer.start
    print(f"\n{printer.rows} rows in {elapsed:.2f}s", file=sys.stderr)
    return status
