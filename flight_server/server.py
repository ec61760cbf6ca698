"""The Flight adapter: decode the request, call the module that owns it, return a stream.

Every handler runs inside `_call`, which binds table/partition/peer/principal for logging, writes
one line per finished RPC and converts errors once through `errors.to_flight`. With --auth the
middleware has checked the call's token; a call it refused ends UNAUTHENTICATED first thing in its
handler (`authenticated`, which logs the peer), and each handler asks the call's `Access` for the
grant its table needs before touching it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time

import pyarrow as pa
import pyarrow.flight as flight
import structlog

from flight_server import actions
from flight_server.auth import ADMIN, READ, WRITE, Access, AuthConfig
from flight_server.ingest.ingest import (
    COMMIT_THREADS,
    DEFAULT_COMMIT_BYTES,
    DEFAULT_COMMIT_INTERVAL_MS,
    DEFAULT_IDLE_S,
    DEFAULT_MAX_OPEN_TABLES,
    DEFAULT_WRITE_THREADS,
    DEFAULT_WRITERS,
    Ingest,
)
from flight_server.limits import StreamSlots, TableBudget
from flight_server.maintenance.maintainer import Maintainer
from flight_server.maintenance.workers import RewriteWorker
from flight_server.metrics import (
    DEFAULT_METRICS_MAX_TABLES,
    DEFAULT_TABLE_WINDOW_S,
    Metrics,
)
from flight_server.middleware import AUTH, AuthMiddlewareFactory, access, authenticated
from flight_server.paimon.warehouse import PaimonSource
from flight_server.push.registry import PushRegistry
from flight_server.push.service import PushSource
from flight_server.source import Items, ReadPlan, Source
from flight_server.status import install_clean_details, status_name, to_flight
from flight_server.tickets import DEFAULT_LIFETIME_MS, TicketCodec
from flight_server.wire import actions as wire_actions
from flight_server.wire import descriptors, listing, messages, names
from flight_server.wire.errors import Cancelled, NotFound, Unimplemented
from flight_server.wire.requests import PaimonRequest, PushTarget, WriteTarget
from flight_server.wire.values import parse_json_object

log = structlog.get_logger(__name__)


_STREAMS = ("do_put", "do_get")


class _Call:
    """Per-RPC accounting for the one log line written when the call ends, its metrics, and its
    stream slot (`--max-streams`)."""

    def __init__(self, server: FlightPaimonServer, method: str, context, **fields):
        self.metrics, self.method = server.metrics, method
        self.access: Access = access(context)
        self.fields = {"rpc": method, "peer": context.peer() if context else None, **fields}
        if self.access.name is not None:
            self.fields["principal"] = self.access.name
        self.rows = 0
        self.bytes = 0
        self.start = time.perf_counter()
        self._counters = None  # its metrics.Served, once the call knows its table
        self._slots = None
        if method in _STREAMS:
            server.streams.acquire(method)
            self._slots = server.streams
            if self.metrics is not None:
                self.metrics.open_streams.labels(method).inc()

    def count_as(self, kind: str, table, direction: str) -> None:
        if self.metrics is not None:
            self._counters = self.metrics.served(kind, table, direction)

    def add(self, batch: pa.RecordBatch, nbytes: int | None = None) -> None:
        """Count a batch; `nbytes` when the caller knows it (RecordBatch.nbytes walks every buffer)."""
        nbytes = batch.nbytes if nbytes is None else nbytes
        self.rows += batch.num_rows
        self.bytes += nbytes
        if self._counters is not None:
            self._counters.add(batch.num_rows, nbytes)

    def client_closed(self, error: BaseException | None) -> bool:
        """A follow or a view the client closed (tail's Ctrl-C, `-e`, `--limit`): how these
        unbounded reads end, no failure of the call."""
        return isinstance(error, Cancelled) and bool(self.fields.get("mode") == names.FOLLOW_READ
                                                     or self.fields.get("view"))

    def done(self, error: BaseException | None = None) -> None:
        seconds = time.perf_counter() - self.start
        if self._slots is not None:
            self._slots.release()
        if self.metrics is not None:
            # A follow or view the client closed counts as OK, as its log line is rpc_done: an
            # error rate (status != "OK") counts failures, not every `tail -e`.
            status = "OK" if self.client_closed(error) else status_name(error)
            self.metrics.rpcs.labels(self.method, status).inc()
            self.metrics.rpc_seconds.labels(self.method).observe(seconds)
            if self._slots is not None:
                self.metrics.open_streams.labels(self.method).dec()
        fields = dict(self.fields, rows=self.rows, bytes=self.bytes, duration_ms=round(seconds * 1000, 2))
        if error is None:
            log.info("rpc_done", **fields)
        elif self.client_closed(error):
            # How follows and views end (tail's Ctrl-C): the client closing them is no failure.
            log.info("rpc_done", ended=f"the client closed the {'view' if fields.get('view') else 'follow'}", **fields)
        else:
            log.warning("rpc_failed", error=str(error).splitlines()[0][:500], **fields)


@contextlib.contextmanager
def _call(server: FlightPaimonServer, method: str, context, streaming: bool = False, **fields):
    """Log and map errors of one RPC; a `streaming` call's stream writes its line when it ends."""
    server._ready.wait()  # built (microseconds but for a call the very moment the server listens)
    authenticated(context, method)
    try:
        call = _Call(server, method, context, **fields)
    except BaseException as e:  # noqa: BLE001 - refused before it started (--max-streams): raised as a status
        where = {"rpc": method, "peer": context.peer() if context else None, **fields}
        log.warning("rpc_failed", error=str(e), **where)
        raise to_flight(e, where) from None
    try:
        yield call
    except BaseException as e:  # noqa: BLE001 - raised again as the call's Flight status
        call.done(e)
        # `from None`: the cause chain belongs in the server's log, not on the wire.
        raise to_flight(e, call.fields) from None
    if not streaming:
        call.done()


class FlightPaimonServer(flight.FlightServerBase):
    """Serves push tables and Paimon tables over Arrow Flight: decode, call a source, stream."""

    def __init__(self, location: str = "grpc://127.0.0.1:0", advertise: list[str] | None = None,
                 ticket_key: bytes | None = None, ticket_lifetime_ms: int = DEFAULT_LIFETIME_MS,
                 warehouse: str | None = None, metrics: bool = False,
                 commit_interval_ms: int = DEFAULT_COMMIT_INTERVAL_MS, commit_bytes: int = DEFAULT_COMMIT_BYTES,
                 write_threads: int = DEFAULT_WRITERS, maintenance_interval_ms: int = 1000,
                 table_idle_ms: int = int(DEFAULT_IDLE_S * 1000), write_pool: int = DEFAULT_WRITE_THREADS,
                 commit_threads: int = COMMIT_THREADS, commit_processes: int = 0,
                 max_open_tables: int = DEFAULT_MAX_OPEN_TABLES, maintenance_workers: int = 1, auth: AuthConfig | None = None, streams: StreamSlots | None = None,
                 metrics_table_window_ms: int = int(DEFAULT_TABLE_WINDOW_S * 1000),
                 metrics_max_tables: int = DEFAULT_METRICS_MAX_TABLES,
                 budget: TableBudget | None = None, warehouse_options: dict[str, str] | None = None, **kwargs):
        """`ticket_lifetime_ms`: how long after planning a ticket is served; `warehouse_options`:
        pypaimon's catalog/filesystem options (an s3:// warehouse's keys);
        `maintenance_workers`: processes compactions rewrite files in (0: the maintenance thread);
        `table_idle_ms`: a table's durable-write committer (its writers) unused this long closes;
        `max_open_tables`: past this many open, the least recently used idle committers close early;
        `write_pool`, `commit_threads`: the threads every table's durable writes and commits run on;
        `commit_processes`: the worker processes the tables' writes and commits run in (0: this one);
        `auth`: principals and grants (None: every caller may do everything); `streams`: the
        --max-streams bound; `budget`: --max-memory and the bounds on tables and partitions.
        `metrics_table_window_ms`, `metrics_max_tables`: the tables /metrics has per-table series of.
        TLS goes through pyarrow's own `tls_certificates`, `verify_client`, `root_certificates`."""
        if auth is not None:
            kwargs["middleware"] = {**kwargs.get("middleware", {}), AUTH: AuthMiddlewareFactory(auth)}
        # gRPC serves from `super().__init__` on: a call that arrives before the rest is built (a
        # producer reconnecting the moment a restarted server listens) waits for it (`_call`).
        self._ready = threading.Event()
        super().__init__(location, **kwargs)
        install_clean_details()
        self.warehouse = warehouse
        self.streams = streams or StreamSlots()
        self.push = PushRegistry(budget)
        self.pushed = PushSource(self.push)
        self.paimon = PaimonSource(warehouse, warehouse_options)
        self.sources: dict[str, Source] = {names.PUSH: self.pushed, names.PAIMON: self.paimon}
        self.ingest = Ingest(self.paimon, commit_interval_ms, commit_bytes, self._committed, write_threads,
                             table_idle_ms / 1000, write_pool, commit_threads, commit_processes, max_open_tables)
        self.maintainer = Maintainer(self.paimon, maintenance_interval_ms / 1000, committers=self.ingest.open_committer,
                                     staged=self.ingest.staging.file_names,
                                     worker=RewriteWorker(warehouse, warehouse_options, maintenance_workers))
        self.metrics = Metrics(self.push, self.paimon, self.maintainer, metrics_table_window_ms / 1000,
                               metrics_max_tables) if metrics else None
        self.action_context = actions.ActionContext(self.push, self.paimon, self.ingest, self.maintainer, time.time())
        self.action_context.on_drop.append(self.maintainer.forget)
        if self.metrics is not None:  # a dropped table's series go with it
            self.push.on_drop.append(self.metrics.forget_push_table)
            self.action_context.on_drop.append(self.metrics.forget_paimon_table)
        self.tickets = TicketCodec(ticket_key, ticket_lifetime_ms)
        host = location.rsplit(":", 1)[0]
        self.uri = f"{host}:{self.port}"
        self.advertise = advertise or [self.uri]
        self._ready.set()

    # -- discovery -----------------------------------------------------------------------

    def list_flights(self, context, criteria):
        """Push tables and Paimon tables whose name starts with the criteria's prefix, or one page of
        them by name (wire/listing.py): only the tables listed are planned."""
        with _call(self, "list_flights", context) as call:
            query = listing.parse(criteria)
            prefix, readable = query.prefix, call.access.allows
            push = [t.name for t in self.push.tables() if t.name.startswith(prefix) and readable(READ, t.name)]
            paimon = [n for n in (self.paimon.table_names() if self.warehouse else [])
                      if n.startswith(prefix) and readable(READ, n)]
            if query.paged:
                page = set(query.page([f"{names.PUSH}:{n}" for n in push] + [f"{names.PAIMON}:{n}" for n in paimon]))
                push = [n for n in push if f"{names.PUSH}:{n}" in page]
                paimon = [n for n in paimon if f"{names.PAIMON}:{n}" in page]
            infos = [self._info(call, flight.FlightDescriptor.for_path(*names.push_path(name)),
                                self.pushed.plan(PushTarget(name))) for name in push]
            if paimon:
                wanted = set(paimon)
                infos += [info for t in self.paimon.tables(wanted.__contains__)
                          if (info := self._paimon_summary(call, t)) is not None]
        yield from infos

    def get_schema(self, context, descriptor):
        with _call(self, "get_schema", context) as call:
            source, request = self._request(descriptor)
            if not _holds(call, WRITE, request):  # a producer needs the schema it writes
                _require(call, READ, request)
            return flight.SchemaResult(source.schema(request))

    def get_flight_info(self, context, descriptor):
        with _call(self, "get_flight_info", context) as call:
            source, request = self._request(descriptor)
            call.fields.update(request.log_fields())
            _require(call, READ, request)
            return self._info(call, descriptor, source.plan(request))

    def _request(self, descriptor) -> tuple[Source, object]:
        """The source a descriptor names, and its request."""
        request = descriptors.read_request(*_parts(descriptor))
        return self.sources[request.kind], request

    def _info(self, call: _Call, descriptor, plan: ReadPlan, app_metadata: bytes | None = None) -> flight.FlightInfo:
        """The FlightInfo of a plan; each ticket is bound to the principal that planned it.

        A Paimon endpoint lists every advertised server, rotated by its index, so readers that try
        locations in order spread the endpoints over the servers (and fail over to the next); a
        push endpoint lists only this server (the first --advertise URI): its table lives here.
        """
        principal = call.access.name
        endpoints = []
        for i, t in enumerate(plan.tickets):
            k = i % len(self.advertise)
            locations = self.advertise[k:] + self.advertise[:k] if t.any_server else self.advertise[:1]
            endpoints.append(flight.FlightEndpoint(self.tickets.encode(dataclasses.replace(t, principal=principal)),
                                                   locations))
        metadata = plan.app_metadata if app_metadata is None else app_metadata
        return flight.FlightInfo(plan.schema, descriptor, endpoints, plan.total_records, plan.total_bytes,
                                 app_metadata=metadata)

    def _paimon_summary(self, call: _Call, table) -> flight.FlightInfo | None:
        """A Paimon table as list_flights shows it: the plan of its latest snapshot, and a summary
        (None when it was dropped while the list was made)."""
        meta = {"table": table.name, "buckets": table.buckets, "latest_snapshot": table.latest_snapshot,
                "primary_keys": table.primary_keys, "partition_keys": table.partition_keys}
        desc = flight.FlightDescriptor.for_path(*names.paimon_path(table.name))
        try:
            plan = self.paimon.plan(PaimonRequest(table.name))
        except NotFound:
            return None
        return self._info(call, desc, plan, json.dumps(meta).encode())

    # -- data ----------------------------------------------------------------------------

    def do_put(self, context, descriptor, reader, writer):
        with _call(self, "do_put", context) as call:
            target = descriptors.write_target(*_parts(descriptor))
            _require(call, WRITE, target)
            if isinstance(target, WriteTarget) and target.merge_schema:  # it alters the table, as alter_table does
                _require(call, ADMIN, target)
            call.fields.update({k: v for k, v in target.log_fields().items() if v is not None})
            call.count_as(target.kind, target.table, "in")
            if target.kind == names.PAIMON:
                self._ingest(call, context, target, reader, writer)
            else:
                self._push(call, context, target, reader, writer)

    def _push(self, call: _Call, context, target: PushTarget, reader, writer) -> None:
        """A push-table producer: each batch acked `{"seq"}` once appended to the partition's log."""
        if target.producer is not None:
            call.fields["producer"] = target.producer

        def on_append(seq: int, batch: pa.RecordBatch) -> None:
            call.add(batch)
            writer.write(pa.py_buffer(messages.ack(seq)))

        self.pushed.put(target, reader.schema, _chunks(reader), on_append, context.is_cancelled, call.fields)

    def _ingest(self, call: _Call, context, target: WriteTarget, reader, writer) -> None:
        """A durable write: each batch acked `{"seq", "snapshot"}` once committed to the Paimon table."""

        def chunks():
            for batch, metadata in _chunks(reader):
                if batch is not None:  # a received batch owns its buffers: their total is its size, and cheap
                    call.add(batch, batch.get_total_buffer_size())
                yield batch, metadata

        def send_ack(ack: bytes) -> None:
            writer.write(pa.py_buffer(ack))

        if target.merge_schema:  # the stream's new columns join the table before any batch is looked at
            self.ingest.merge_schema(target.table, reader.schema)
        if target.stage is not None:  # a job's attempt: its stage belongs to the caller's principal
            self.ingest.staging.put(target, reader.schema, chunks(), send_ack, call.fields, call.access.name)
            return
        self.ingest.put(target, reader.schema, chunks(), send_ack, context.is_cancelled, call.fields)

    def do_get(self, context, ticket):
        with _call(self, "do_get", context, streaming=True) as call:
            decoded = self.tickets.decode(ticket.ticket)
            call.fields.update(decoded.log_fields())
            call.access.require_ticket(decoded.principal)
            _require(call, READ, decoded)
            call.count_as(decoded.kind, decoded.table, decoded.direction)
            schema, items = self.sources[decoded.kind].open(decoded, context.is_cancelled)
        if decoded.plain:
            return flight.GeneratorStream(schema, self._stream(_pulled(schema, items, call), call))
        return flight.GeneratorStream(schema, self._stream(_with_metadata(items, call), call))

    @staticmethod
    def _stream(stream, call: _Call):
        """Hand `stream` to Flight; its error is mapped once, and the call's log line is written
        when it ends (a client that goes away closes it: GeneratorExit)."""
        try:
            yield from stream
        except GeneratorExit:
            call.done(Cancelled("the client went away"))
            raise
        except BaseException as e:  # noqa: BLE001 - raised again as the call's Flight status
            call.done(e)
            raise to_flight(e, call.fields) from None
        finally:
            stream.close()
        call.done()

    # -- actions -------------------------------------------------------------------------

    def do_exchange(self, context, descriptor, reader, writer):
        raise to_flight(Unimplemented(
            "flight-paimon has no DoExchange: read with DoGet, write with DoPut (docs/protocol.md)."))

    def list_actions(self, context):
        authenticated(context, "list_actions")
        return [(name, wire_actions.description(spec)) for name, spec in wire_actions.ACTIONS.items()]

    def do_action(self, context, action):
        with _call(self, "do_action", context, action=action.type) as call:
            body = parse_json_object(action.body.to_pybytes() if action.body else b"", f"body of action {action.type!r}")
            call.fields.update(actions.log_fields(action.type, body))
            result = actions.run(self.action_context, action.type, body, call.access)
        return [json.dumps(result).encode()]

    def close(self, reason: str = "the server is shutting down", timeout: float = 10.0) -> bool:
        """Stop: fail every open stream with `reason` (from here on /healthz answers 503 and the
        `health` action "stopping"), let gRPC end its calls, then join every thread the server
        started and close the metrics port, all within `timeout` s. False when something outlived
        the bound: a call stuck in gRPC's write to a frozen client holds gRPC's shutdown forever,
        and only the process's exit ends it."""
        deadline = time.monotonic() + timeout

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        self.close_streams(reason)
        stopper = threading.Thread(target=self.shutdown, name="flight-shutdown", daemon=True)
        stopper.start()
        stopper.join(left())
        stopped = [not stopper.is_alive(), self.ingest.join(left()), self.maintainer.join(left()), self.push.join(left())]
        if self.metrics is not None:
            stopped.append(self.metrics.close(left()))
        return all(stopped)

    def close_streams(self, reason: str = "the server is shutting down") -> None:
        """Fail every open partition and stream so blocked producers and readers end with an
        error (the first step of `close`)."""
        self.push.shutdown(reason)
        self.paimon.stopping.set()
        self.ingest.close(reason)
        self.maintainer.close()

    def _committed(self, table: str, rows: int, nbytes: int, seconds: float, file_bytes: int) -> None:
        """A group commit of durable writes landed: metrics, and the table's maintenance is due."""
        if self.metrics is not None:
            self.metrics.committed(table, rows, nbytes, seconds)
        self.maintainer.committed(table, file_bytes)



def _with_metadata(items: Items, call: _Call):
    """`(batch, app_metadata)` items for a GeneratorStream, one Python call per batch."""
    try:
        for batch, metadata in items:
            call.add(batch)
            yield (batch, metadata) if metadata is not None else batch
    finally:
        items.close()


def _pulled(schema: pa.Schema, items: Items, call: _Call):
    """Batches without app_metadata as one RecordBatchReader that Flight's C++ pulls (a
    RecordBatchStream, as the minimal bridge of scripts/bench_push.py serves: docs/benchmarks_push.md).
    An error ends that reader quietly and is raised here, after it, where pyarrow keeps the error's
    status code and extra_info: raised inside the reader, every error would reach the client as
    UNKNOWN with the server's traceback in its text."""
    failed: list[BaseException] = []

    def batches():
        try:
            for batch, _ in items:
                call.add(batch)
                yield batch
        except Exception as e:  # noqa: BLE001 - handed to the generator below, which raises it
            failed.append(e)

    try:
        yield pa.RecordBatchReader.from_batches(schema, batches())
    finally:
        items.close()
    if failed:
        raise failed[0]


def _chunks(reader):
    """A do_put reader as `(batch or None, app_metadata or None)` pairs."""
    while True:
        try:
            chunk = reader.read_chunk()
        except StopIteration:
            return
        yield chunk.data, chunk.app_metadata


def _parts(descriptor) -> tuple[list | None, bytes | None]:
    """A Flight descriptor as `descriptors` takes it: its path, or (path None) its command."""
    if descriptor.descriptor_type == flight.DescriptorType.PATH:
        return descriptor.path or [], None
    return None, descriptor.command


def _holds(call: _Call, grant: str, target) -> bool:
    return call.access.allows(grant, target.table)


def _require(call: _Call, grant: str, target) -> None:
    """The call's principal must hold `grant` on the table `target` names (any request, target or ticket)."""
    call.access.require(grant, target.table, target.subject)
