"""Garbage on every entry point gets a clear typed error, and the server keeps serving."""

from __future__ import annotations

import json
import random

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from producers.examples.counter import SCHEMA, make_batch

# What a bad request may be answered with: never INTERNAL, UNAVAILABLE or a hang.
TYPED = (pa.ArrowInvalid, KeyError, flight.FlightServerError)
NAMES = ["t", "missing", "", "t/0", "../etc", "\u00e9", "x" * 300]
JUNK_VALUES = [None, -1, 0, 1, 2**40, 1.5, True, "", "0", "abc", [], {}, [1], {"a": 1}]


def junk_json(rng: random.Random) -> bytes:
    keys = ["name", "schema", "capacity", "partitions", "writers", "partition", "message", "offsets",
            "push", "start", "end", "table", "k", "p"]
    obj = {rng.choice(keys): rng.choice(JUNK_VALUES + NAMES) for _ in range(rng.randint(0, 4))}
    return json.dumps(rng.choice([obj, [obj], "str", 7, None])).encode()


def junk_bytes(rng: random.Random) -> bytes:
    return rng.choice([
        lambda: rng.randbytes(rng.randint(0, 64)),
        lambda: junk_json(rng),
        lambda: b"fp1." + rng.randbytes(rng.randint(0, 40)),
        lambda: b"fp1.eyJwdXNoIjoidCJ9." + rng.randbytes(8),
        lambda: b"\xff\xfe{",
    ])()


@pytest.mark.timeout(180)
def test_thousands_of_bad_requests_get_typed_errors_and_server_keeps_serving(client):
    client.register("t", SCHEMA, capacity=4, partitions=2)
    rng = random.Random(20261121)
    opts = client.options(5)
    actions = ["register", "fail", "drop", "commit", "stats", "nope", ""]
    unexpected = []

    def expect_typed(call):
        try:
            call()
        except TYPED:
            return
        except Exception as e:  # noqa: BLE001 - collected and reported by the assertion below
            unexpected.append(f"{type(e).__name__}: {str(e)[:200]}")

    for i in range(3000):
        kind = i % 4
        if kind == 0:
            expect_typed(lambda: client.flight.do_get(flight.Ticket(junk_bytes(rng)), options=opts).read_all())
        elif kind == 1:
            path = [rng.choice(["push", "paimon", "", "x"])] + [rng.choice(NAMES + ["0", "7", "-1", "a"])
                                                                for _ in range(rng.randint(0, 3))]
            expect_typed(lambda: client.flight.get_flight_info(flight.FlightDescriptor.for_path(*path), options=opts))
        elif kind == 2:
            expect_typed(lambda: client.flight.get_flight_info(
                flight.FlightDescriptor.for_command(junk_bytes(rng)), options=opts))
        else:
            body = junk_bytes(rng)
            name = rng.choice(actions)
            if name in ("drop", "fail") and b'"t"' in body:
                continue  # a well-formed drop or fail of the live table is not a bad request
            expect_typed(lambda: list(client.flight.do_action(flight.Action(name, body), options=opts)))
    assert not unexpected, unexpected[:10]

    # A garbled do_put descriptor is refused too, and the table still works end to end.
    for path in (["push"], ["push", "t"], ["push", "t", "9"], ["nope", "t", "0"]):
        writer, _ = client.flight.do_put(flight.FlightDescriptor.for_path(*path), SCHEMA, options=opts)
        with pytest.raises(TYPED):
            writer.write_batch(make_batch(0, 1))
            writer.close()
    with client.sink("t", 1) as sink:
        sink.write(make_batch(0, 3))
    info = client.info("t", 1)
    assert client.flight.do_get(info.endpoints[0].ticket, options=opts).read_all().num_rows == 3
