"""A small client for flight-paimon: actions, push sinks and readers over one FlightClient."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Iterator
from typing import NamedTuple

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.wire import messages, names
from flight_server.wire.errors import (
    Unavailable,
    error_message,  # noqa: F401  (re-exported for callers)
    from_flight,
)
from flight_server.wire.schemas import encode_schema
from producers.credentials import Credentials
from producers.paimon_sink import (
    DEFAULT_MAX_UNACKED,
    DEFAULT_MAX_UNACKED_BYTES,
    PaimonSink,
)
from producers.sink import TableSink


class _Actions:
    """flight_server.wire.actions, imported at its first use (an import statement: thread-safe): its
    fifty dataclasses take a tenth of a second to build, which `flight_cli list` and `tail` never use."""

    def __getattr__(self, name: str):
        from flight_server.wire import actions

        return getattr(actions, name)


wa = _Actions()


def drain_acks(acks, name: str) -> tuple[threading.Thread, list[BaseException]]:
    """Read a do_put's acks on a thread of their own while its batches go out (a long stream never
    fills their buffer): the thread, started, and a list that gets the stream's error, if any
    (the writer's close raises it too)."""
    errors: list[BaseException] = []

    def drain() -> None:
        try:
            while acks.read() is not None:
                pass
        except BaseException as e:  # noqa: BLE001 - the stream's error: the caller raises it
            errors.append(e)

    reader = threading.Thread(target=drain, name=name, daemon=True)
    reader.start()
    return reader, errors


def _end(writer, ack_reader: threading.Thread) -> None:
    """Half-close a do_put, wait for its acks to end (the server's answer), then close it (which
    raises the stream's error, if any)."""
    try:
        writer.done_writing()
    finally:
        ack_reader.join()
        writer.close()


class FollowProgress:
    """A consumer's progress over the endpoints of a Paimon follow, from their `{"done": N}` marks.

    Feed it every chunk's app_metadata after processing the chunk; it returns the next snapshot
    to commit (`consumer_commit`) when every endpoint has moved past one more snapshot.
    """

    def __init__(self, endpoints: int):
        self._done = [0] * endpoints
        self._committed = 0

    def update(self, endpoint: int, metadata) -> int | None:
        done = messages.read_mark(metadata).done
        if done is None:
            return None
        self._done[endpoint] = max(self._done[endpoint], done)
        nxt = min(self._done) + 1
        if min(self._done) == 0 or nxt <= self._committed:
            return None
        self._committed = nxt
        return nxt


class Chunk(NamedTuple):
    """A batch and the app_metadata beside it, as an endpoint's stream delivers them."""

    data: pa.RecordBatch | None
    app_metadata: pa.Buffer | None


class EndpointReader:
    """One endpoint's stream from the first of its `locations` that answers (servers over one
    warehouse serve each other's Paimon tickets): a server that is UNAVAILABLE is skipped for the
    next. With `resume`, one that breaks off mid-stream is too, and the next location's stream
    resumes after the rows already received: for tickets whose stream is deterministic (a planned
    Paimon snapshot or delta: the same splits read in the same order). Without it, a break-off
    ends the read with its error. Iterate it for the chunks; `cancel()` (any thread) ends it."""

    def __init__(self, locations: list[str], ticket: flight.Ticket, credentials: Credentials,
                 timeout: float | None = None, resume: bool = False):
        self.locations, self.ticket, self.credentials, self.timeout = locations, ticket, credentials, timeout
        self.resume = resume
        self.uri: str | None = None  # the location being read
        self.failovers = 0
        self._reader = None
        self._cancelled = False

    def __iter__(self) -> Iterator[Chunk]:
        last: BaseException | None = None
        done_rows = 0  # rows already handed out: a resumed stream skips them
        for uri in self.locations:
            if self._cancelled:
                return
            client = Client(uri, credentials=self.credentials)
            sent, skip = False, done_rows
            try:
                self.uri, self._reader = uri, client.flight.do_get(self.ticket, options=client.options(self.timeout))
                for chunk in self._reader:
                    sent = True
                    data = chunk.data
                    if skip and data is not None:
                        if data.num_rows <= skip:
                            skip -= data.num_rows
                            continue
                        data, skip = data.slice(skip), 0
                    done_rows += data.num_rows if data is not None else 0
                    yield Chunk(data, chunk.app_metadata)
                return
            except (flight.FlightError, pa.ArrowException) as e:
                if not isinstance(from_flight(e), Unavailable) or (sent and not self.resume) or self._cancelled:
                    raise
                last = e
                self.failovers += 1
            finally:
                client.close()
        if last is None:
            raise ValueError("an endpoint with no location to read it from")
        raise last

    def cancel(self) -> None:
        self._cancelled = True
        if self._reader is not None:
            self._reader.cancel()


def locations_of(endpoint: flight.FlightEndpoint, default: str) -> list[str]:
    """An endpoint's location URIs in order; `default` (the planning server) when it lists none."""
    uris = [loc.uri.decode() if isinstance(loc.uri, bytes) else str(loc.uri) for loc in endpoint.locations]
    return uris or [default]


class Client:
    """Talks to one flight-paimon server. Every unary call carries `timeout` seconds."""

    def __init__(self, uri: str = "grpc://127.0.0.1:8815", timeout: float = 30.0,
                 max_reconnect_backoff_s: float | None = None, token: str | None = None,
                 tls_root_certs=None, cert_chain=None, private_key=None, credentials: Credentials | None = None):
        """For a secured server: `token` (sent as `authorization: Bearer TOKEN`), `tls_root_certs`
        (the CA of the server's certificate, PEM bytes or a file path; the URI is grpc+tls://),
        `cert_chain` and `private_key` (this client's certificate, when the server demands one:
        mTLS); or all of them as one `credentials`.

        `max_reconnect_backoff_s` caps gRPC's wait between connection attempts after the server
        went away (gRPC's own default grows to 120 s, and its resolver waits 30 s between
        re-resolutions; docs/benchmarks_ingest.md, "Reaching a restarted server"); it caps both,
        and a sink that resumes writes sets it low."""
        self.uri = uri
        self.timeout = timeout
        self.credentials = credentials or Credentials.of(token, tls_root_certs, cert_chain, private_key)
        if self.credentials.tls and not uri.startswith("grpc+tls://"):
            raise ValueError(f"TLS certificates were given but {uri!r} is not a TLS address; use grpc+tls://HOST:PORT.")
        options = []
        if max_reconnect_backoff_s is not None:
            ms = max(1, int(max_reconnect_backoff_s * 1000))
            options = [("grpc.initial_reconnect_backoff_ms", min(100, ms)), ("grpc.min_reconnect_backoff_ms", min(100, ms)),
                       ("grpc.max_reconnect_backoff_ms", ms), ("grpc.dns_min_time_between_resolutions_ms", min(100, ms))]
        self.flight = flight.FlightClient(uri, generic_options=options, **self.credentials.client_kwargs())

    def options(self, timeout: float | None = -1.0) -> flight.FlightCallOptions:
        """Every call's options: its timeout (default: the client's), and the bearer token."""
        return flight.FlightCallOptions(timeout=self.timeout if timeout == -1.0 else timeout,
                                        headers=self.credentials.headers())

    def action(self, name: str, body: dict | wa.Body | None = None) -> dict:
        """Any action by name, its body a typed value (flight_server.wire.actions) or a dict; its
        result as the JSON object the server sent (the methods below read it as its type)."""
        raw = body.to_json() if isinstance(body, wa.Body) else (body or {})
        results = list(self.flight.do_action(flight.Action(name, json.dumps(raw).encode()), options=self.options()))
        return json.loads(results[0].body.to_pybytes()) if results else {}

    def _typed(self, name: str, body: wa.Body):
        """An action's result read as its type (the one `wa.ACTIONS` names for it)."""
        return wa.ACTIONS[name].result.from_json(self.action(name, body), name)

    def health(self) -> wa.Health:
        return self._typed(names.HEALTH, wa.HealthBody())

    # -- push tables ---------------------------------------------------------------------

    def register(self, name: str, schema: pa.Schema, capacity: int = 16, partitions: int = 1,
                 writers: int = 1, end_marker: str = "required", idle_timeout_s: float | None = None,
                 capacity_bytes: int | None = None) -> wa.Registered:
        """Register a push table. `end_marker="optional"` lets plain Flight clients end a stream by
        half-closing (unsafe: a crashed producer looks the same); `idle_timeout_s` fails a
        partition whose producers send nothing for that long; `capacity_bytes` bounds each
        partition in bytes as well as in batches (a server with --max-memory sets one anyway)."""
        return self._typed(names.REGISTER, wa.RegisterBody(
            name, encode_schema(schema), capacity=capacity, partitions=partitions, writers=writers,
            end_marker=end_marker, idle_timeout_s=idle_timeout_s, capacity_bytes=capacity_bytes))

    def register_streaming_table(self, name: str, schema: pa.Schema, capacity: int = 16,
                                 partitions: int = 1, writers: int = 1, partition: int = 0,
                                 call_timeout: float | None = None) -> TableSink:
        """Register a push table and return a sink into `partition` (more via `sink`)."""
        self.register(name, schema, capacity, partitions, writers)
        return TableSink(self, name, partition, schema, call_timeout)

    def sink(self, name: str, partition: int = 0, call_timeout: float | None = None) -> TableSink:
        """Attach a sink to a partition of an already registered push table (the `write` grant is
        enough). Nothing is retried: a push table is memory and does not outlive its server."""
        descriptor = flight.FlightDescriptor.for_path(*names.push_path(name))
        return TableSink(self, name, partition, self.flight.get_schema(descriptor, options=self.options()).schema,
                         call_timeout)

    def push_named(self, name: str, partition: int, producer: str, batches: list[tuple[int, pa.RecordBatch]],
                   call_timeout: float | None = None) -> int:
        """Push `(seq, batch)` pairs into a partition as the named `producer`, idempotently: the
        server appends only seqs above the last it appended from that producer (a retry after a
        crash adds nothing twice). Returns the batches sent; raises if the stream failed.

        A named producer holds no writer slot and never ends the partition (docs/protocol.md)."""
        if not batches:
            return 0
        descriptor = flight.FlightDescriptor.for_command(json.dumps(names.named_push_command(name, partition, producer)))
        writer, acks = self.flight.do_put(descriptor, batches[0][1].schema, options=self.options(call_timeout))
        try:
            for i, (seq, batch) in enumerate(batches):
                last = i == len(batches) - 1
                writer.write_with_metadata(batch, pa.py_buffer(messages.batch_seq(seq, len(batches) if last else None)))
            writer.done_writing()
            while acks.read() is not None:
                pass  # one ack per batch; the stream's end says every batch was taken
        finally:
            writer.close()
        return len(batches)

    def stage(self, table: str, stage: str, attempt: str, schema: pa.Schema, batches: Iterable[pa.RecordBatch],
              call_timeout: float | None = None, merge_schema: bool = False) -> int:
        """Stage one attempt of a job's task: the batches are written into files of Paimon table
        `table` but not committed until `commit_staged` names the attempt (with the job's other
        attempts, in one snapshot); `abort_staged` discards them. Returns the batches staged;
        raises if the stream failed (then nothing of this attempt is staged). `merge_schema`: the
        columns of `schema` the table lacks are added to it first (the admin grant)."""
        descriptor = flight.FlightDescriptor.for_command(
            json.dumps(names.stage_command(table, stage, attempt, merge_schema)))
        writer, acks = self.flight.do_put(descriptor, schema, options=self.options(call_timeout))
        reader, drained = drain_acks(acks, "stage-acks")
        n = 0
        try:
            for batch in batches:
                writer.write_batch(batch)
                n += 1
            writer.write_metadata(pa.py_buffer(messages.end(n)))
        except BaseException as e:  # the attempt failed: say so in-band, so the server stages nothing
            try:
                writer.write_metadata(pa.py_buffer(messages.producer_error(f"the staged attempt failed: {e}")))
            except Exception:  # noqa: BLE001 - the stream is broken already: the server sees that instead
                pass
            try:
                _end(writer, reader)
            except Exception:  # noqa: BLE001 - the server's answer is this failure, echoed: raise the cause
                pass
            raise
        _end(writer, reader)
        if drained:
            raise drained[0]
        return n

    def commit_staged(self, table: str, stage: str, attempts: list[str], producer: str | None = None,
                      seq: int | None = None) -> wa.StagedCommit:
        """Commit the staged attempts as one snapshot (the stage's others are discarded); with
        `producer`/`seq`, exactly-once: a seq the table holds commits nothing (`skipped`)."""
        return self._typed(names.COMMIT_STAGED, wa.CommitStagedBody(table, stage, list(attempts), producer, seq))

    def abort_staged(self, table: str, stage: str) -> wa.StagedAbort:
        """Discard everything the stage's attempts staged."""
        return self._typed(names.ABORT_STAGED, wa.AbortStagedBody(table, stage))

    def fail(self, name: str, message: str, partition: int | None = None) -> None:
        self.action(names.FAIL, wa.FailBody(name, message, partition))

    def drop(self, name: str) -> None:
        """Drop a push table."""
        self.action(names.DROP, wa.DropBody(name=name))

    def drop_table(self, table: str) -> None:
        """Drop a Paimon table: its data and snapshots are deleted."""
        self.action(names.DROP, wa.DropBody(table=table))

    def commit(self, name: str, offsets: dict[int, int], discard: bool = False) -> None:
        """Free the batches below each offset; `discard` frees them even if no reader was sent them."""
        self.action(names.COMMIT, wa.CommitBody(name, {str(p): s for p, s in offsets.items()}, discard))

    def stats(self, name: str | None = None, table: str | None = None) -> wa.Stats:
        """A push table's (`name`; all when both are None) or a Paimon table's (`table`, read from the
        table) statistics, and this server's durable writes and maintenance."""
        return self._typed(names.STATS, wa.StatsBody(name, table))

    def offsets(self, name: str, timestamp_ms: int | None = None) -> dict[str, wa.PartitionOffsets]:
        """Where each partition of push table `name` stands, by partition number ("0", "1", ...):
        batches [committed, next_seq) are held, readable by replay ranges; with `timestamp_ms`,
        `at_timestamp` is the first held batch appended at or after then."""
        return self._typed(names.OFFSETS, wa.OffsetsBody(name, timestamp_ms)).partitions

    # -- Paimon tables: durable writes ----------------------------------------------------

    def create_table(self, table: str, schema: pa.Schema, primary_keys: list[str] | None = None,
                     partition_keys: list[str] | None = None, options: dict[str, str] | None = None) -> wa.TableCreated:
        """Create a Paimon table (its database too, when missing)."""
        return self._typed(names.CREATE_TABLE, wa.CreateTableBody(
            table, encode_schema(schema), primary_keys or None, partition_keys or None, options or None))

    def alter_table(self, table: str, changes: list[wa.SchemaChange]) -> wa.TableAltered:
        """Paimon's ALTER TABLE: `changes` (wa.SchemaChange.add_column(...), ...) applied in order as one
        new schema, or none of them (INVALID_ARGUMENT with Paimon's reason)."""
        return self._typed(names.ALTER_TABLE, wa.AlterTableBody(table, [c.to_json() for c in changes]))

    def producer_state(self, table: str, producer: str) -> int | None:
        """The named producer's last committed seq in the table (None: nothing committed yet)."""
        return self._typed(names.PRODUCER_STATE, wa.ProducerStateBody(table, producer)).last_seq

    # -- Paimon tables: snapshots, consumers, maintenance ----------------------------------

    def latest_snapshot(self, table: str) -> wa.Snapshots:
        """The table's latest and earliest snapshot ids (None while it has none)."""
        return self._typed(names.LATEST_SNAPSHOT, wa.TableBody(table))

    def find_snapshot(self, table: str, timestamp_millis: int | None = None, tag: str | None = None) -> wa.FoundSnapshot:
        """The snapshots around a commit time, or the snapshot of a tag."""
        return self._typed(names.FIND_SNAPSHOT, wa.FindSnapshotBody(table, timestamp_millis, tag))

    def consumer_progress(self, table: str, consumer_id: str) -> int | None:
        """The next snapshot the consumer will read (None: it has no recorded progress)."""
        return self._typed(names.CONSUMER_PROGRESS, wa.ConsumerBody(table, consumer_id)).next_snapshot

    def consumer_commit(self, table: str, consumer_id: str, next_snapshot: int) -> None:
        """Record that the consumer read every snapshot before `next_snapshot`."""
        self.action(names.CONSUMER_COMMIT, wa.ConsumerCommitBody(table, consumer_id, next_snapshot))

    def compact(self, table: str, partition: dict | None = None, partitions: list[dict] | None = None) -> wa.Compacted:
        """Paimon's compact: the whole table, or the `partitions` ({column: value} each; `partition`: one)."""
        return self._typed(names.COMPACT, wa.CompactBody(table, partition, partitions))

    def expire_snapshots(self, table: str, retain_max: int | None = None, retain_min: int | None = None,
                         older_than=None, max_deletes: int | None = None) -> wa.SnapshotsExpired:
        return self._typed(names.EXPIRE_SNAPSHOTS, wa.ExpireSnapshotsBody(table, retain_max, retain_min, older_than,
                                                                          max_deletes))

    def remove_orphan_files(self, table: str, older_than=None, dry_run: bool = False) -> wa.OrphansRemoved:
        """Paimon's remove_orphan_files; `dry_run` lists what it would delete and deletes nothing."""
        return self._typed(names.REMOVE_ORPHAN_FILES, wa.RemoveOrphanFilesBody(table, older_than, dry_run or None))

    def create_tag(self, table: str, tag: str, snapshot: int | None = None,
                   time_retained: str | None = None) -> wa.TagCreated:
        """Paimon's create_tag: tag `snapshot` (the latest when None); `time_retained` such as '1 d'."""
        return self._typed(names.CREATE_TAG, wa.CreateTagBody(table, tag, snapshot, time_retained))

    def delete_tag(self, table: str, tag: str) -> list[str]:
        """Paimon's delete_tag: one tag, or several comma-separated; the tags deleted."""
        return self._typed(names.DELETE_TAG, wa.DeleteTagBody(table, tag)).deleted

    def paimon_sink(self, table: str, producer: str | None = None, reconnect_timeout: float = 60.0,
                    call_timeout: float | None = None, max_unacked: int = DEFAULT_MAX_UNACKED,
                    max_unacked_bytes: int = DEFAULT_MAX_UNACKED_BYTES,
                    merge_schema: pa.Schema | None = None) -> PaimonSink:
        """A durable writer into Paimon table `table`: `write` batches, `close` returns once every
        batch is committed. A named `producer` is exactly-once: it resumes after the table's
        `last_seq` and, if the server goes away, reconnects and resends only what the table lacks.
        Every call the sink makes, opening it too, is retried while the server is away (UNAVAILABLE,
        CANCELLED), within `reconnect_timeout` s; a user's mistake (NOT_FOUND, INVALID_ARGUMENT,
        PERMISSION_DENIED, UNAUTHENTICATED) is raised at once. At most `max_unacked` batches and
        `max_unacked_bytes` are in flight (kept for resending): `write` waits past either; within
        them the window follows the acks' latency (docs/protocol.md). `merge_schema`: the batches'
        schema, whose columns the table lacks are added to it (and types widened where Paimon
        allows) as the stream opens (the admin grant; docs/protocol.md, "Schema evolution")."""
        return PaimonSink(self, table, producer, reconnect_timeout, call_timeout, max_unacked, max_unacked_bytes,
                          merge_schema)

    # -- reading -------------------------------------------------------------------------

    def info(self, name: str, partition: int | None = None) -> flight.FlightInfo:
        descriptor = flight.FlightDescriptor.for_path(*names.push_path(name, partition))
        return self.flight.get_flight_info(descriptor, options=self.options())

    def view_info(self, name: str, start: str = "latest", partition: int | None = None) -> flight.FlightInfo:
        """Endpoints of a viewer: what the partitions are sent from `start` ("earliest" or "latest"),
        without consuming, committing or failing anything (flight_cli tail reads these)."""
        cmd = names.view_command(name, start, partition)
        return self.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(cmd)),
                                           options=self.options())

    def replay_info(self, name: str, partition: int, start: int, end: int | None) -> flight.FlightInfo:
        """The endpoint of batches [start, end) of a partition, readable again until a commit passes
        them; `end` None reads to the partition's EOF (freeing only what a waiting producer needs)."""
        cmd = names.replay_command(name, partition, start, end)
        return self.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(cmd)),
                                           options=self.options())

    def read_endpoint(self, endpoint: flight.FlightEndpoint, timeout: float | None = None) -> Iterator[pa.RecordBatch]:
        """Stream one endpoint's batches; `timeout` bounds the whole call (None: unbounded)."""
        reader = self.flight.do_get(endpoint.ticket, options=self.options(timeout))
        for chunk in reader:
            yield chunk.data

    def close(self) -> None:
        self.flight.close()
