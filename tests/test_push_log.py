"""The bounded offset-indexed log, the ticket codec and the schema checks, without a server."""

from __future__ import annotations

import base64
import dataclasses
import json
import threading
import time

import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from flight_server.push.log import PartitionLog
from flight_server.tickets import PaimonTicket, PushTicket, TicketCodec
from flight_server.wire.errors import (
    Cancelled,
    InvalidRequest,
    PartitionFailed,
    WrongState,
)
from flight_server.wire.requests import PaimonRequest
from flight_server.wire.schemas import parse_spec, schema_difference
from tests.conftest import wait_for

SCHEMA = pa.schema([("id", pa.int64())])


def batch(i: int) -> pa.RecordBatch:
    return pa.record_batch([pa.array([i], pa.int64())], schema=SCHEMA)


def ids(batches) -> list[int]:
    return [b.column(0)[0].as_py() for b in batches]


def test_full_partition_blocks_append_until_commit():
    log = PartitionLog("t p0", capacity=2)
    assert [log.append(batch(i)) for i in range(2)] == [0, 1]
    appended = threading.Event()
    t = threading.Thread(target=lambda: (log.append(batch(2)), appended.set()), daemon=True)
    t.start()
    wait_for(lambda: log.stats().blocked_writers == 1, "the append past capacity to wait for room")
    assert not appended.is_set(), "append past capacity must wait"
    assert ids(log.read_range(0, 1)) == [0]
    log.commit(1)
    assert appended.wait(5), "commit must free room for the blocked append"
    assert log.stats().queued_batches == 2


def test_drain_yields_in_order_commits_and_ends_at_eof():
    log = PartitionLog("t p0", capacity=4)
    for i in range(3):
        log.append(batch(i))
    log.writer_done()
    assert ids(log.drain()) == [0, 1, 2]
    s = log.stats()
    assert (s.state, s.committed, s.queued_batches, s.rows_out) == ("eof", 3, 0, 3)


def test_second_drain_is_refused_as_already_consumed():
    log = PartitionLog("t p0", capacity=4)
    log.writer_done()
    assert list(log.drain()) == []
    with pytest.raises(WrongState, match="already consumed"):
        log.drain()


def test_fail_delivers_earlier_batches_then_the_cause():
    log = PartitionLog("t p0", capacity=4)
    log.append(batch(0))
    log.append(batch(1))
    log.fail("disk on fire")
    got = []
    with pytest.raises(PartitionFailed, match="disk on fire"):
        for b in log.drain():
            got.append(b)
    assert ids(got) == [0, 1]


def test_closed_generator_fails_partition_as_consumer_cancelled():
    log = PartitionLog("t p0", capacity=1)
    log.append(batch(0))
    reader = log.drain()
    next(reader)
    reader.close()
    with pytest.raises(Cancelled, match="consumer cancelled"):
        log.append(batch(1))


def test_blocked_append_fails_when_its_producer_is_cancelled():
    log = PartitionLog("t p0", capacity=1)
    log.append(batch(0))
    with pytest.raises(Cancelled):
        log.append(batch(1), cancelled=lambda: True)
    assert log.stats().state == "failed"


def test_range_replays_until_committed_past_it():
    log = PartitionLog("t p0", capacity=8)
    for i in range(5):
        log.append(batch(i))
    assert ids(log.read_range(1, 4)) == [1, 2, 3]
    assert ids(log.read_range(1, 4)) == [1, 2, 3]
    log.commit(2)
    with pytest.raises(WrongState, match="already committed"):
        list(log.read_range(1, 4))
    assert ids(log.read_range(2, 5)) == [2, 3, 4]


def test_range_waits_for_late_batches_and_refuses_beyond_eof():
    log = PartitionLog("t p0", capacity=8)
    log.append(batch(0))
    reader = log.read_range(0, 2)
    assert ids([next(reader)]) == [0]
    threading.Timer(0.1, lambda: log.append(batch(1))).start()
    assert ids([next(reader)]) == [1]
    log.writer_done()
    with pytest.raises(InvalidRequest, match="ended at 2"):
        list(log.read_range(0, 3))


