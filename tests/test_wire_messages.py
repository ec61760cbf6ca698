"""The wire layer alone, no network: every message, request, descriptor and stream rule round-trips
or is refused with the protocol's error (what the servers and clients both build on)."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from flight_server.wire import descriptors, messages, names, producer_stream
from flight_server.wire.errors import InvalidRequest
from flight_server.wire.requests import (
    PaimonRequest,
    PushTarget,
    PushView,
    ReplayRange,
    WriteTarget,
)
from flight_server.wire.values import (
    MAX_BODY_BYTES,
    MAX_JSON_DEPTH,
    is_int,
    parse_json_object,
)

pytestmark = pytest.mark.timeout(30)

BATCH = pa.record_batch([pa.array([1, 2], pa.int64())], names=["id"])


def buf(raw: bytes) -> pa.Buffer:
    return pa.py_buffer(raw)


# -- values ---------------------------------------------------------------------------------

@pytest.mark.parametrize("value,minimum,maximum,expected", [
    (0, None, None, True), (-5, None, None, True), (2**70, None, None, True),
    (True, None, None, False), (False, 0, None, False), (1.0, None, None, False), ("1", None, None, False),
    (None, None, None, False), (3, 3, None, True), (2, 3, None, False), (5, 1, 5, True), (6, 1, 5, False),
])
def test_is_int_takes_json_integers_only(value, minimum, maximum, expected):
    assert is_int(value, minimum, maximum) is expected


def test_json_objects_are_bounded_in_size_and_depth():
    assert parse_json_object(b'{"a": [1, {"b": 2}]}', "body") == {"a": [1, {"b": 2}]}
    assert parse_json_object(b"", "body") == {}
    with pytest.raises(InvalidRequest, match="The body must be a JSON object, got list"):
        parse_json_object(b"[1]", "body")
    with pytest.raises(InvalidRequest, match="is not UTF-8 JSON"):
        parse_json_object(b"\xff", "body")
    with pytest.raises(InvalidRequest, match=f"at most {MAX_BODY_BYTES}"):
        parse_json_object(b" " * (MAX_BODY_BYTES + 1), "body")
    deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    with pytest.raises(InvalidRequest, match="nested more than"):
        parse_json_object(f'{{"a": {deep}}}'.encode(), "body")


# -- app_metadata messages ------------------------------------------------------------------

@pytest.mark.parametrize("seq,snapshot", [(0, None), (7, None), (7, 3), (2**40, 2**40)])
def test_acks_round_trip(seq, snapshot):
    assert messages.read_ack(buf(messages.ack(seq, snapshot))) == messages.Ack(seq, snapshot)


def test_a_stream_failure_ack_raises_with_its_code():
    with pytest.raises(messages.StreamFailed, match="commit failed") as failed:
        messages.read_ack(buf(messages.stream_failed("commit failed", "unavailable")))
    assert failed.value.code == "unavailable"


@pytest.mark.parametrize("raw", [b"", b"not json", b"[1]", b'{"seq": true}', b'{"seq": 1, "snapshot": "2"}', b"{}"])
def test_what_is_not_an_ack_is_refused(raw):
    with pytest.raises(ValueError, match="not a flight-paimon ack"):
        messages.read_ack(buf(raw))


def test_a_put_result_without_app_metadata_is_not_an_ack():
    with pytest.raises(ValueError, match="not a flight-paimon ack: b''"):
        messages.read_ack(None)


@pytest.mark.parametrize("raw,expected", [
    (messages.batch_seq(4), messages.ProducerMessage(seq=4)),
    (messages.batch_seq(4, end=5), messages.ProducerMessage(seq=4, has_end=True, end=5)),
    (messages.end(3), messages.ProducerMessage(has_end=True, end=3)),
    (messages.producer_error("disk full"), messages.ProducerMessage(error="disk full")),
    (b'{"mine": 1}', None),  # the producer's own metadata
    (b"\x00\x01", None),
])
def test_producer_messages_round_trip(raw, expected):
    assert messages.read_producer_message(buf(raw)) == expected


@pytest.mark.parametrize("raw,expected", [
    (messages.snapshot_mark(9), messages.ReadMark(snapshot=9)),
    (messages.done_mark(9), messages.ReadMark(done=9)),
    (messages.ack(5), messages.ReadMark(seq=5)),
    (b'{"snapshot": true}', messages.ReadMark()),
    (None, messages.ReadMark()),
])
def test_read_marks_round_trip(raw, expected):
    assert messages.read_mark(None if raw is None else buf(raw)) == expected


def test_files_mark_is_json():
    assert json.loads(messages.files_mark(12)) == {"files": 12}


@pytest.mark.parametrize("raw,expected", [
    (messages.files_mark(12), messages.PlanMark(files=12)),
    (messages.snapshot_mark(3), messages.PlanMark(snapshot=3)),
    (b"", messages.PlanMark()),  # a FlightInfo without app_metadata
    (b'{"files": "12"}', messages.PlanMark()),
])
def test_plan_marks_round_trip(raw, expected):
    """A Paimon read's FlightInfo app_metadata, as pyarrow gives it (bytes)."""
    assert messages.read_plan_mark(raw) == expected


