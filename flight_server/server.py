"""The Flight adapter: decode the request, call the module that owns it, return a stream.

Every handler runs inside `_call`, which binds table/partition/peer for logging, writes one line
per finished RPC and converts errors once through `errors.to_flight`.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.flight as flight
import structlog

from flight_server import actions
from flight_server.errors import install_clean_details, to_flight
from flight_server.wire.errors import Cancelled, FlightPaimonError, InvalidRequest, NotFound, PartitionFailed
from flight_server.wire.requests import PaimonRequest, parse_command, parse_path
from flight_server.paimon.source import PaimonSource
from flight_server.push.tables import PushRegistry, PushTable
from flight_server.tickets import PaimonTicket, PushTarget, PushTicket, TicketCodec, parse_json_object, parse_push_path
from flight_server.wire import messages, names

log = structlog.get_logger(__name__)


class _Call:
    """Per-RPC accounting for the one log line written when the call ends."""

    def __init__(self, method: str, context, **fields):
        self.fields = {"rpc": method, "peer": context.peer() if context else None, **fields}
        self.rows = 0
        self.bytes = 0
        self.start = time.perf_counter()

    def add(self, batch: pa.RecordBatch) -> None:
        self.rows += batch.num_rows
        self.bytes += batch.nbytes

    def done(self, error: BaseException | None = None) -> None:
        fields = dict(self.fields, rows=self.rows, bytes=self.bytes,
                      duration_ms=round((time.perf_counter() - self.start) * 1000, 2))
        if error is None:
            log.info("rpc_done", **fields)
        elif isinstance(error, Cancelled) and fields.get("mode") == "follow":
            log.info("rpc_done", ended="the client closed the follow", **fields)  # how follows end
        else:
            log.warning("rpc_failed", error=str(error).splitlines()[0][:500], **fields)


@contextlib.contextmanager
def _call(method: str, context, streaming: bool = False, **fields):
    """Log and map errors of one RPC; a `streaming` call's stream writes its line when it ends."""
    call = _Call(method, context, **fields)
    try:
        yield call
    except BaseException as e:
        call.done(e)
        # pyarrow appends the Python traceback chain to KeyError/ArrowInvalid messages on the
        # wire; without the chain the client reads our sentence, and the log has the rest.
        raise to_flight(e) from None
    if not streaming:
        call.done()


