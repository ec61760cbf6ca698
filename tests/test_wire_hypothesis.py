"""Hypothesis over every JSON body, command, path and ticket field: typed errors with clean messages.

What a client may get for a bad request: NOT_FOUND, INVALID_ARGUMENT or a state error, each with
the server's own sentence. Never INTERNAL, never a traceback or a server file path, and the
server keeps serving (list_flights included, whatever names were registered).
"""

from __future__ import annotations

import base64

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from chaos.strategies import LEAKS, OBJECTS, PAIMON_COMMANDS, encode
from flight_server import actions
from flight_server.wire import names
from flight_server.wire.errors import (
    InvalidRequest,
    NotFound,
    PartitionFailed,
    error_message,
    from_flight,
)
from flight_server.wire.schemas import encode_schema
from producers.examples.counter import SCHEMA, make_batch
from tests.paimon_tables import Warehouse, rows

TYPED = (pa.ArrowInvalid, KeyError, flight.FlightServerError, flight.FlightCancelledError)
FUZZ = settings(max_examples=400, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture
def wired(client, warehouse):
    wh = Warehouse(warehouse)
    wh.commit(wh.create("orders", buckets=2), rows(0, 10))
    client.register("orders", SCHEMA, capacity=4, partitions=2)
    yield client
    # Whatever the fuzz sent, the server still serves: listing, push tables and Paimon reads.
    assert any(info.descriptor.path == [b"push", b"orders"] for info in client.flight.list_flights())
    with client.sink("orders", 1) as sink:
        sink.write(make_batch(0, 3))
    info = client.info("orders", 1)
    assert client.flight.do_get(info.endpoints[0].ticket, options=client.options(10)).read_all().num_rows == 3
    assert client.action(names.LATEST_SNAPSHOT, {"table": "db.orders"}) == {"snapshot_id": 1, "earliest_snapshot_id": 1}


def call(fn) -> None:
    """Run one request; a refusal must be typed and clean."""
    try:
        fn()
    except TYPED as e:
        text = str(e)
        assert not isinstance(e, flight.FlightInternalError), text
        assert not LEAKS.search(text), text
    except flight.FlightError as e:  # INTERNAL, UNAVAILABLE, timeouts: what must never happen
        raise AssertionError(f"{type(e).__name__}: {e}") from None


@FUZZ
@given(st.sampled_from(list(names.ACTIONS) + ["", "nope"]), OBJECTS)
@example(names.REGISTER, {"name": "\ud800"})
@example(names.FAIL, {"name": "orders2", "message": "x" * 20_000})
@example(names.COMMIT, {"name": "orders", "offsets": {"0": 2**70}})
@example(names.CONSUMER_COMMIT, {"table": "db.orders", "consumer_id": "c", "next_snapshot": 2**70})
@example(names.LATEST_SNAPSHOT, {"table": "\ud800.x"})
def test_action_bodies(wired, action, body):
    if action in (names.DROP, names.FAIL) and body.get("name") == "orders":
        body["name"] = "other"  # a well-formed drop or fail of the live table is not a bad request
    if action == names.REGISTER and isinstance(body.get("name"), str):
        body["schema"] = encode_schema(SCHEMA)
    call(lambda: list(wired.flight.do_action(flight.Action(action, encode(body)), options=wired.options(10))))


@FUZZ
@given(st.one_of(PAIMON_COMMANDS, OBJECTS, OBJECTS.map(lambda o: {names.PUSH: "orders", **o})))
@example({"table": "db.orders", "filter": [["id", "=", 10**30]]})  # outside int64
@example({"table": "db.orders", "filter": [["id", "in", [1, -2**63 - 1]]]})
@example({"table": "db.orders", "filter": [["amount", ">", "x"]], "columns": ["id"]})
@example({"table": "db.missing"})
@example({"table": "\ud800.t"})
@example({"table": "db/x.t"})
@example({"table": "db.orders", "snapshot": 2**70})
@example({"push": "orders", "partition": 2**70, "start": 0, "end": 1})
def test_descriptor_commands(wired, cmd):
    call(lambda: wired.flight.get_flight_info(flight.FlightDescriptor.for_command(encode(cmd)),
                                              options=wired.options(10)))


@FUZZ
@given(st.lists(st.one_of(st.sampled_from(["push", "paimon", "orders", "db.orders", "0", "9", "٣", "-1"]),
                          st.text(max_size=8)), max_size=4))
def test_descriptor_paths(wired, path):
    # Flight's path segments are protobuf strings: a non-UTF-8 one never reaches the server (gRPC
    # refuses to parse the request, see docs/protocol.md), so the fuzz sends text.
    call(lambda: wired.flight.get_flight_info(flight.FlightDescriptor.for_path(*path), options=wired.options(10)))


@FUZZ
@given(st.one_of(st.binary(max_size=64), OBJECTS.map(lambda o: ("signed", o))))
def test_tickets(wired, server, ticket):
    if isinstance(ticket, tuple):  # a payload signed with the server's own key
        body = base64.urlsafe_b64encode(encode(ticket[1]))
        ticket = b"fp1." + body + b"." + base64.urlsafe_b64encode(server.server.tickets._mac(body))
    call(lambda: wired.flight.do_get(flight.Ticket(ticket), options=wired.options(10)).read_all())


def test_oversized_and_deeply_nested_bodies_are_refused(wired):
    call(lambda: wired.action(names.STATS, {"name": "x" * (2 << 20)}))
    nested = b"[" * 100_000 + b"]" * 100_000
    call(lambda: list(wired.flight.do_action(flight.Action(names.STATS, nested), options=wired.options(10))))
    with pytest.raises(pa.ArrowInvalid, match="at most 1048576 are taken"):
        wired.action(names.STATS, {"name": "x" * (2 << 20)})


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(min_size=1, max_size=20))
def test_list_flights_works_whatever_names_were_registered(wired, name):
    body = encode({"name": name, "schema": encode_schema(SCHEMA)})
    call(lambda: list(wired.flight.do_action(flight.Action(names.REGISTER, body), options=wired.options(10))))
    listed = list(wired.flight.list_flights(options=wired.options(10)))
    assert any(info.descriptor.path == [b"push", b"orders"] for info in listed)