# -- requests and descriptors ---------------------------------------------------------------

@pytest.mark.parametrize("request_", [
    PaimonRequest("db.t"),
    PaimonRequest("db.t", snapshot=3, columns=("id",), filter=(("id", ">", 1),)),
    PaimonRequest("db.t", from_snapshot=2, to_snapshot=5, buckets=(0, 1)),
    PaimonRequest("db.t", follow=True, start="earliest", consumer_id="c-1", poll_interval_ms=20, changelog=True),
])
def test_paimon_requests_round_trip_through_json_and_a_descriptor(request_):
    cmd = json.loads(json.dumps(request_.to_json()))
    assert PaimonRequest.from_json(cmd) == request_
    assert descriptors.read_request(None, json.dumps(cmd).encode()) == request_


@pytest.mark.parametrize("request_", [ReplayRange("orders", 1, 0, 5), ReplayRange("orders", 0, 3, None),
                                      PushView("orders", None, "earliest"), PushView("orders", 2, "latest")])
def test_push_requests_round_trip_through_json_and_a_descriptor(request_):
    assert descriptors.read_request(None, json.dumps(request_.to_json()).encode()) == request_


@pytest.mark.parametrize("path,expected", [
    ([b"push", b"orders"], PushTarget("orders")),
    ([b"push", b"orders", b"2"], PushTarget("orders", 2)),
    (names.paimon_path("db.t"), PaimonRequest("db.t")),
])
def test_descriptor_paths_name_their_table(path, expected):
    assert descriptors.read_request(path, None) == expected


@pytest.mark.parametrize("path,command,expected", [
    (names.paimon_path("db.t"), None, WriteTarget("db.t")),
    (None, json.dumps(names.write_command("db.t", "p-1")).encode(), WriteTarget("db.t", "p-1")),
    ([b"push", b"orders", b"1"], None, PushTarget("orders", 1)),
    (None, b'{"push": "orders", "partition": 1, "producer": "p"}', PushTarget("orders", 1, "p")),
])
def test_do_put_descriptors_name_their_target(path, command, expected):
    assert descriptors.write_target(path, command) == expected


@pytest.mark.parametrize("path,command,message", [
    ([b"nope"], None, "is not understood"),
    ([b"push", b"orders", b"x"], None, "is not a decimal number"),
    ([b"push", b"\xff"], None, "not UTF-8"),
    (None, b'{"nothing": 1}', "names no table"),
    (None, b'{"table": "notdotted"}', "is not 'DB.TABLE'"),
    (None, b'{"push": "orders", "partition": true, "start": 0}', "needs integer 'partition'"),
])
def test_bad_read_descriptors_say_what_to_send(path, command, message):
    with pytest.raises(InvalidRequest, match=message):
        descriptors.read_request(path, command)


