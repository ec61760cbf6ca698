"""Push tables as the server serves them (`PushSource`, a `flight_server.source.Source`): plans, reads, and the
producer streams that fill them (no Flight).

A producer's stream ends cleanly only with its end marker `{"end": N}` (N checked against what
arrived); a half-close without it, a wrong N, or a broken stream fails the partition, because a
crashed producer's writer, closed by destructors, looks exactly like a half-close.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pyarrow as pa

from flight_server.push.log import PartitionLog
from flight_server.push.registry import PushRegistry, PushTable
from flight_server.source import Items, ReadPlan
from flight_server.tickets import PushTicket
from flight_server.wire import messages, producer_stream
from flight_server.wire.errors import (
    Cancelled,
    FlightPaimonError,
    InvalidRequest,
    NotFound,
    PartitionFailed,
)
from flight_server.wire.requests import PushTarget, PushView, ReplayRange

Chunks = Iterator[tuple[pa.RecordBatch | None, pa.Buffer | None]]


class PushSource:
    """The push tables of one server, seen as plans, reads and producer streams."""

    def __init__(self, registry: PushRegistry):
        self.registry = registry

    # -- reading -------------------------------------------------------------------------

    def schema(self, request: PushTarget | ReplayRange | PushView) -> pa.Schema:
        table = self.registry.get(request.name)
        if request.partition is not None:
            table.partition(request.partition)
        return table.schema

    def plan(self, request: PushTarget | ReplayRange | PushView) -> ReadPlan:
        """One drain (or view) endpoint per partition or the one named, or a replay range's endpoint."""
        table = self.registry.get(request.name)
        if request.partition is not None:
            table.partition(request.partition)  # raises NotFound for a partition it lacks
        if isinstance(request, ReplayRange):
            return ReadPlan(table.schema, [PushTicket(table.name, table.uid, request.partition, request.start, request.end)])
        parts = range(len(table.partitions)) if request.partition is None else [request.partition]
        view = request.start if isinstance(request, PushView) else None
        return ReadPlan(table.schema, [PushTicket(table.name, table.uid, p, view=view) for p in parts])

    def open(self, ticket: PushTicket, cancelled: Callable[[], bool]) -> tuple[pa.Schema, Items]:
        table = self.registry.get(ticket.name)
        if table.uid != ticket.uid:
            raise NotFound(
                f"The ticket is for an earlier push table {table.name!r} that was dropped; "
                "get a fresh ticket from get_flight_info."
            )
        part = table.partition(ticket.partition)
        if ticket.view is not None:
            return table.schema, _viewed(part, part.view(ticket.view == "earliest"), cancelled)
        if ticket.start is None:
            batches = part.drain(cancelled)
        elif ticket.end is None:
            batches = part.read_to_end(ticket.start, cancelled)
        else:
            batches = part.read_range(ticket.start, ticket.end, cancelled)
        return table.schema, _without_metadata(batches)

    # -- producer streams ----------------------------------------------------------------

    def put(self, target: PushTarget, schema: pa.Schema, chunks: Chunks,
            on_append: Callable[[int, pa.RecordBatch], None], cancelled: Callable[[], bool], fields: dict) -> None:
        """Take one producer stream: refused before anything is appended unless it may write here.

        `chunks` yields `(batch or None, app_metadata or None)`; `on_append(seq, batch)` acks each
        appended batch; `fields` collects what the call's log line reports.
        """
        table = self.registry.get(target.name)
        p = _put_partition(table, target)
        fields["partition"] = p
        part = table.partition(p)
        table.check_schema(schema, p)
        if target.producer is not None:
            _pump_named(part, target.producer, chunks, on_append, cancelled, fields)
            return
        part.attach_writer()
        try:
            _pump(part, chunks, on_append, cancelled, fields, table.end_marker == "required")
        except FlightPaimonError:
            raise  # the log has already recorded its own state change
        except BaseException as e:
            part.fail(f"the producer's stream broke: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
            raise


def _without_metadata(batches: Iterator[pa.RecordBatch]) -> Items:
    try:
        for batch in batches:
            yield batch, None
    finally:
        batches.close()  # a drain closed early fails its partition: the consumer went away


def _viewed(part: PartitionLog, view, cancelled) -> Items:
    try:
        for seq, batch in view.stream(cancelled):
            yield batch, messages.ack(seq)
    finally:
        part.unview(view)  # a viewer that goes away changes nothing else


def _put_partition(table: PushTable, target: PushTarget) -> int:
    if target.partition is not None:
        return target.partition
    if len(table.partitions) != 1:
        raise InvalidRequest(
            f"Push table {table.name!r} has {len(table.partitions)} partitions; do_put to "
            f"['push', {table.name!r}, 'P'] naming one."
        )
    return 0


def _pump(part: PartitionLog, chunks: Chunks, on_append, cancelled, fields: dict, end_required: bool) -> None:
    """Append the stream's batches; its clean end is the producer's `{"end": N}` marker.

    The next message is read as soon as the last batch is appended, even into a full partition:
    it may be the end marker, and a producer that finished must not wait for a reader to close.
    """
    try:
        for event in producer_stream.read(chunks):
            if isinstance(event, producer_stream.Batch):
                on_append(part.append(event.data, cancelled), event.data)
            elif isinstance(event, producer_stream.Idle):
                part.touch()
            elif isinstance(event, producer_stream.ProducerFailed):
                part.fail(f"the producer failed: {event.error}")  # a batch riding on it is not appended
                fields["producer_error"] = event.error
            elif isinstance(event, producer_stream.Ended):
                fields["eof"] = part.writer_done()
            elif isinstance(event, producer_stream.HalfClosed):
                _half_closed(part, cancelled, fields, end_required, event.batches)
    except producer_stream.StreamBroken as e:
        if e.kind == producer_stream.AFTER_END:
            raise InvalidRequest(f"The stream to {part.label} {e.reason}; the partition had already ended "
                                 f"cleanly with the {e.batches} batch(es) before it.") from None
        part.fail(f"the producer's stream {e.reason}")
        raise PartitionFailed(f"The stream to {part.label} {e.reason}; the partition failed.") from None


def _half_closed(part: PartitionLog, cancelled, fields: dict, end_required: bool, received: int) -> None:
    if cancelled():
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
    fields["eof"] = part.writer_done()


def _pump_named(part: PartitionLog, producer: str, chunks: Chunks, on_append, cancelled, fields: dict) -> None:
    """A named producer's stream: every batch carries the producer's own `{"seq": N}` (increasing),
    and a batch whose seq the partition already took from that producer is acked, not appended,
    so a producer that retries after a crash (a Spark task, a restarted query) adds nothing twice.

    Its streams hold no writer slot and never end the partition; a stream that breaks leaves the
    partition open for the retry (nothing half-written can be mistaken for an end). An in-band
    `{"error"}` still fails the partition: the producer says so deliberately.
    """
    part.check_open()
    received = appended = 0
    try:
        for event in producer_stream.read(chunks, named=True):
            if isinstance(event, producer_stream.Batch):
                if part.append(event.data, cancelled, producer=(producer, event.seq)) is not None:
                    appended += 1
                on_append(event.seq, event.data)
                received += 1
            elif isinstance(event, producer_stream.Idle):
                part.touch()
            elif isinstance(event, producer_stream.ProducerFailed):
                part.producer_failed(f"producer {producer!r} failed: {event.error}")
                fields["producer_error"] = event.error
                return
    except producer_stream.StreamBroken as e:
        raise InvalidRequest(f"Producer {producer!r}'s stream to {part.label} {e.reason}; the partition "
                             "stays open for its retry.") from None
    finally:
        fields.update(appended=appended, duplicates=received - appended)