def test_a_huge_fail_message_reaches_the_reader_cut_not_lost(client):
    client.register("big", SCHEMA)
    client.fail("big", "sensor " + "x" * 20_000 + " broke")
    with pytest.raises(flight.FlightServerError) as e:
        client.flight.do_get(client.info("big").endpoints[0].ticket, options=client.options(10)).read_all()
    message = error_message(e.value)
    assert message.startswith("push table 'big' partition 0 failed: sensor xxx") and "bytes in all" in message
    assert len(message.encode()) <= 2000


def test_a_key_error_from_a_server_bug_is_logged_with_its_traceback_and_answered_internal(server, client, monkeypatch):
    def buggy(ctx, body):
        return {"value": {}["no such key"]}  # a bug: a dict key the code forgot to check

    monkeypatch.setitem(actions.HANDLERS, names.HEALTH, buggy)
    with capture_logs() as logs:
        with pytest.raises(flight.FlightInternalError, match=r"Internal error in flight-paimon \(KeyError"):
            client.action(names.HEALTH, {})
    logged = [e for e in logs if e["event"] == "unexpected_error"]
    assert len(logged) == 1 and isinstance(logged[0]["exc_info"], KeyError)
    assert logged[0]["exc_info"].__traceback__ is not None


def test_from_flight_gives_clients_the_protocols_error_types(client):
    client.register("t", SCHEMA)
    client.fail("t", "shard 7 crashed")
    cases = [
        (lambda: client.flight.do_get(client.info("t").endpoints[0].ticket, options=client.options(10)).read_all(),
         PartitionFailed, "push table 't' partition 0 failed: shard 7 crashed"),
        (lambda: client.stats("nope"), NotFound, "Push table 'nope' is not registered"),
        (lambda: client.action(names.STATS, {"name": 5}), InvalidRequest, "Action 'stats': 'name' must be a table name (a string), got 5"),
    ]
    for fn, kind, start in cases:
        with pytest.raises(Exception) as e:
            fn()
        got = from_flight(e.value)
        assert type(got) is kind and got.message.startswith(start) and "Detail" not in got.message, got