def test_commit_never_passes_what_a_reader_was_sent():
    log = PartitionLog("t p0", capacity=8)
    for i in range(3):
        log.append(batch(i))
    with pytest.raises(InvalidRequest, match="readers were sent batches up to 0 \\(3 appended\\)"):
        log.commit(1)
    assert ids(log.read_range(0, 2)) == [0, 1]
    with pytest.raises(InvalidRequest, match="readers were sent batches up to 2"):
        log.commit(3)
    log.commit(2)
    assert log.stats().committed == 2


def test_commit_is_refused_while_a_drain_reads_and_a_drain_while_replays_read():
    drained = PartitionLog("t p0", capacity=8)
    drained.append(batch(0))
    reader = drained.drain()
    with pytest.raises(WrongState, match="single-scan reader is draining it"):
        drained.commit(1)
    with pytest.raises(WrongState, match="being drained"):
        drained.read_range(0, 1)
    assert ids([next(reader)]) == [0]
    replayed = PartitionLog("t p1", capacity=8)
    replayed.append(batch(0))
    assert ids(replayed.read_range(0, 1)) == [0]
    with pytest.raises(WrongState, match="read by replay tickets"):
        replayed.drain()
    assert (drained.stats().reader, replayed.stats().reader) == ("drain", "replay")


def test_partition_with_k_writers_ends_after_k_clean_closes():
    log = PartitionLog("t p0", capacity=8, writers=3)
    for _ in range(3):
        log.attach_writer()
    assert [log.writer_done() for _ in range(3)] == [False, False, True]
    with pytest.raises(WrongState, match="closed"):
        log.attach_writer()


def test_a_named_producers_failure_after_the_clean_end_is_refused_and_the_end_stays():
    log = PartitionLog("t p0", capacity=8)
    log.attach_writer()
    log.append(batch(1))
    assert log.writer_done()
    with pytest.raises(WrongState, match="closed"):
        log.check_open()
    with pytest.raises(WrongState, match="closed"):
        log.producer_failed("a late Spark task was killed")
    assert log.stats().state == "eof"
    assert ids(log.drain()) == [1]


def test_a_named_producers_failure_fails_an_open_partition():
    log = PartitionLog("t p0", capacity=8)
    log.append(batch(1), producer=("spark-1", 0))
    log.producer_failed("task 3 ran out of memory")
    with pytest.raises(PartitionFailed, match="task 3 ran out of memory"):
        list(log.drain())


def test_writer_slots_refuse_an_extra_stream_before_it_appends():
    log = PartitionLog("t p0", capacity=8, writers=2)
    log.attach_writer()
    log.attach_writer()
    with pytest.raises(WrongState, match="takes 2 writer stream\\(s\\) and all have attached"):
        log.attach_writer()
    log.writer_done()  # a slot whose stream ended is not given out again
    with pytest.raises(WrongState, match="all have attached \\(1 ended\\)"):
        log.attach_writer()
    assert log.stats().next_seq == 0


def test_idle_partition_fails_only_while_it_has_room():
    log = PartitionLog("t p0", capacity=1, idle_timeout_s=0.5)
    log.attach_writer()
    log.append(batch(0))  # full: waiting for its reader, not its producer
    now = time.monotonic()
    log.check_idle(now + 10)
    assert log.stats().state == "open"
    assert ids(log.read_range(0, 1)) == [0]
    log.commit(1)  # room again: the clock restarts
    log.check_idle(time.monotonic() + 0.2)
    assert log.stats().state == "open"
    log.check_idle(time.monotonic() + 0.6)
    s = log.stats()
    assert s.state == "failed" and "idle_timeout_s" in s.error


