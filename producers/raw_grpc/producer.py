"""CLI: push demo batches into a push table, or durably into a Paimon table (optionally as a named, exactly-once producer), over grpcio stubs (pyarrow only encodes IPC); one output line per event."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
from collections.abc import Callable, Iterable, Iterator

import grpc
import pyarrow as pa

from flight_server.wire import actions, messages, names
from flight_server.wire.errors import error_message
from producers.raw_grpc import rows, stubs

pb2, pb2_grpc = stubs.load()

_print_lock = threading.Lock()


def say(line: str) -> None:
    # The ack reader and gRPC's request thread both print; one line must stay one line.
    with _print_lock:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def descriptor(args) -> pb2.FlightDescriptor:
    """A push partition's path, a Paimon table's path (unnamed producer), or the named write command."""
    if args.paimon is None:
        return pb2.FlightDescriptor(type=pb2.FlightDescriptor.PATH, path=names.push_path(args.table, args.partition))
    if args.producer is None:
        return pb2.FlightDescriptor(type=pb2.FlightDescriptor.PATH, path=names.paimon_path(args.paimon))
    command = json.dumps(names.write_command(args.paimon, args.producer)).encode()
    return pb2.FlightDescriptor(type=pb2.FlightDescriptor.CMD, cmd=command)


def schema_data(schema: pa.Schema, target: pb2.FlightDescriptor) -> pb2.FlightData:
    """The first message of a DoPut: the IPC schema message plus the descriptor it targets."""
    message = pa.ipc.read_message(schema.serialize())
    return pb2.FlightData(flight_descriptor=target, data_header=message.metadata.to_pybytes())


def batch_data(batch: pa.RecordBatch, app_metadata: bytes = b"") -> pb2.FlightData:
    message = pa.ipc.read_message(batch.serialize())
    return pb2.FlightData(data_header=message.metadata.to_pybytes(), data_body=message.body.to_pybytes(),
                          app_metadata=app_metadata)


class Security:
    """A secured server's credentials: TLS (grpc+tls://, the CA of its certificate, a client
    certificate for mTLS) and the bearer token sent as `authorization: Bearer TOKEN` on every call."""

    def __init__(self, token: str | None = None, root_certs: str | None = None, cert_chain: str | None = None,
                 private_key: str | None = None):
        def read(path):
            if path is None:
                return None
            with open(path, "rb") as f:
                return f.read()
        self.metadata = [("authorization", f"Bearer {token}")] if token else []
        self.root_certs, self.cert_chain, self.private_key = read(root_certs), read(cert_chain), read(private_key)


def channel(uri: str, security: Security) -> grpc.Channel:
    options = [("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)]
    if uri.startswith("grpc+tls://"):
        credentials = grpc.ssl_channel_credentials(security.root_certs, security.private_key, security.cert_chain)
        return grpc.secure_channel(uri.removeprefix("grpc+tls://"), credentials, options=options)
    return grpc.insecure_channel(uri.removeprefix("grpc+tcp://").removeprefix("grpc://"), options=options)


def producer_state(uri: str, table: str, producer: str, timeout_s: float, security: Security) -> int | None:
    """The table's last committed seq of a named producer (DoAction `producer_state`)."""
    body = json.dumps(actions.ProducerStateBody(table, producer).to_json()).encode()
    with channel(uri, security) as ch:
        results = list(pb2_grpc.FlightServiceStub(ch).DoAction(
            pb2.Action(type=names.PRODUCER_STATE, body=body), timeout=timeout_s, metadata=security.metadata))
    return actions.ProducerState.from_json(json.loads(results[0].body), names.PRODUCER_STATE).last_seq


def error_data(message: str) -> pb2.FlightData:
    """An in-band failure: app_metadata only, which the server turns into the partition's error."""
    return pb2.FlightData(app_metadata=messages.producer_error(message))


def end_data(batches: int) -> pb2.FlightData:
    """The stream's clean end: without it the server takes the half-close for a crash."""
    return pb2.FlightData(app_metadata=messages.end(batches))


def server_message(error: grpc.RpcError) -> str:
    return f"{error.code().name}: {error_message(error.details() or '')}"


STALL_S = 2.0  # no batch taken and no ack for this long: the server is waiting for room; say why


def waiting_for(args) -> str:
    """Why a producer's writes wait, as the Node producer says it."""
    if args.paimon is None:
        return f"partition {args.partition} of push table '{args.table}' is full: is a reader running?"
    return f"the server's queue of Paimon table '{args.paimon}' is full (serve --commit-bytes): are its commits slow?"


class Progress:
    """Batches taken and acks seen; a watcher says once per wait when neither moved for STALL_S."""

    def __init__(self, why: str):
        self.why, self.moves, self.acked = why, 0, -1
        self.done = threading.Event()

    def moved(self) -> None:
        self.moves += 1

    def watch(self) -> None:
        seen, said = self.moves, False
        while not self.done.wait(STALL_S):
            if self.moves != seen:
                seen, said = self.moves, False
            elif not said:
                said = True
                print(f"producer: waiting for the server to take the next batch (acked up to {self.acked}); "
                      f"{self.why}", file=sys.stderr, flush=True)


