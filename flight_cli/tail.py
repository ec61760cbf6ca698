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

When its server goes away (restarts, shuts down, cannot be reached), tail reconnects within
`--reconnect-timeout` seconds, as kcat does, saying so on stderr, and resumes exactly where it was
(producers/follow_cursor.py): a follow from the snapshot after the last one every endpoint
finished, without printing again the rows of it already printed; a view of the same server after
the last seq printed, of a restarted one (a push table is memory: a new table) from the oldest
batch it holds. Past the deadline it ends with exit code 1, naming the server.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time

import pyarrow as pa
import pyarrow.flight as flight

from flight_cli import targets
from flight_cli.args import CliError, choice, instant_ms
from flight_cli.connect import client as connect
from flight_cli.output import Output
from flight_cli.parser import TAIL_STARTS
from flight_server.wire import allocator, messages, names
from flight_server.wire.errors import (
    Cancelled,
    NotFound,
    SchemaChanged,
    TimedOut,
    Unavailable,
    WrongState,
    error_message,
    from_flight,
)
from flight_server.wire.requests import PaimonRequest, follow_start, split_system
from producers.client import Client, EndpointReader, FollowProgress, locations_of
from producers.follow_cursor import FollowCursor, ViewCursor

RETRY_EVERY_S = 0.5  # between attempts to plan again while the server is away
GONE = (Unavailable, Cancelled, TimedOut)  # what a server that went away looks like to a stream or a call


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
    Paimon's: from-timestamp with a timestamp, from-snapshot with a snapshot id, else latest-full.
    latest and latest-full are pinned to the snapshot latest now, so that the follow opened again
    after a reconnect starts where this one did."""
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
    if mode in ("latest", "latest-full"):
        latest = client.latest_snapshot(table).snapshot_id
        if latest is None or mode == "latest":
            return f"snapshot:{(latest or 0) + 1}"
        return f"snapshot-full:{latest}"
    return follow_start(mode, args.snapshot_id)


def _follow_info(args, client: Client, target: str, start: str) -> flight.FlightInfo:
    """A follow of the Paimon table (or its audit_log) that ends at a schema change (tail then
    opens it again)."""
    table, system = split_system(target)
    cmd = PaimonRequest(table, follow=True, start=start, poll_interval_ms=args.poll_interval_ms,
                        consumer_id=args.consumer_id or None, on_schema_change=names.SCHEMA_CHANGE_END,
                        system=system).to_json()
    return client.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(cmd)), options=client.options())


class _Ended:
    """How one read of the endpoints ended: `status` (exit code), `resume` (every endpoint ended at
    a schema change at that snapshot), `gone` (the server went away: this error)."""

    def __init__(self, status: int = 0, resume: int | None = None, gone: BaseException | None = None):
        self.status, self.resume, self.gone = status, resume, gone


class Tail:
    """One `flight_cli tail`: its plan, what it printed (the cursor), and its reads until the end."""

    def __init__(self, args, client: Client):
        self.args, self.client = args, client
        self.kind, self.name = targets.parse(args.target, "target")
        self.table = split_system(self.name)[0] if self.kind == names.PAIMON else None  # what actions name
        self.printer = Output(args.format, args.limit)
        self.server_started: float | None = None  # a push view's server's start: a restart makes a new table

    def plan(self) -> None:
        """The endpoints to read, what each one's rows are labelled with, and for -e each endpoint's
        last mark to wait for (None: caught up already)."""
        args, client = self.args, self.client
        if self.kind == names.PUSH:
            self.info, self.labels, self.ends = _push_plan(args, client, self.name)
            self.cursor: FollowCursor | ViewCursor = ViewCursor(len(self.info.endpoints))
            self.server_started = _started(client)
            return
        if args.partition is not None:
            raise CliError("--partition is for push tables; a Paimon follow reads every bucket.")
        start = _follow_start(args, client, self.table)
        self.info = _follow_info(args, client, self.name, start)
        # -e: the follow is caught up once every endpoint is done with the snapshot latest now (the
        # plan pinned a start at or before it).
        latest = (client.latest_snapshot(self.table).snapshot_id or 0) if args.exit else None
        self.labels, self.ends = [{} for _ in self.info.endpoints], [latest] * len(self.info.endpoints)
        self.cursor = FollowCursor(len(self.info.endpoints), start)

    def run(self) -> int:
        args, printer = self.args, self.printer
        self.plan()
        if args.limit == 0:  # the plan checked the target; there is nothing to wait for
            printer.finish()
            return 0
        # -e: an endpoint is caught up once its mark reaches its end (a push view's seq, a follow's
        # done); a partition that held nothing, or a table with no snapshot, at once
        self.caught_up = [not args.exit or (end is None if self.table is None else end == 0) for end in self.ends]
        if all(self.caught_up) and args.exit:
            printer.finish()
            return 0
        self.progress = FollowProgress(len(self.info.endpoints))
        while True:
            ended = self._read()
            if ended.gone is not None:
                status = self._reconnect(ended.gone)
                if status is None:
                    continue
                printer.finish()
                return status
            if ended.resume is None:
                printer.finish()
                return ended.status
            self._schema_changed(ended.resume)

    def _schema_changed(self, resume: int) -> None:
        """The table's schema changed at snapshot `resume`: every row before it is printed (and a
        consumer's progress says so); the follow is opened again there, with the new columns."""
        if self.args.consumer_id:
            self.client.consumer_commit(self.table, self.args.consumer_id, resume)
        start = f"snapshot:{resume}"
        self.info = _follow_info(self.args, self.client, self.name, start)
        self.printer.clear_rate()
        print(f"flight_cli tail: Paimon table {self.table!r} changed its schema at snapshot {resume}; reading on "
              f"from there with its columns: {', '.join(self.info.schema.names)}", file=sys.stderr)
        n = len(self.info.endpoints)
        self.labels, self.ends = [{} for _ in range(n)], [self.ends[0]] * n
        self.caught_up = [not self.args.exit] * n
        self.cursor, self.progress = FollowCursor(n, start), FollowProgress(n)

    # -- reconnecting -----------------------------------------------------------------------

    def _reconnect(self, gone: BaseException) -> int | None:
        """Plan the read again on the server once it is back, within --reconnect-timeout: None when
        it is (the read goes on), else the exit status."""
        args, printer = self.args, self.printer
        printer.clear_rate()
        if args.reconnect_timeout <= 0:
            print(f"flight_cli tail: {error_message(gone)}", file=sys.stderr)
            return 1
        print(f"flight_cli tail: {error_message(gone)}; reconnecting to {args.uri} (for up to "
              f"{args.reconnect_timeout:g} s, --reconnect-timeout)...", file=sys.stderr)
        deadline = time.monotonic() + args.reconnect_timeout
        last: BaseException = gone
        try:
            while True:
                try:
                    said = self._replan()
                    break
                except Exception as e:  # noqa: BLE001 - a server still away is retried; anything else is raised
                    if not self._retryable(e):
                        raise
                    last = e
                left = deadline - time.monotonic()
                if left <= 0:
                    print(f"flight_cli tail: could not reconnect to {args.uri} within {args.reconnect_timeout:g} s "
                          f"(--reconnect-timeout): {error_message(last)}", file=sys.stderr)
                    return 1
                time.sleep(min(RETRY_EVERY_S, left))  # the client's own backoff: nothing to wait on
        except KeyboardInterrupt:
            return 0  # Ctrl-C is how a viewer ends, reconnecting or not
        print(f"flight_cli tail: reconnected to {args.uri}; {said}", file=sys.stderr)
        return None

    def _retryable(self, e: BaseException) -> bool:
        """Whether the server is still away: unreachable, stopping, or (a push table) not registered
        again yet on a restarted server."""
        kind = from_flight(e) if isinstance(e, (flight.FlightError, pa.ArrowException, KeyError)) else None
        return isinstance(kind, GONE) or (self.kind == names.PUSH and isinstance(kind, NotFound))

    def _replan(self) -> str:
        """Plan the read again on a new connection, where it was: what it resumes from, in words."""
        old, self.client = self.client, connect(self.args, reconnecting=True)
        old.close()
        health = self.client.health()
        if health.status != "serving":
            raise Unavailable(f"the server at {self.args.uri} is {health.status}")
        if self.kind == names.PUSH:
            return self._replan_view()
        cursor = self.cursor
        assert isinstance(cursor, FollowCursor)
        start = cursor.resume_start()
        info = _follow_info(self.args, self.client, self.name, start)
        cursor.reopened(len(info.endpoints))
        self.info = info
        if self.args.consumer_id and start.startswith("snapshot:"):
            # its commit may have been lost with the server; every row before `start` is printed
            self.client.consumer_commit(self.table, self.args.consumer_id, int(start.split(":")[1]))
        who = f"consumer {self.args.consumer_id!r} " if self.args.consumer_id else ""
        at = start.partition(":")[2]
        if start.startswith("snapshot:"):
            return f"{who}resuming at snapshot {at}, without printing again a row already printed"
        if start.startswith("snapshot-full:"):
            return f"{who}reading snapshot {at} in full again, without printing again a row already printed"
        return f"{who}opening the follow again at {start}, without printing again a row already printed"

    def _replan_view(self) -> str:
        cursor = self.cursor
        assert isinstance(cursor, ViewCursor)
        started = _started(self.client)
        same = self.server_started is not None and abs(started - self.server_started) < 2.0
        if not same and self.args.exit:
            raise WrongState(f"The server of push table {self.name!r} restarted, and with it went the batches there "
                             "were when tail started (a push table is memory); -e has nothing more to print.")
        self.info = self.client.view_info(self.name, "earliest", self.args.partition)
        if len(self.info.endpoints) != cursor.endpoints:
            raise WrongState(f"Push table {self.name!r} has {len(self.info.endpoints)} partitions now, not "
                             f"{cursor.endpoints}: it was registered again with other partitions; tail it again.")
        cursor.reopened(same)
        self.server_started = started
        if same:
            return "viewing on after the last batch printed of each partition"
        return (f"the server restarted, and push table {self.name!r} is memory: viewing the new table from the oldest "
                "batch it holds (its seqs start again at 0)")

    # -- reading ----------------------------------------------------------------------------

    def _read(self) -> _Ended:
        """Print the endpoints' rows until the end (Ctrl-C, --limit, -e, an error, a schema change,
        the server gone)."""
        client, printer, info = self.client, self.printer, self.info
        results: queue.Queue = queue.Queue(maxsize=8)
        done = object()
        readers = []
        finished = threading.Event()  # this read is over: its pullers stop (a reconnect starts new ones)

        def put(item) -> bool:
            while not finished.is_set():
                try:
                    results.put(item, timeout=0.5)
                    return True
                except queue.Full:
                    continue
            return False

        def pull(i: int, endpoint):
            try:
                reader = EndpointReader(locations_of(endpoint, client.uri), endpoint.ticket, client.credentials)
                readers.append(reader)
                for chunk in reader:
                    if not put((i, chunk.data, chunk.app_metadata)):
                        return
            except Exception as e:  # noqa: BLE001 - every failure is printed and sets the exit status
                put(e)
            finally:
                put(done)

        for i, ep in enumerate(info.endpoints):
            threading.Thread(target=pull, args=(i, ep), daemon=True, name="tail-pull").start()
        open_streams, ended = len(info.endpoints), _Ended()
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
                        ended.resume = snapshot if ended.resume is None else min(ended.resume, snapshot)
                        continue
                    if self._gone(error):
                        ended = _Ended(gone=item)
                        break
                    printer.clear_rate()
                    print(f"flight_cli tail: {error_message(item)}", file=sys.stderr)
                    ended = _Ended(status=1)
                    break
                if not self._chunk(*item):
                    ended = _Ended()
                    break
        except KeyboardInterrupt:
            ended = _Ended()  # Ctrl-C is how a viewer ends
        except BrokenPipeError:
            # `tail | head`: the reader of our output is gone. Point stdout at /dev/null so the final
            # flush at exit does not raise again, and end quietly.
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ended = _Ended()
        except Exception as e:  # noqa: BLE001 - a consumer's commit the server's going away broke: reconnect
            if not self._retryable(e) or self.kind == names.PUSH:
                raise
            ended = _Ended(gone=e)
        finished.set()
        for reader in readers:
            reader.cancel()
        return ended

    def _chunk(self, i: int, batch, metadata) -> bool:
        """Print one chunk's new rows, then commit a consumer's progress; False once tail is done."""
        batch = self.cursor.admit(i, batch, metadata)
        mark = messages.read_mark(metadata)
        extra = dict(self.labels[i])
        if mark.seq is not None:
            extra["_seq"] = mark.seq
        if mark.snapshot is not None:
            extra["_snapshot"] = mark.snapshot
        if batch is not None and batch.num_rows and not self.printer.batch(batch, extra):
            return False
        # Printed first, committed after: a crash repeats at most what was not committed.
        nxt = self.progress.update(i, metadata)
        if nxt is not None and self.args.consumer_id:
            self.client.consumer_commit(self.table, self.args.consumer_id, nxt)
        if not self.caught_up[i]:
            reached = mark.seq if self.table is None else mark.done
            self.caught_up[i] = reached is not None and reached >= self.ends[i]
            if all(self.caught_up):
                return False
        return True

    def _gone(self, error) -> bool:
        """Whether a stream's error says its server went away. A push view's partitions are failed
        by a server that shuts down, which the server's own health then tells."""
        if isinstance(error, GONE):
            return True
        if self.kind != names.PUSH or not isinstance(error, WrongState):
            return False
        try:
            return self.client.health().status != "serving"
        except Exception as e:  # noqa: BLE001 - a health call that fails says the same when the server is away
            return self._retryable(e)


def _started(client: Client) -> float:
    """When the server started (its health's uptime, as a wall-clock time)."""
    return time.time() - client.health().uptime_s


def cmd_tail(args) -> int:
    allocator.reuse_batch_buffers()
    return Tail(args, connect(args)).run()
