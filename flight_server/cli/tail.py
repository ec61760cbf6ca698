"""`flight_cli tail`: print rows of a push table or a Paimon follow as they arrive.

On a push table tail is a viewer: it reads the server's view of each partition (what is
appended, from the oldest batch still held or from now), so it never consumes, commits or fails
anything, and a producer never waits for it. On a Paimon table it follows; with `--consumer-id`
it commits the consumer's progress after printing, from the follow's `{"done": N}` marks: a
crash repeats at most what was not committed and never skips. When the table's schema changes
(an ALTER), the follow ends at the first snapshot of the new schema (`"on_schema_change": "end"`)
and tail opens it again there, printing the new columns from then on and saying so on stderr
(a consumer's progress is committed at that snapshot first). Ctrl-C, `--limit` and a closed
pipe end it quietly with exit code 0; so does `-e` (kcat's), once every row there was at the
start has been printed.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading

import pyarrow.flight as flight

from flight_server.cli import targets
from flight_server.cli.args import CliError, choice, instant_ms
from flight_server.cli.connect import client as connect
from flight_server.cli.parser import TAIL_STARTS
from flight_server.wire import allocator, messages, names
from flight_server.wire.errors import SchemaChanged, from_flight
from flight_server.wire.requests import PaimonRequest, follow_start
from flight_server.cli.output import Output
from producers.client import Client, EndpointReader, FollowProgress, error_message, locations_of


def _push_plan(args, client: Client, name: str) -> tuple[flight.FlightInfo, list[dict], list[int | None]]:
    if args.consumer_id:
        raise CliError("--consumer-id is for Paimon tables (DB.TABLE); a viewer of a push table records nothing.")
    if args.snapshot_id is not None or args.timestamp is not None:
        raise CliError("--snapshot-id and --timestamp are for Paimon tables; a push table is viewed from --from "
                       "earliest (the batches it still holds) or latest.")
    start = choice(args.start or "latest", names.VIEW_STARTS, "--from")
    info = client.view_info(name, start, args.partition)
    partitions = [args.partition] if args.partition is not None else list(range(len(info.endpoints)))
    ends: list[int | None] = [None] * len(partitions)  # caught up from the start: -e ends at once
    if args.exit and start == "earliest":
        held = client.offsets(name)
        ends = [held[str(p)].next_seq - 1 if held[str(p)].next_seq > held[str(p)].committed else None
                for p in partitions]
    return info, [{"_partition": p} for p in partitions], ends


def _follow_start(args, client: Client, table: str) -> str:
    """Paimon's scan.mode (and --snapshot-id, --timestamp) as a follow's `start`; `default` is
    Paimon's: from-timestamp with a timestamp, from-snapshot with a snapshot id, else latest-full."""
    if args.start and args.start.startswith("snapshot:"):  # the older spelling
        return args.start
    mode = choice(args.start or "default", TAIL_STARTS, "--from")
    if mode == "default":
        mode = ("from-timestamp" if args.timestamp is not None else
                "from-snapshot" if args.snapshot_id is not None else "latest-full")
    mode = "latest-full" if mode == "full" else mode
    if mode.startswith("from-snapshot") and args.snapshot_id is None:
        raise CliError(f"--from {mode} needs --snapshot-id N (the snapshot to start at).")
    if args.snapshot_id is not None and not mode.startswith("from-snapshot"):
        raise CliError(f"--snapshot-id goes with --from from-snapshot or from-snapshot-full, not {mode}.")
    if (mode == "from-timestamp") != (args.timestamp is not None):
        raise CliError("--from from-timestamp needs --timestamp TIME (epoch ms, '2026-11-24 12:00:00', or 1h: an "
                       "hour ago)." if args.timestamp is None else f"--timestamp goes with --from from-timestamp, "
                       f"not {mode}.")
    if mode == "from-timestamp":
        found = client.find_snapshot(table, timestamp_millis=instant_ms(args.timestamp, "--timestamp"))
        # As Paimon's streaming from-timestamp: the snapshots committed at or after it, no full scan.
        first = found.at_or_after
        if first is None:
            first = (client.latest_snapshot(table).snapshot_id or 0) + 1  # nothing since: the next one
        return f"snapshot:{first}"
    return follow_start(mode, args.snapshot_id)


def _follow_info(args, client: Client, table: str, start: str) -> flight.FlightInfo:
    """A follow of the Paimon table that ends at a schema change (tail then opens it again)."""
    cmd = PaimonRequest(table, follow=True, start=start, poll_interval_ms=args.poll_interval_ms,
                        consumer_id=args.consumer_id or None, on_schema_change=names.SCHEMA_CHANGE_END).to_json()
    return client.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(cmd)), options=client.options())


