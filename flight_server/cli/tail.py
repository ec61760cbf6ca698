"""`flight_cli tail`: print rows of a push table or a Paimon follow as they arrive.

On a push table tail is a viewer: it reads the server's view of each partition (what is
appended, from the oldest batch still held or from now), so it never consumes, commits or fails
anything, and a producer never waits for it. On a Paimon table it follows; with `--consumer-id`
it commits the consumer's progress after printing, from the follow's `{"done": N}` marks: a
crash repeats at most what was not committed and never skips. Ctrl-C, `--limit` and a closed
pipe end it quietly with exit code 0.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading

import pyarrow.flight as flight

from flight_server.cli import CliError, targets
from flight_server.wire import allocator, messages, names
from flight_server.wire.requests import PaimonRequest, follow_start
from flight_server.cli.output import Output
from producers.client import Client, EndpointReader, FollowProgress, error_message, locations_of


def _plan(args, client: Client) -> tuple[flight.FlightInfo, list[dict], str | None]:
    """The endpoints to read, what each one's rows are labelled with, and the Paimon table (if any)."""
    kind, name = targets.parse(args.target, "target")
    if kind == names.PUSH:
        if args.consumer_id:
            raise CliError("--consumer-id is for Paimon tables (DB.TABLE); a viewer of a push table records nothing.")
        if args.start not in names.VIEW_STARTS or args.snapshot_id is not None:
            raise CliError(f"--from {args.start!r}: a push table is viewed from 'earliest' (the batches still "
                           "held) or 'latest' (new ones only), without --snapshot-id.")
        info = client.view_info(name, args.start, args.partition)
        partitions = [args.partition] if args.partition is not None else list(range(len(info.endpoints)))
        return info, [{"_partition": p} for p in partitions], None
    table = name
    if args.partition is not None:
        raise CliError("--partition is for push tables; a Paimon follow reads every bucket.")
    # Paimon's scan.mode names, as Spark's option takes them; `snapshot:N` is the older spelling.
    start = args.start if args.start.startswith("snapshot:") else follow_start(args.start, args.snapshot_id)
    cmd = PaimonRequest(table, follow=True, start=start, poll_interval_ms=args.poll_interval_ms,
                        consumer_id=args.consumer_id or None).to_json()
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(cmd)), options=client.options())
    return info, [{} for _ in info.endpoints], table


def cmd_tail(args, client: Client) -> int:
    allocator.reuse_batch_buffers()
    info, labels, table = _plan(args, client)
    printer = Output(args.format, args.limit)
    if args.limit == 0:  # the plan checked the target; there is nothing to wait for
        printer.finish()
        return 0
    progress = FollowProgress(len(info.endpoints))
    results: queue.Queue = queue.Queue(maxsize=8)
    done = object()
    readers = []

    def pull(i: int, endpoint):
        try:
            reader = EndpointReader(locations_of(endpoint, client.uri), endpoint.ticket, client.credentials)
            readers.append(reader)
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
            try:
                item = results.get(timeout=1.0)
            except queue.Empty:
                printer.tick()  # the live rate falls to 0 while nothing arrives
                continue
            if item is done:
                open_streams -= 1
                continue
            if isinstance(item, BaseException):
                printer.clear_rate()
                print(f"flight_cli tail: {error_message(item)}", file=sys.stderr)
                status = 1
                break
            i, batch, metadata = item
            mark = messages.read_mark(metadata)
            extra = dict(labels[i])
            if mark.seq is not None:
                extra["_seq"] = mark.seq
            if mark.snapshot is not None:
                extra["_snapshot"] = mark.snapshot
            if batch.num_rows and not printer.batch(batch, extra):
                break
            # Printed first, committed after: a crash repeats at most what was not committed.
            nxt = progress.update(i, metadata)
            if nxt is not None and args.consumer_id:
                client.consumer_commit(table, args.consumer_id, nxt)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a viewer ends
    except BrokenPipeError:
        # `tail | head`: the reader of our output is gone. Point stdout at /dev/null so the final
        # flush at exit does not raise again, and end quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    for reader in readers:
        reader.cancel()
    printer.finish()
    return status