_push_tickets = st.builds(
    PushTicket, st.text(min_size=1, max_size=10), st.text(max_size=12), st.integers(0, 1023),
    st.one_of(st.none(), st.integers(0, 10)), st.none(),
).map(lambda t: t if t.start is None else PushTicket(t.name, t.uid, t.partition, t.start, t.start + 3))
_paimon_tickets = st.builds(
    lambda table, snap, bucket, cols: PaimonTicket(
        PaimonRequest(table, columns=cols), "1700000000000", "snapshot", snapshot=snap, bucket=bucket),
    st.sampled_from(["db.t", "a.b"]), st.one_of(st.none(), st.integers(1, 10**6)),
    st.one_of(st.none(), st.integers(0, 64)), st.one_of(st.none(), st.just(("id", "name"))),
)


@settings(max_examples=200, deadline=None)
@given(st.one_of(_push_tickets, _paimon_tickets))
def test_ticket_roundtrips(ticket):
    codec = TicketCodec(b"k" * 32)
    assert codec.decode(codec.encode(ticket)) == ticket


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=1, max_size=200), st.integers(min_value=0))
def test_altered_or_foreign_ticket_is_refused(garbage, position):
    codec = TicketCodec(b"k" * 32)
    ticket = bytearray(codec.encode(PushTicket("t", "u", 0)))
    i = position % len(ticket)
    ticket[i] ^= 0x5A
    for bad in (bytes(ticket), garbage, TicketCodec(b"x" * 32).encode(PushTicket("t", "u", 0))):
        with pytest.raises(InvalidRequest):
            codec.decode(bad)


def test_every_altered_byte_of_a_ticket_is_refused():
    """Base64 decoding skips stray characters and unused bits: a signature altered there decoded
    to the same bytes and was taken (52 of 38,600 single-byte changes, found by the Hypothesis test
    above once tickets carried their planning time)."""
    codec = TicketCodec(b"k" * 32)
    for trial in range(20):
        ticket = codec.encode(PushTicket("t", "u", trial))
        for i in range(len(ticket)):
            for flip in (0x01, 0x5A, 0x80):
                altered = bytearray(ticket)
                altered[i] ^= flip
                with pytest.raises(InvalidRequest):
                    codec.decode(bytes(altered))


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=8)),
                    lambda inner: st.one_of(st.lists(inner, max_size=3),
                                            st.dictionaries(st.sampled_from(
                                                ["kind", "name", "uid", "partition", "start", "end", "request",
                                                 "mode", "snapshot", "bucket", "group", "next", "table"]),
                                                inner, max_size=6)), max_leaves=12))
@example({"kind": "push", "name": "t", "uid": "u", "partition": 0})
@example({"kind": "push", "name": "t", "uid": "u", "partition": 2, "start": 1, "end": 3, "table": [None]})
def test_a_signed_ticket_with_a_malformed_payload_is_refused_clearly(payload):
    """Only a holder of the key can sign, but even then a bad payload is a clear refusal, not a crash;
    a payload that is taken is read field by field, as its signer wrote it."""
    codec = TicketCodec(b"k" * 32)
    if isinstance(payload, dict):  # planned now (a payload without the time is refused as malformed)
        payload = {**payload, "iat": int(time.time() * 1000)}
    body = base64.urlsafe_b64encode(json.dumps(payload).encode())
    ticket = b"fp1." + body + b"." + base64.urlsafe_b64encode(codec._mac(body))
    try:
        decoded = codec.decode(ticket)
    except InvalidRequest as e:
        assert "malformed" in str(e) or "Paimon read" in str(e), e
    else:
        # The kind the payload names, every field as the payload has it (keys the ticket does not
        # know are ignored; the Paimon request is checked by its own parser), and signed again it
        # decodes to the same ticket.
        assert type(decoded) is {"push": PushTicket, "paimon": PaimonTicket}[payload["kind"]], decoded
        fields = {f.name: json.loads(json.dumps(getattr(decoded, f.name)))
                  for f in dataclasses.fields(decoded) if f.name != "request"}
        assert fields == {name: payload.get(name) for name in fields}, (fields, payload)
        assert codec.decode(codec.encode(decoded)) == decoded