class FlightPaimonServer(flight.FlightServerBase):
    """Serves push tables (and, through the same names, Paimon tables) over Arrow Flight."""

    def __init__(self, location: str = "grpc://127.0.0.1:0", advertise: list[str] | None = None,
                 ticket_key: bytes | None = None, warehouse: str | None = None, **kwargs):
        super().__init__(location, **kwargs)
        install_clean_details()
        self.warehouse = warehouse
        self.push = PushRegistry()
        self.paimon = PaimonSource(warehouse)
        self.registries = actions.Registries(self.push, self.paimon)
        self.tickets = TicketCodec(ticket_key)
        host = location.rsplit(":", 1)[0]
        self.uri = f"{host}:{self.port}"
        self.advertise = advertise or [self.uri]

    # -- discovery -----------------------------------------------------------------------

    def list_flights(self, context, criteria):
        with _call("list_flights", context):
            infos = [self._push_info(t, None) for t in self.push.tables()]
            if self.warehouse:
                infos += [self._paimon_summary(t) for t in self.paimon.tables()]
        yield from infos

    def get_flight_info(self, context, descriptor):
        with _call("get_flight_info", context) as call:
            if descriptor.descriptor_type == flight.DescriptorType.PATH:
                if descriptor.path and descriptor.path[0] in (names.PAIMON.encode(), names.PAIMON):
                    req = parse_path(descriptor.path)
                    call.fields.update(table=req.table)
                    return self._paimon_info(req, descriptor)
                target = parse_push_path(descriptor.path)
                call.fields.update(table=target.name, partition=target.partition)
                return self._push_info(self.push.get(target.name), target.partition)
            cmd = parse_json_object(descriptor.command, "descriptor command")
            if names.PUSH in cmd:
                call.fields.update(table=cmd[names.PUSH], partition=cmd.get(names.PARTITION))
                return self._push_range_info(cmd)
            if names.TABLE in cmd:
                req = parse_command(cmd)
                call.fields.update(table=req.table, mode=req.mode)
                return self._paimon_info(req, descriptor)
            raise InvalidRequest(
                "The descriptor command names no table; send {\"table\": \"db.t\", ...} for a "
                "Paimon read or {\"push\": NAME, \"partition\": P, \"start\": S, \"end\": E} for a replay."
            )

    def _endpoint(self, ticket: bytes) -> flight.FlightEndpoint:
        return flight.FlightEndpoint(ticket, self.advertise)

    def _push_info(self, table: PushTable, partition: int | None) -> flight.FlightInfo:
        if partition is not None:
            table.partition(partition)  # raises NotFound for a partition it lacks
        parts = range(len(table.partitions)) if partition is None else [partition]
        endpoints = [self._endpoint(self.tickets.encode(PushTicket(table.name, table.uid, p))) for p in parts]
        descriptor = flight.FlightDescriptor.for_path(*names.push_path(table.name, partition))
        return flight.FlightInfo(table.schema, descriptor, endpoints, -1, -1)

    def _push_range_info(self, cmd: dict) -> flight.FlightInfo:
        table = self.push.get(cmd[names.PUSH])
        p, start, end = (cmd.get(k) for k in (names.PARTITION, names.RANGE_START, names.RANGE_END))
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (p, start, end)):
            raise InvalidRequest(
                f"A replay of push table {table.name!r} needs integer 'partition', 'start' and 'end' "
                f"(>= 0), got partition={p!r} start={start!r} end={end!r}."
            )
        if end < start:
            raise InvalidRequest(f"Replay range [{start}, {end}) of push table {table.name!r} partition {p} is empty-reversed; need start <= end.")
        table.partition(p)
        ticket = self.tickets.encode(PushTicket(table.name, table.uid, p, start, end))
        desc = flight.FlightDescriptor.for_command(json.dumps(cmd))
        return flight.FlightInfo(table.schema, desc, [self._endpoint(ticket)], -1, -1)

    def _paimon_info(self, req: PaimonRequest, descriptor) -> flight.FlightInfo:
        plan = self.paimon.plan(req)
        endpoints = [self._endpoint(self.tickets.encode(t)) for t in plan.tickets]
        return flight.FlightInfo(plan.schema, descriptor, endpoints, plan.total_records, -1)

    def _paimon_summary(self, table) -> flight.FlightInfo:
        meta = {"table": table.name, "buckets": table.buckets, "latest_snapshot": table.latest_snapshot,
                "primary_keys": table.primary_keys, "partition_keys": table.partition_keys}
        desc = flight.FlightDescriptor.for_path(*names.paimon_path(table.name))
        return flight.FlightInfo(table.schema, desc, [], -1, -1, app_metadata=json.dumps(meta).encode())

    # -- data ----------------------------------------------------------------------------

    def do_put(self, context, descriptor, reader, writer):
        with _call("do_put", context) as call:
            target = parse_push_path(descriptor.path or [b""])
            call.fields.update(table=target.name, partition=target.partition)
            table = self.push.get(target.name)
            p = self._put_partition(table, target)
            call.fields["partition"] = p
            part = table.partition(p)
            table.check_schema(reader.schema, p)
            part.attach_writer()
            try:
                self._pump(reader, writer, part, context, call, table.end_marker == "required")
            except FlightPaimonError:
                raise  # the log has already recorded its own state change
            except BaseException as e:
                part.fail(f"the producer's stream broke: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
                raise

    @staticmethod
    def _put_partition(table: PushTable, target: PushTarget) -> int:
        if target.partition is not None:
            return target.partition
        if len(table.partitions) != 1:
            raise InvalidRequest(
                f"Push table {table.name!r} has {len(table.partitions)} partitions; do_put to "
                f"['push', {table.name!r}, 'P'] naming one."
            )
        return 0

    @staticmethod
    def _pump(reader, writer, part, context, call: _Call, end_required: bool) -> None:
        """Append the stream's batches; its clean end is the producer's `{"end": N}` marker."""
        received = 0
        while True:
            try:
                chunk = reader.read_chunk()
            except StopIteration:
                break
            said = messages.read_producer_message(chunk.app_metadata)
            if said is not None and said.error is not None:
                part.fail(f"the producer failed: {said.error}")  # a batch riding on it is not appended
                call.fields["producer_error"] = said.error
                return
            if chunk.data is not None:
                seq = part.append(chunk.data, context.is_cancelled)
                received += 1
                call.add(chunk.data)
                writer.write(pa.py_buffer(messages.ack(seq)))
            else:
                part.touch()
            if said is not None and said.has_end:
                FlightPaimonServer._end_stream(reader, part, said.end, received, call)
                return
        if context.is_cancelled():
            part.fail("the producer's stream broke (killed, timed out or cancelled) before it ended cleanly")
            raise Cancelled(f"The producer's stream to {part.label} was cancelled; the partition failed.")
        if end_required:
            part.fail(f"the producer's stream ended after {received} batch(es) without its end marker "
                      '{"end": N}: the producer may have crashed')
            raise PartitionFailed(
                f"The stream to {part.label} half-closed without its end marker {{\"end\": {received}}}; "
                "the partition failed. Send the marker before closing (TableSink does), or register "
                "the table with end_marker 'optional'."
            )
        call.fields["eof"] = part.writer_done()

    @staticmethod
    def _end_stream(reader, part, claimed, received: int, call: _Call) -> None:
        """Check the producer's `{"end": N}` against what arrived; then nothing more may follow."""
        if isinstance(claimed, bool) or not isinstance(claimed, int) or claimed != received:
            part.fail(f"the producer's end marker says {claimed!r} batch(es) but the server received {received}")
            raise PartitionFailed(
                f"The stream to {part.label} ended with end marker {claimed!r} but the server received "
                f"{received} batch(es); the partition failed."
            )
        call.fields["eof"] = part.writer_done()
        try:
            reader.read_chunk()
        except StopIteration:
            return
        raise InvalidRequest(
            f"The stream to {part.label} sent more after its end marker; the partition had already "
            f"ended cleanly with the {received} batch(es) before it."
        )

    def do_get(self, context, ticket):
        with _call("do_get", context, streaming=True) as call:
            decoded = self.tickets.decode(ticket.ticket)
            if isinstance(decoded, PaimonTicket):
                call.fields.update(table=decoded.request.table, bucket=decoded.bucket, mode=decoded.mode)
                schema, items = self.paimon.read(decoded, context.is_cancelled)
                return flight.GeneratorStream(schema, self._stream(items, call))
            call.fields.update(table=decoded.name, partition=decoded.partition)
            table = self.push.get(decoded.name)
            if table.uid != decoded.uid:
                raise NotFound(
                    f"The ticket is for an earlier push table {table.name!r} that was dropped; "
                    "get a fresh ticket from get_flight_info."
                )
            part = table.partition(decoded.partition)
            if decoded.start is None:
                batches = part.drain(context.is_cancelled)
            else:
                batches = part.read_range(decoded.start, decoded.end, context.is_cancelled)
            items = ((batch, None) for batch in batches)
        return flight.GeneratorStream(table.schema, self._stream(items, call, batches.close))

    @staticmethod
    def _stream(items: Iterator[tuple[pa.RecordBatch, bytes | None]], call: _Call, close=None):
        """Yield `(batch, app_metadata)` items to Flight; the call's log line is written at the end."""
        try:
            for batch, metadata in items:
                call.add(batch)
                yield (batch, metadata) if metadata is not None else batch
        except GeneratorExit:
            call.done(Cancelled("the client went away"))
            raise
        except BaseException as e:
            call.done(e)
            raise to_flight(e) from None
        finally:
            (close or items.close)()
        call.done()

    # -- actions -------------------------------------------------------------------------

    def list_actions(self, context):
        return [(name, text) for name, text in actions.DESCRIPTIONS.items()]

    def do_action(self, context, action):
        with _call("do_action", context, action=action.type):
            handler = actions.HANDLERS.get(action.type)
            if handler is None:
                raise InvalidRequest(
                    f"Unknown action {action.type!r}; list_actions names them: {', '.join(actions.HANDLERS)}."
                )
            body = parse_json_object(action.body.to_pybytes() if action.body else b"", f"body of action {action.type!r}")
            result = handler(self.registries, body)
        return [json.dumps(result).encode()]

    def close_streams(self, reason: str = "the server is shutting down") -> None:
        """Fail every open partition so blocked producers and readers end with an error."""
        self.push.shutdown(reason)
        self.paimon.stopping.set()

