"""One table maps error kinds to Flight statuses (`flight_server.wire.errors.STATUSES`): the server
sends each kind by it (`status.to_flight`, `status_name`), and clients read it back by it
(`from_flight`, and through it the Spark reader's "unreachable / timed out / refused")."""

from __future__ import annotations

import pyarrow.flight as flight
import pytest

from flight_server.status import status_name, to_flight
from flight_server.wire import names
from flight_server.wire.errors import (
    KINDS,
    STATUSES,
    NotFound,
    TimedOut,
    Unavailable,
    WrongState,
    error_message,
    from_flight,
    status_of,
)
from producers.examples.counter import SCHEMA
from spark_reader.flight_io import SourceError, call, connect
from spark_reader.options import parse

SENTENCE = "Push table 't' partition 0 is closed; register it again."


@pytest.mark.parametrize("row", STATUSES, ids=lambda row: row.name)
def test_each_kind_is_sent_as_its_status_and_read_back_as_itself(row):
    error = row.kind(SENTENCE)
    sent = to_flight(error)
    assert isinstance(sent, row.exception()) and status_of(error) is row and status_name(error) == row.name
    assert type(from_flight(sent)) is row.kind and error_message(sent) == SENTENCE.rstrip(".")


@pytest.mark.parametrize("kind", sorted(set(KINDS.values()), key=lambda kind: kind.code), ids=lambda k: k.code)
def test_every_kind_comes_back_as_itself_those_without_a_status_of_their_own_by_their_code(kind):
    sent = to_flight(kind(SENTENCE))
    assert type(from_flight(sent)) is kind
    if not any(row.kind is kind for row in STATUSES):  # a failed partition, commit, a limit: UNKNOWN and the code
        assert isinstance(sent, flight.FlightServerError) and status_name(kind("x")) == "UNKNOWN"
        assert issubclass(kind, WrongState)


def test_a_bug_is_internal_and_any_other_flight_error_is_unknown():
    assert status_name(ValueError("a bug")) == "INTERNAL" and status_name(None) == "OK"
    assert isinstance(to_flight(KeyError("a bug")), flight.FlightInternalError)
    assert type(from_flight(flight.FlightError("something else"))) is WrongState
    mine = NotFound("raised on this side")
    assert from_flight(mine) is mine


def test_the_spark_reader_says_whether_the_server_was_unreachable_timed_out_or_refused(server, client):
    for name in ("t", "u"):  # open and empty: a single-scan read of one waits for a batch
        client.register(name, SCHEMA)
    opts = parse({"uri": server.uri, "push": "t", "timeout": "0.5"})
    c = connect(opts)
    try:
        with pytest.raises(SourceError, match=r"refused the offsets of push table 't': Push table 'nope' is not registered"):
            call(opts, names.OFFSETS, c.offsets, "nope")
        ticket = c.info("t").endpoints[0].ticket
        with pytest.raises(flight.FlightTimedOutError) as e:
            c.flight.do_get(ticket, options=c.options(0.5)).read_all()
        assert isinstance(from_flight(e.value), TimedOut)
        with pytest.raises(SourceError, match=r"did not answer within 0.5 s \(reading of push table 't'\)"):
            call(opts, "reading", lambda: c.flight.do_get(c.info("u").endpoints[0].ticket,
                                                          options=c.options(0.5)).read_all())
    finally:
        c.close()
    gone = parse({"uri": "grpc://127.0.0.1:1", "push": "t", "timeout": "5"})
    c = connect(gone)
    try:
        with pytest.raises(flight.FlightUnavailableError) as e:
            c.offsets("t")
        assert isinstance(from_flight(e.value), Unavailable)
        with pytest.raises(SourceError, match=r"Cannot reach the flight-paimon server at grpc://127.0.0.1:1 "
                                              r"\(offsets of push table 't'\)"):
            call(gone, names.OFFSETS, c.offsets, "t")
    finally:
        c.close()
    assert isinstance(from_flight(KeyError("t")), NotFound)
