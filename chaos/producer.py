"""A producer process the fault runs kill, stop, time out or end badly.

    python -m chaos.producer URI push:NAME|paimon:DB.TABLE --batches N --rows R [--rate B]
        [--producer ID] [--end marker|plain-close|error] [--deadline S]
        [--failover URI2 --switches K --switch-seed S]   # a named producer moving between servers
        [--on-drop reopen]                                # a named producer whose table is dropped and created

Push batch i holds ids i*R .. i*R+R-1 (counter rows); Paimon batch seq s holds ids s*1_000_000 ..
(events rows), so a reader tells whole batches, partial ones and resends apart. `--end` is how
the stream ends: the end marker (clean), a plain half-close without it, or an in-band error.
Prints `sent N` after each batch is handed over (Paimon: `sent N acked K`, K batches committed so
far) and `done` after a clean close.

`--failover`: the named producer switches servers K times at random moments (seeded): it lets go of
its stream on one server without waiting for its acks (it cuts the connection, or fails the stream
in-band), opens a sink on the next, which asks producer_state, and goes on after the table's last
seq. Prints `sent N acked K`, `left URI ...` at each switch and `done ...` at the end.

`--on-drop reopen`: when the stream fails because the table was dropped (`table_dropped`, or
NOT_FOUND), the producer opens a new sink (retrying NOT_FOUND until the table is created again)
and goes on from its first batch the failed stream had not got acked. Each stream's batches carry
its generation in the `producer` column (`ID.gG`: G counts the streams opened), so a reader tells
an old stream's rows from a new one's. Prints one JSON object a line: `opened`, `sent`, `error`,
`open_refused`, `done`.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.wire import messages, names
from flight_server.wire.errors import FlightPaimonError, error_message, from_flight
from producers import Client, SinkError
from producers.examples import counter, events

ERROR = "chaos: the producer gave up"


def batch(args, i: int) -> pa.RecordBatch:
    if args.target.startswith("push:"):
        return counter.make_batch(i * args.rows, args.rows)
    return events.batch(args.producer or "anonymous", i, args.rows)


def plain_close(client: Client, args) -> None:
    """A plain Flight writer that half-closes without the end marker (what a crashed producer's
    destructors send)."""
    kind, name = args.target.split(":", 1)
    if kind == "push":
        descriptor = flight.FlightDescriptor.for_path(*names.push_path(name, 0))
    elif args.producer:
        descriptor = flight.FlightDescriptor.for_command(json.dumps({"write": name, "producer": args.producer}))
    else:
        descriptor = flight.FlightDescriptor.for_path(*names.paimon_path(name))
    first = batch(args, 0)
    writer, _ = client.flight.do_put(descriptor, first.schema, options=client.options(args.deadline))
    for i in range(args.batches):
        writer.write_with_metadata(batch(args, i), pa.py_buffer(messages.batch_seq(i)))
        print(f"sent {i}", flush=True)
        pace(args)
    writer.close()


def pace(args) -> None:
    if args.rate:
        time.sleep(1 / args.rate)


def error_code(error: BaseException) -> str:
    """The protocol's code of the error behind `error` (a SinkError's causes are walked)."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, messages.StreamFailed) and seen.code:
            return seen.code
        if isinstance(seen, (FlightPaimonError, flight.FlightError, pa.ArrowException, KeyError)):
            return from_flight(seen).code
        seen = seen.__cause__ or seen.__context__
    return type(error).__name__


def abandon(sink, how: str) -> None:
    """Let go of a durable sink's stream without waiting for its acks: `cut` closes its connection
    (the server sees the call cancelled, as when a producer's host vanishes), `fail` ends the stream
    with an in-band error (the server discards what it has not committed)."""
    if how == "fail":
        sink.fail("chaos: the producer moves to another server")
    else:
        sink._client.close()  # its threads end on the closed client; nothing more is sent


def failover(args) -> int:
    """A named producer switching between servers at random moments (see the module's doc)."""
    rnd = random.Random(args.switch_seed)
    uris = [args.uri, *args.failover]
    name = args.target.split(":", 1)[1]
    k, switches, resumes = 0, 0, 0
    while True:
        client = Client(uris[k], timeout=10)
        sink = client.paimon_sink(name, args.producer, reconnect_timeout=args.reconnect_timeout)
        first = 0 if sink.last_seq is None else sink.last_seq + 1
        print(f"opened {uris[k]} last_seq {sink.last_seq}", flush=True)
        leave = time.monotonic() + rnd.uniform(*args.switch_after) if switches < args.switches else None
        i = first
        for i in range(first, args.batches):
            sink.write(batch(args, i))
            print(f"sent {i} acked {sink.acked}", flush=True)
            pace(args)
            if leave is not None and time.monotonic() >= leave:
                break
        else:  # every batch written: end cleanly (fewer switches than asked if the run was short)
            sink.close()
            client.close()
            print(f"done switches {switches} resumes {resumes + sink.reconnects}", flush=True)
            return 0
        how = rnd.choice(["cut", "fail"])
        print(f"left {uris[k]} at {i} ({how}) acked {sink.acked} resumes {sink.reconnects}", flush=True)
        resumes += sink.reconnects
        abandon(sink, how)
        client.close()
        switches += 1
        k = (k + 1) % len(uris)