def test_a_ticket_is_served_for_its_lifetime_after_planning_and_then_refused_naming_the_flag():
    now = [1_800_000_000.0]
    codec = TicketCodec(b"k" * 32, lifetime_ms=3_600_000, clock=lambda: now[0])
    ticket = codec.encode(PushTicket("t", "u", 0))
    now[0] += 3600  # exactly the lifetime later: still served
    assert codec.decode(ticket) == PushTicket("t", "u", 0)
    now[0] += 0.001
    with pytest.raises(InvalidRequest) as e:
        codec.decode(ticket)
    assert str(e.value).startswith("The ticket expired: it was planned 1 h ago and this server serves tickets for 1 h "
                                   "(flight_cli serve --ticket-lifetime); plan the read again"), e.value
    assert codec.decode(codec.encode(PushTicket("t", "u", 0))) == PushTicket("t", "u", 0)  # planned again: served
    # Another server of the key, with a longer lifetime, still serves it: each checks its own.
    assert TicketCodec(b"k" * 32, lifetime_ms=7_200_000, clock=lambda: now[0]).decode(ticket).name == "t"


def test_a_signed_ticket_without_its_planning_time_is_refused_and_the_time_cannot_be_altered():
    codec = TicketCodec(b"k" * 32)
    body = base64.urlsafe_b64encode(json.dumps({"kind": "push", "name": "t", "uid": "u", "partition": 0}).encode())
    with pytest.raises(InvalidRequest, match="malformed .*no planning time"):
        codec.decode(b"fp1." + body + b"." + base64.urlsafe_b64encode(codec._mac(body)))
    signed = codec.encode(PushTicket("t", "u", 0))
    body, _, mac = signed[4:].rpartition(b".")
    payload = json.loads(base64.urlsafe_b64decode(body))
    younger = base64.urlsafe_b64encode(json.dumps({**payload, "iat": payload["iat"] + 10**9}).encode())
    with pytest.raises(InvalidRequest, match="signature does not match"):
        codec.decode(b"fp1." + younger + b"." + mac)


_types = st.sampled_from([pa.int32(), pa.int64(), pa.string(), pa.float64(), pa.timestamp("us"), pa.list_(pa.int64())])
_fields = st.lists(st.tuples(st.text(min_size=1, max_size=5), _types, st.booleans()), min_size=1, max_size=5)


@settings(max_examples=200, deadline=None)
@given(_fields, _fields)
def test_schema_difference_is_none_exactly_when_schemas_match(a, b):
    sa = pa.schema([pa.field(n, t, nullable=nl) for n, t, nl in a], metadata={"x": "1"})
    sb = pa.schema([pa.field(n, t, nullable=nl) for n, t, nl in b])
    diff = schema_difference(sa, sb)
    assert (diff is None) == sa.equals(sb, check_metadata=False)


@pytest.mark.parametrize("changed, words", [
    (pa.schema([("ident", pa.int64()), ("name", pa.string())]), "named 'ident'"),
    (pa.schema([("id", pa.int32()), ("name", pa.string())]), "type int32"),
    (pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())]), "not null"),
    (pa.schema([("id", pa.int64())]), "missing column 'name'"),
])
def test_schema_difference_names_what_differs(changed, words):
    base = pa.schema([("id", pa.int64()), ("name", pa.string())])
    assert words in schema_difference(base, changed)


def test_parse_spec_reads_the_cli_schema_syntax():
    s = parse_spec("id:int64!,name:string,ts:timestamp[us],amount:decimal(10,2),tags:list<string>")
    assert s == pa.schema([
        pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("ts", pa.timestamp("us")),
        ("amount", pa.decimal128(10, 2)), ("tags", pa.list_(pa.string())),
    ])
    with pytest.raises(InvalidRequest, match="Unknown column type 'int65'"):
        parse_spec("id:int65")
