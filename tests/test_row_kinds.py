"""Row kinds of durable writes (`rowkind.field`): a batch Paimon cannot write is refused on its own,
before it joins a group commit, through a real server on a loopback port into real pypaimon tables."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.wire import messages, names

pytestmark = pytest.mark.timeout(120)

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("op", pa.string()), ("v", pa.string())])
OPTIONS = {"bucket": "2", "rowkind.field": "op"}


def batch(ids, ops) -> pa.RecordBatch:
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array(ops, pa.string()),
                            pa.array([f"v{i}" for i in ids])], schema=SCHEMA)


def put(client, command: dict, batches, seqs=None):
    """A plain Flight do_put of `batches` (with `{"seq": N}` if `seqs`): the acks the server sent
    and the error the call ended with (None for a clean end)."""
    writer, reader = client.flight.do_put(flight.FlightDescriptor.for_command(json.dumps(command)), SCHEMA)
    acks, error = [], None
    try:
        for i, b in enumerate(batches):
            if seqs is None:
                writer.write_batch(b)
            else:
                writer.write_with_metadata(b, pa.py_buffer(messages.batch_seq(seqs[i])))
        writer.write_metadata(pa.py_buffer(messages.end(len(batches))))
        writer.done_writing()
        while (buf := reader.read()) is not None:
            acks.append(messages.read_ack(buf))
        writer.close()
    except (flight.FlightError, pa.ArrowException, messages.StreamFailed) as e:
        error = e
    return acks, error


def read_rows(client, table: str) -> dict[int, str]:
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps({"table": table})))
    got = [client.flight.do_get(e.ticket).read_all() for e in info.endpoints]
    return {r["id"]: r["op"] for t in got for r in t.to_pylist()}


def test_a_bad_row_kind_fails_only_its_batch_and_producer_never_the_group_commit(client):
    client.create_table("db.t", SCHEMA, primary_keys=["id"], options=OPTIONS)
    good = client.paimon_sink("db.t", producer="good")
    for b in range(4):  # queued, unacked: the bad batch arrives while these wait for a group commit
        good.write(batch([b * 10 + i for i in range(5)], ["+I"] * 5))
    acks, error = put(client, names.write_command("db.t", "bad"),
                      [batch([100, 101], ["+I", "+I"]), batch([102, 103, 104], ["+I", "x", "+I"])], seqs=[1, 2])
    assert isinstance(error, pa.ArrowInvalid), error  # INVALID_ARGUMENT
    assert ("Batch 1 of the stream into Paimon table 'db.t' (producer 'bad') has row kind 'x' at row 1 in column "
            "'op' (the table's rowkind.field), which takes only +I, -U, +U, -D; nothing of that batch was written "
            "and the stream's earlier batches are committed and acked before this error.") in str(error)
    assert [a.seq for a in acks] == [1] and acks[0].snapshot is not None  # its valid seq 1 landed
    assert client.producer_state("db.t", "bad") == 1
    # Every kind Paimon has passes: an update (-U then +U) and a delete from the good producer.
    good.write(batch([0, 0, 1], ["-U", "+U", "-D"]))
    good.close()  # raises if any of its batches failed
    assert good.acked == 5 and client.producer_state("db.t", "good") == 4
    expected = {b * 10 + i: "+I" for b in range(4) for i in range(5)} | {0: "+U", 100: "+I", 101: "+I"}
    del expected[1]
    assert read_rows(client, "db.t") == expected

@pytest.mark.parametrize(("ops", "said"), [
    (["+I", None], "a null row kind at row 1"),
    (["+i"], "row kind '+i' at row 0"),  # Paimon's short strings, exactly
    (["+I", "-D", "+I "], "row kind '+I ' at row 2"),
])
def test_an_unnamed_producers_bad_row_kind_is_refused_naming_the_row(client, ops, said):
    client.create_table("db.t", SCHEMA, primary_keys=["id"], options=OPTIONS)
    acks, error = put(client, names.write_command("db.t"), [batch([1], ["+I"]), batch(list(range(2, 2 + len(ops))), ops)])
    assert isinstance(error, pa.ArrowInvalid) and f"has {said} in column 'op'" in str(error), error
    assert [a.seq for a in acks] == [0]
    assert read_rows(client, "db.t") == {1: "+I"}


def test_a_staged_attempt_with_a_bad_row_kind_is_refused_and_stages_nothing(client):
    client.create_table("db.t", SCHEMA, primary_keys=["id"], options=OPTIONS)
    acks, error = put(client, names.stage_command("db.t", "job", "a1"), [batch([1], ["+I"]), batch([2], ["?"])])
    assert isinstance(error, pa.ArrowInvalid), error
    assert "has row kind '?' at row 0 in column 'op'" in str(error) and "nothing of the attempt was staged" in str(error)
    with pytest.raises(Exception):  # noqa: B017, PT011 - nothing was staged: the commit has nothing (NOT_FOUND today)
        client.action(names.COMMIT_STAGED, {"table": "db.t", "stage": "job", "attempts": ["a1"]})
    assert read_rows(client, "db.t") == {}


def test_a_rowkind_field_that_is_no_string_column_refuses_the_stream_before_any_batch(client):
    client.create_table("db.t", SCHEMA, primary_keys=["id"], options={"bucket": "2", "rowkind.field": "id"})
    acks, error = put(client, names.write_command("db.t", "p"), [batch([1], ["+I"])], seqs=[1])
    assert isinstance(error, pa.ArrowInvalid) and acks == [], error
    assert ("The option rowkind.field of Paimon table 'db.t' (producer 'p') names 'id', which is not a string "
            "column of the table") in str(error)


def test_an_append_table_ignores_rowkind_field_as_pypaimon_does(client):
    client.create_table("db.t", SCHEMA, options={"rowkind.field": "op"})
    acks, error = put(client, names.write_command("db.t"), [batch([1, 2], ["x", None])])
    assert error is None and [a.seq for a in acks] == [0]


@pytest.mark.parametrize(("engine", "options"), [
    ("partial-update", {"merge-engine": "partial-update"}),
    ("aggregation", {"merge-engine": "aggregation", "fields.v.aggregate-function": "last_non_null_value"}),
    ("first-row", {"merge-engine": "first-row"}),
])
def test_a_retraction_into_a_merge_engine_that_takes_none_is_refused_and_fails_no_one_else(client, engine, options):
    """pypaimon's partial-update and aggregation merges (and first-row without ignore-delete) fail
    on a -U or -D row: in the group commit it joined, or at every later read of its key."""
    client.create_table("db.t", SCHEMA, primary_keys=["id"], options={**OPTIONS, **options})
    good = client.paimon_sink("db.t", producer="good")
    good.write(batch([1, 2], ["+I", "+I"]))
    acks, error = put(client, names.write_command("db.t", "bad"), [batch([3], ["+I"]), batch([1, 4], ["+I", "-D"])],
                      seqs=[1, 2])
    assert isinstance(error, pa.ArrowInvalid), error
    assert (f"has row kind '-D' at row 1 in column 'op' (the table's rowkind.field), which takes only +I, +U in this "
            f"table: its merge-engine {engine} takes no retractions (-U, -D)") in str(error)
    assert [a.seq for a in acks] == [1]
    good.write(batch([2], ["+U"]))
    good.close()
    assert good.acked == 2
    client.compact("db.t")  # Paimon's batch reads of a first-row table see compacted files only
    assert sorted(read_rows(client, "db.t")) == [1, 2, 3]


def test_first_row_with_ignore_delete_takes_retractions(client):
    client.create_table("db.t", SCHEMA, primary_keys=["id"],
                        options={**OPTIONS, "merge-engine": "first-row", "ignore-delete": "true"})
    acks, error = put(client, names.write_command("db.t"), [batch([1, 2], ["+I", "+I"]), batch([1], ["-D"])])
    assert error is None and [a.seq for a in acks] == [0, 1]
    client.compact("db.t")  # Paimon's batch reads of a first-row table see compacted files only
    assert sorted(read_rows(client, "db.t")) == [1, 2]