def _plan(args, client: Client) -> tuple[flight.FlightInfo, list[dict], str | None, list[int | None]]:
    """The endpoints to read, what each one's rows are labelled with, the Paimon table (if any),
    and for -e each endpoint's last mark to wait for (None: caught up already)."""
    kind, name = targets.parse(args.target, "target")
    if kind == names.PUSH:
        info, labels, ends = _push_plan(args, client, name)
        return info, labels, None, ends
    if args.partition is not None:
        raise CliError("--partition is for push tables; a Paimon follow reads every bucket.")
    info = _follow_info(args, client, name, _follow_start(args, client, name))
    # -e: the follow is caught up once every endpoint is done with the snapshot latest now (the
    # plan pinned a start at or before it).
    latest = (client.latest_snapshot(name).snapshot_id or 0) if args.exit else None
    return info, [{} for _ in info.endpoints], name, [latest] * len(info.endpoints)


def cmd_tail(args) -> int:
    allocator.reuse_batch_buffers()
    client = connect(args)
    info, labels, table, ends = _plan(args, client)
    printer = Output(args.format, args.limit)
    if args.limit == 0:  # the plan checked the target; there is nothing to wait for
        printer.finish()
        return 0
    # -e: an endpoint is caught up once its mark reaches its end (a push view's seq, a follow's
    # done); a partition that held nothing, or a table with no snapshot, at once
    caught_up = [not args.exit or (end is None if table is None else end == 0) for end in ends]
    if all(caught_up) and args.exit:
        printer.finish()
        return 0
    while True:
        status, resume = _read(args, client, printer, info, labels, table, ends, caught_up)
        if resume is None:
            break
        # The table's schema changed at snapshot `resume`: every row before it is printed (and a
        # consumer's progress says so); the follow is opened again there, with the new columns.
        if args.consumer_id:
            client.consumer_commit(table, args.consumer_id, resume)
        info = _follow_info(args, client, table, f"snapshot:{resume}")
        printer.clear_rate()
        print(f"flight_cli tail: Paimon table {table!r} changed its schema at snapshot {resume}; reading on from "
              f"there with its columns: {', '.join(info.schema.names)}", file=sys.stderr)
        labels = [{} for _ in info.endpoints]
        ends = [ends[0]] * len(info.endpoints)
        caught_up = [not args.exit] * len(info.endpoints)
    printer.finish()
    return status


def _read(args, client: Client, printer: Output, info: flight.FlightInfo, labels: list[dict], table: str | None,
          ends: list[int | None], caught_up: list[bool]) -> tuple[int, int | None]:
    """Print the endpoints' rows until the end (Ctrl-C, --limit, -e, an error): the exit status,
    and the snapshot to open the follow again at when every endpoint ended at a schema change."""
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
    open_streams, status, resume = len(info.endpoints), 0, None
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
                error = from_flight(item)
                snapshot = error.detail.get("snapshot") if isinstance(error, SchemaChanged) else None
                if isinstance(snapshot, int):  # this endpoint sent everything before it: wait for the others
                    resume = snapshot if resume is None else min(resume, snapshot)
                    continue
                printer.clear_rate()
                print(f"flight_cli tail: {error_message(item)}", file=sys.stderr)
                status, resume = 1, None
                break
            i, batch, metadata = item
            mark = messages.read_mark(metadata)
            extra = dict(labels[i])
            if mark.seq is not None:
                extra["_seq"] = mark.seq
            if mark.snapshot is not None:
                extra["_snapshot"] = mark.snapshot
            if batch.num_rows and not printer.batch(batch, extra):
                resume = None
                break
            # Printed first, committed after: a crash repeats at most what was not committed.
            nxt = progress.update(i, metadata)
            if nxt is not None and args.consumer_id:
                client.consumer_commit(table, args.consumer_id, nxt)
            if not caught_up[i]:
                reached = mark.seq if table is None else mark.done
                caught_up[i] = reached is not None and reached >= ends[i]
                if all(caught_up):
                    resume = None
                    break
    except KeyboardInterrupt:
        resume = None  # Ctrl-C is how a viewer ends
    except BrokenPipeError:
        # `tail | head`: the reader of our output is gone. Point stdout at /dev/null so the final
        # flush at exit does not raise again, and end quietly.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        resume = None
    for reader in readers:
        reader.cancel()
    return status, resume