def emit(**fields) -> None:
    print(json.dumps(fields), flush=True)


def reopening(args) -> int:
    """A named producer that opens a new sink when its table was dropped (see the module's doc)."""
    name = args.target.split(":", 1)[1]
    client = Client(args.uri, timeout=10)
    gen, start = 0, 0
    deadline = None  # while the table is gone: how long to wait for it to be created again
    while True:
        try:
            sink = client.paimon_sink(name, args.producer, reconnect_timeout=args.reconnect_timeout)
        except Exception as e:  # noqa: BLE001 - its code is the finding
            code = error_code(e)
            emit(open_refused=code, gen=gen, message=error_message(e)[:300])
            deadline = deadline or time.monotonic() + 30
            if code != "not_found" or time.monotonic() > deadline:
                return 1
            time.sleep(0.05)  # another server creates the table: nothing here to wait on but time
            continue
        deadline = None
        emit(opened=gen, at=start, last_seq=sink.last_seq)
        tag = f"{args.producer}.g{gen}"
        i = start
        try:
            for i in range(start, args.batches):
                sink.write(events.batch(tag, i, args.rows), seq=i)
                emit(sent=i, gen=gen, acked=sink.acked)
                pace(args)
            sink.close()
            emit(done=gen, seqs=[start, args.batches])
            return 0
        except (SinkError, ValueError) as e:
            code = error_code(e) if isinstance(e, SinkError) else "seq"
            emit(error=code, gen=gen, at=i, acked=sink.acked, message=error_message(e)[:300])
            if code not in ("table_dropped", "not_found"):
                return 1
            try:
                sink.fail("chaos: the table was dropped")
            except Exception:  # noqa: BLE001 - the stream is gone already
                pass
            start += sink.acked  # the batches the failed stream had acked are behind us
            gen += 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("uri")
    p.add_argument("target")
    p.add_argument("--batches", type=int, default=20)
    p.add_argument("--rows", type=int, default=1000)
    p.add_argument("--rate", type=float, default=0)
    p.add_argument("--producer")
    p.add_argument("--end", choices=["marker", "plain-close", "error"], default="marker")
    p.add_argument("--deadline", type=float, help="the do_put call's deadline, seconds")
    p.add_argument("--reconnect-timeout", type=float, default=120,
                   help="seconds a named producer waits for its server to come back (a restart after a kill, "
                        "and what a scenario checks before it, on a loaded machine)")
    p.add_argument("--failover", action="append", default=[], help="another server's URI (named Paimon producers)")
    p.add_argument("--switches", type=int, default=3, help="with --failover: how many times to switch servers")
    p.add_argument("--switch-seed", type=int, default=0)
    p.add_argument("--switch-after", type=float, nargs=2, default=[0.1, 0.8], metavar=("LOW", "HIGH"),
                   help="with --failover: seconds on a server before switching, uniform in [LOW, HIGH)")
    p.add_argument("--on-drop", choices=["fail", "reopen"], default="fail")
    args = p.parse_args()
    if args.failover:
        return failover(args)
    if args.on_drop == "reopen":
        return reopening(args)
    client = Client(args.uri, timeout=10)
    if args.end == "plain-close":
        plain_close(client, args)
        return 0
    kind, name = args.target.split(":", 1)
    if kind == "push":
        sink = client.sink(name, 0, call_timeout=args.deadline)
    else:
        sink = client.paimon_sink(name, args.producer, call_timeout=args.deadline, reconnect_timeout=args.reconnect_timeout)
    last = getattr(sink, "last_seq", None)  # a named Paimon producer resumes after the table's last seq
    first = 0 if last is None else last + 1
    for i in range(first, args.batches):
        sink.write(batch(args, i))
        # A Paimon sink's `acked` counts batches committed (in order): a lower bound at a kill.
        print(f"sent {i}" + (f" acked {sink.acked}" if kind == "paimon" else ""), flush=True)
        pace(args)
    if args.end == "error":
        sink.fail(ERROR)
        return 0
    sink.close()
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