@pytest.mark.parametrize("command,message", [
    (b'{"table": "db.t"}', 'names its Paimon table in "write"'),
    (b'{"write": "db.t", "producer": "a b"}', "must be 1-128 characters"),
    (b'{"write": "db.t", "extra": 1}', "takes no key 'extra'"),
    (b'{"push": "orders", "partition": -1, "producer": "p"}', "is not an integer >= 0"),
])
def test_bad_do_put_descriptors_say_what_to_send(command, message):
    with pytest.raises(InvalidRequest, match=message):
        descriptors.write_target(None, command)


def test_requests_and_targets_name_their_table_kind_and_subject():
    for value, kind, table in [(PushTarget("orders", 0), names.PUSH, "orders"), (PushView("o", None), names.PUSH, "o"),
                               (ReplayRange("r", 0, 0, 1), names.PUSH, "r"), (PaimonRequest("db.t"), names.PAIMON, "db.t"),
                               (WriteTarget("db.w", "p"), names.PAIMON, "db.w")]:
        assert (value.kind, value.table) == (kind, table)
        assert table in value.subject and value.log_fields()["table"] == table


# -- the producer stream grammar ------------------------------------------------------------

def events(chunks, named=False):
    out = []
    for event in producer_stream.read(chunks, named):
        out.append(event)
    return out


def meta(raw: bytes | None):
    return None if raw is None else buf(raw)


def test_a_clean_stream_yields_its_batches_then_its_end():
    got = events([(BATCH, None), (BATCH, None), (None, meta(messages.end(2)))])
    assert [type(e).__name__ for e in got] == ["Batch", "Batch", "Ended"]
    assert [e.index for e in got[:2]] == [0, 1] and got[2] == producer_stream.Ended(2)


def test_the_end_marker_may_ride_on_the_last_batch_and_idle_messages_are_reported():
    got = events([(None, meta(b'{"mine": 1}')), (BATCH, meta(messages.batch_seq(7, end=1)))], named=True)
    assert got == [producer_stream.Idle(), producer_stream.Batch(BATCH, 0, 7), producer_stream.Ended(1)]


def test_a_producer_error_ends_the_stream_and_its_batch_is_not_taken():
    got = events([(BATCH, None), (BATCH, meta(messages.producer_error("oops"))), (BATCH, None)])
    assert got == [producer_stream.Batch(BATCH, 0), producer_stream.ProducerFailed("oops")]


def test_a_stream_without_its_end_marker_half_closes():
    assert events([(BATCH, None)]) == [producer_stream.Batch(BATCH, 0), producer_stream.HalfClosed(1)]


@pytest.mark.parametrize("chunks,named,kind,reason", [
    ([(BATCH, None), (None, meta(messages.end(3)))], False, producer_stream.BAD_END,
     "ended with end marker 3 but the server received 1 batch(es)"),
    ([(BATCH, None), (None, meta(b'{"end": true}'))], False, producer_stream.BAD_END, "end marker True"),
    ([(None, meta(messages.end(0))), (BATCH, None)], False, producer_stream.AFTER_END, "sent more after its end marker"),
    ([(BATCH, None)], True, producer_stream.NO_SEQ, "without its app_metadata"),
    ([(BATCH, meta(b'{"seq": -1}'))], True, producer_stream.NO_SEQ, "got -1"),
    ([(BATCH, meta(b'{"seq": true}'))], True, producer_stream.NO_SEQ, "got True"),
])
def test_what_breaks_the_grammar_is_refused_with_its_kind(chunks, named, kind, reason):
    with pytest.raises(producer_stream.StreamBroken) as broken:
        events(chunks, named)
    assert broken.value.kind == kind and reason in broken.value.reason
    assert isinstance(broken.value, InvalidRequest)
