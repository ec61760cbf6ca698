"""CLI: push demo batches into a push table over grpcio stubs (pyarrow only encodes IPC), one output line per event."""

from __future__ import annotations

import argparse
import json
import sys
import threading
from collections.abc import Callable, Iterable, Iterator

import grpc
import pyarrow as pa

from flight_server.wire import messages, names
from flight_server.wire.errors import error_message
from producers.raw_grpc import rows, stubs

pb2, pb2_grpc = stubs.load()

_print_lock = threading.Lock()


def say(line: str) -> None:
    # The ack reader and gRPC's request thread both print; one line must stay one line.
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def schema_data(schema: pa.Schema, path: list[str]) -> pb2.FlightData:
    """The first message of a DoPut: the IPC schema message plus the descriptor it targets."""
    message = pa.ipc.read_message(schema.serialize())
    return pb2.FlightData(
        flight_descriptor=pb2.FlightDescriptor(type=pb2.FlightDescriptor.PATH, path=path),
        data_header=message.metadata.to_pybytes(),
    )


def batch_data(batch: pa.RecordBatch) -> pb2.FlightData:
    message = pa.ipc.read_message(batch.serialize())
    return pb2.FlightData(data_header=message.metadata.to_pybytes(), data_body=message.body.to_pybytes())


def error_data(message: str) -> pb2.FlightData:
    """An in-band failure: app_metadata only, which the server turns into the partition's error."""
    return pb2.FlightData(app_metadata=messages.producer_error(message))


def end_data(batches: int) -> pb2.FlightData:
    """The stream's clean end: without it the server takes the half-close for a crash."""
    return pb2.FlightData(app_metadata=messages.end(batches))


def server_message(error: grpc.RpcError) -> str:
    return f"{error.code().name}: {error_message(error.details() or '')}"


def push(uri: str, name: str, partition: int, requests: Iterable[pb2.FlightData],
         timeout_s: float, on_ack: Callable[[int], None]) -> int:
    """Stream `requests` to DoPut and report each ack (its sequence number); returns the last (-1: none)."""
    target = uri.removeprefix("grpc+tcp://").removeprefix("grpc://")
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    last = -1
    with grpc.insecure_channel(target, options=options) as channel:
        stub = pb2_grpc.FlightServiceStub(channel)
        for result in stub.DoPut(iter(requests), timeout=timeout_s):
            last = messages.read_ack(result.app_metadata).seq
            on_ack(last)
    return last


def demo_requests(args, path: list[str]) -> Iterator[pb2.FlightData]:
    """The CLI's stream. grpcio asks for the next message only once it has sent the previous one,
    so the line after each `yield` marks a batch gRPC took: under backpressure they stop."""
    schema = rows.WRONG_SCHEMA if args.wrong_schema else rows.SCHEMA
    yield schema_data(schema, path)
    count = args.batches if args.fail_after is None else min(args.fail_after, args.batches)
    for b in range(count):
        yield batch_data(rows.batch(args.first_row + b * args.rows, args.rows, schema))
        say(f"sent {b} rows={args.rows}")
    if args.fail_after is not None:
        yield error_data(args.message)
    else:
        yield end_data(count)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m producers.raw_grpc.producer", description=__doc__)
    p.add_argument("--uri", required=True)
    p.add_argument("--table", required=True)
    p.add_argument("--partition", type=int, default=0)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--first-row", type=int, default=0)
    p.add_argument("--fail-after", type=int, help="send this many batches, then fail in-band")
    p.add_argument("--message", default="the producer failed", help="the cause sent with --fail-after")
    p.add_argument("--wrong-schema", action="store_true", help="send `id` as int32 to see the refusal")
    p.add_argument("--timeout", type=float, default=120.0, help="deadline of the whole DoPut call, seconds")
    args = p.parse_args(argv)
    path = names.push_path(args.table, args.partition)
    try:
        last = push(args.uri, args.table, args.partition, demo_requests(args, path), args.timeout,
                    lambda seq: say(f"ack {seq}"))
    except grpc.RpcError as e:
        print(f"error: {server_message(e)}", file=sys.stderr)
        return 1
    if args.fail_after is not None:
        say(f"failed-in-band {json.dumps(args.message)}")
    else:
        say(f"done batches={args.batches} acked={last + 1}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
