"""Flight calls shared by the readers and the writer: connect, plan endpoints, read one endpoint."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.flight as flight
from pyspark.sql.datasource import InputPartition

from flight_server.wire import names
from flight_server.wire.allocator import reuse_batch_buffers
from flight_server.wire.errors import (
    TimedOut,
    Unavailable,
    connection_hint,
    error_message,
    from_flight,
)
from flight_server.wire.requests import PaimonRequest
from producers import Client
from producers.client import EndpointReader
from producers.credentials import Credentials
from spark_reader.options import ROW_KIND, Options


class SourceError(RuntimeError):
    """The server could not be reached or refused a request; the message says which and why."""


class EndpointPartition(InputPartition):
    """One Spark partition: a FlightInfo endpoint's opaque ticket and the URIs that serve it."""

    def __init__(self, ticket: bytes, locations: tuple[str, ...], label: str, resumable: bool = False):
        super().__init__(label)
        self.ticket = ticket
        self.locations = locations
        self.label = label
        self.resumable = resumable


def connect(opts: Options) -> Client:
    return Client(opts.uri, timeout=opts.timeout, credentials=opts.credentials)


def call(opts: Options, what: str, fn, *args):
    """Run one client call, turning Flight errors into a `SourceError` naming server and target:
    unreachable, timed out or refused, by the kind `from_flight` reads from the status."""
    try:
        return fn(*args)
    except (flight.FlightError, pa.ArrowException, KeyError) as e:
        kind = from_flight(e)
        if isinstance(kind, Unavailable):
            raise SourceError(
                f"Cannot reach the flight-paimon server at {opts.uri} ({what} of {opts.target}); check "
                f".option('uri') and that the server runs. Cause: {_first_line(e)}{connection_hint(e)}"
            ) from None
        if isinstance(kind, TimedOut):
            raise SourceError(
                f"The flight-paimon server at {opts.uri} did not answer within {opts.timeout} s "
                f"({what} of {opts.target}); raise .option('timeout', S) or check the server. "
                f"Cause: {_first_line(e)}"
            ) from None
        raise SourceError(
            f"The flight-paimon server at {opts.uri} refused the {what} of {opts.target}: {_first_line(e)}"
        ) from None


def _first_line(e: BaseException | None) -> str:
    return error_message(e)[:500] if e is not None else "no location was tried"


def paimon_info(client: Client, opts: Options, request: PaimonRequest) -> flight.FlightInfo:
    descriptor = flight.FlightDescriptor.for_command(json.dumps(request.to_json()))
    return call(opts, "planning", client.flight.get_flight_info, descriptor, client.options())


def paimon_base(opts: Options) -> PaimonRequest:
    """What every Paimon read of this query asks besides its positions: the table, its changelog, and
    the system table of it (`db.t$audit_log`: the server reads it as Java Paimon's AuditLogTable)."""
    return PaimonRequest(opts.table, changelog=bool(opts.changelog), system=opts.system)


def spark_schema(info: flight.FlightInfo) -> pa.Schema:
    """The schema Spark sees: the server's, with a changelog's row kind named as Paimon's connector
    names it (`rowkind`)."""
    schema = info.schema
    if names.ROW_KIND in schema.names:
        i = schema.get_field_index(names.ROW_KIND)
        schema = schema.set(i, schema.field(i).with_name(ROW_KIND))
    return schema


def partitions_of(info: flight.FlightInfo, opts: Options) -> list[EndpointPartition]:
    """The endpoints as picklable partitions; a location-less endpoint is served by `opts.uri`."""
    parts = []
    for i, ep in enumerate(info.endpoints):
        locations = tuple(loc.uri.decode() if isinstance(loc.uri, bytes) else str(loc.uri) for loc in ep.locations)
        parts.append(EndpointPartition(ep.ticket.ticket, locations or (opts.uri,), f"{opts.target} endpoint {i}",
                                       resumable=opts.table is not None))
    return parts


def read_partition(part: EndpointPartition, schema: pa.Schema, credentials: Credentials) -> Iterator[pa.RecordBatch]:
    """Stream one endpoint from its first reachable location, each batch cast to `schema`.

    Opens its own client inside the Spark task: partitions travel pickled, clients do not.
    """
    reuse_batch_buffers()  # this Python worker receives large batches: see flight_server/wire/allocator.py
    columns = schema.names
    # A Paimon ticket's stream is deterministic (its splits are planned into it): a server that dies
    # mid-read is resumed on the next location after the rows already read.
    reader = EndpointReader(list(part.locations), flight.Ticket(part.ticket), credentials, resume=part.resumable)
    got = 0
    try:
        for chunk in reader:
            batch = chunk.data
            if batch is not None and batch.num_rows:
                got += 1
                if columns[0] == ROW_KIND and batch.schema.names[0] == names.ROW_KIND:
                    batch = batch.rename_columns([ROW_KIND, *batch.schema.names[1:]])
                yield batch.select(columns).cast(schema)
    except (flight.FlightError, pa.ArrowException) as e:
        if not isinstance(from_flight(e), Unavailable):
            raise SourceError(f"Reading {part.label} from {reader.uri} failed: {_first_line(e)}") from None
        where = (f"from {reader.uri} broke off after {got} batches" if got else
                 f"found no reachable server (tried {', '.join(part.locations)})")
        raise SourceError(f"Reading {part.label} {where}: {_first_line(e)}{connection_hint(e)}") from None