def push(uri: str, requests: Iterable[pb2.FlightData], timeout_s: float,
         on_ack: Callable[[messages.Ack], None], security: Security, progress: Progress | None = None) -> int:
    """Stream `requests` to DoPut and report each ack; returns the last seq acked (-1: none)."""
    last = -1
    progress = progress or Progress("")
    watcher = threading.Thread(target=progress.watch, daemon=True) if progress.why else None
    if watcher is not None:
        watcher.start()

    def taken():
        for request in requests:
            progress.moved()
            yield request

    try:
        with channel(uri, security) as ch:
            for result in pb2_grpc.FlightServiceStub(ch).DoPut(taken(), timeout=timeout_s,
                                                               metadata=security.metadata):
                ack = messages.read_ack(result.app_metadata)
                last = progress.acked = ack.seq
                progress.moved()
                on_ack(ack)
    finally:
        progress.done.set()
    return last


def demo_requests(args, start_seq: int = 0) -> Iterator[pb2.FlightData]:
    """The CLI's stream. grpcio asks for the next message only once it has sent the previous one,
    so the line after each `yield` marks a batch gRPC took: under backpressure they stop.
    A named producer's batch `seq` holds the rows of batch index `seq` and carries `{"seq": seq}`."""
    schema = rows.WRONG_SCHEMA if args.wrong_schema else rows.SCHEMA
    yield schema_data(schema, descriptor(args))
    count = args.batches if args.fail_after is None else min(args.fail_after, args.batches)
    sent = 0
    for b in range(start_seq, count):
        meta = messages.batch_seq(b) if args.producer is not None else b""
        yield batch_data(rows.batch(args.first_row + b * args.rows, args.rows, schema), meta)
        say(f"sent {b} rows={args.rows}")
        sent += 1
    if args.fail_after is not None:
        yield error_data(args.message)
    else:
        yield end_data(sent)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m producers.raw_grpc.producer", description=__doc__)
    p.add_argument("--uri", required=True)
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--table", help="a push table")
    target.add_argument("--paimon", metavar="DB.TABLE", help="a Paimon table: durable writes, acked once committed")
    p.add_argument("--producer", help="with --paimon: a named, exactly-once producer that resumes after the "
                                      "table's last_seq (batch SEQ holds the rows of batch index SEQ)")
    p.add_argument("--partition", type=int, default=0)
    p.add_argument("--batches", type=int, default=4)
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--first-row", type=int, default=0)
    p.add_argument("--fail-after", type=int, help="send this many batches, then fail in-band")
    p.add_argument("--message", default="the producer failed", help="the cause sent with --fail-after")
    p.add_argument("--wrong-schema", action="store_true", help="send `id` as int32 to see the refusal")
    p.add_argument("--timeout", type=float, default=120.0, help="deadline of the whole DoPut call, seconds")
    p.add_argument("--token", default=os.environ.get("FLIGHT_PAIMON_TOKEN"),
                   help="bearer token of a server with --auth (environment: FLIGHT_PAIMON_TOKEN)")
    p.add_argument("--tls-root-certs", help="PEM CA of a grpc+tls:// server's certificate")
    p.add_argument("--tls-cert-chain", help="PEM client certificate, for a server that demands one (mTLS)")
    p.add_argument("--tls-private-key", help="PEM private key of --tls-cert-chain")
    args = p.parse_args(argv)
    if args.producer is not None and args.paimon is None:
        p.error("--producer names a producer of a Paimon table: use it with --paimon DB.TABLE")
    try:
        security = Security(args.token, args.tls_root_certs, args.tls_cert_chain, args.tls_private_key)
    except OSError as e:
        p.error(f"cannot read {e.filename}: {e.strerror}")
    try:
        start = 0
        if args.producer is not None:
            last_seq = producer_state(args.uri, args.paimon, args.producer, args.timeout, security)
            say(f"resume last_seq={'none' if last_seq is None else last_seq}")
            start = 0 if last_seq is None else last_seq + 1
        progress = Progress(waiting_for(args))
        last = push(args.uri, demo_requests(args, start), args.timeout, lambda ack: say(
            f"ack {ack.seq}" + ("" if ack.snapshot is None else f" snapshot={ack.snapshot}")), security, progress)
    except grpc.RpcError as e:
        hint = ""
        if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            hint = f" (--timeout {args.timeout:g} s passed; {waiting_for(args)})"
        print(f"error: {server_message(e)}{hint}", file=sys.stderr)
        return 1
    if args.fail_after is not None:
        say(f"failed-in-band {json.dumps(args.message)}")
    else:
        say(f"done batches={args.batches} acked={last + 1}" if args.producer is None
            else f"done last_seq={last}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
