"""Schema evolution of durable writes: the server writes with the table's current schema whoever
altered it (here pypaimon, as another tool would), streams opened before an ALTER go on, and
producers' columns match the table's by name (a real server on a loopback port, real pypaimon
tables)."""

from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.wire import messages, names
from tests.conftest import wait_for
from tests.paimon_tables import Warehouse
from tests.test_ingest import put_raw

pytestmark = pytest.mark.timeout(120)

V0 = pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.string())])


def alter(warehouse: str, table: str, *changes) -> None:
    """An ALTER by another tool: pypaimon's catalog, as a user's script would do it."""
    Warehouse(warehouse).catalog.alter_table(table, list(changes))


def add_column(name: str, paimon_type: str = "BIGINT"):
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import SchemaChange

    return SchemaChange.add_column(name, AtomicType(paimon_type))


def rename_column(old: str, new: str):
    from pypaimon.schema.schema_change import SchemaChange

    return SchemaChange.rename_column(old, new)


def put(client, table: str, batches: list[pa.RecordBatch], producer: str | None = None) -> list:
    """One stream of `batches` (a named producer's numbered 0, 1, ...); returns the acks."""
    descriptor = (flight.FlightDescriptor.for_command(json.dumps(names.write_command(table, producer))) if producer
                  else flight.FlightDescriptor.for_path(*names.paimon_path(table)))
    return put_raw(client, descriptor, batches, metadata=messages.batch_seq if producer else None,
                   schema=batches[0].schema)


def rows(client, table: str) -> list[dict]:
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps({"table": table})))
    out = [r for e in info.endpoints for r in client.flight.do_get(e.ticket).read_all().to_pylist()]
    return sorted(out, key=lambda r: r["id"])


def v0(ids) -> pa.RecordBatch:
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array([f"s{i}" for i in ids])], schema=V0)


def test_columns_match_by_name_in_any_order_and_a_missing_nullable_column_is_null(client):
    client.create_table("db.t", pa.schema([*V0, ("n", pa.float64())]))
    reordered = pa.schema([("n", pa.float64()), ("id", pa.int64()), ("s", pa.string())])
    put(client, "db.t", [pa.record_batch([pa.array([1.5]), pa.array([1], pa.int64()), pa.array(["a"])],
                                         schema=reordered)])
    put(client, "db.t", [v0([2])])  # no n
    assert rows(client, "db.t") == [{"id": 1, "s": "a", "n": 1.5}, {"id": 2, "s": "s2", "n": None}]
    with pytest.raises(pa.ArrowInvalid, match="column 'x' is not in the table"):
        put(client, "db.t", [pa.record_batch([pa.array([3], pa.int64()), pa.array([7])],
                                             schema=pa.schema([("id", pa.int64()), ("x", pa.int64())]))])
    with pytest.raises(pa.ArrowInvalid, match="NOT NULL column 'id' is missing"):
        put(client, "db.t", [pa.record_batch([pa.array(["z"])], schema=pa.schema([("s", pa.string())]))])


def test_a_column_another_tool_added_is_written_by_the_next_stream_without_a_restart(client, warehouse):
    client.create_table("db.t", V0)
    put(client, "db.t", [v0([1])], producer="p")
    alter(warehouse, "db.t", add_column("x"))
    v1 = pa.schema([*V0, ("x", pa.int64())])
    put(client, "db.t", [pa.record_batch([pa.array([2], pa.int64()), pa.array(["b"]), pa.array([20], pa.int64())],
                                         schema=v1)])
    put(client, "db.t", [v0([3])])  # a producer still on the old schema: x is null
    assert rows(client, "db.t") == [{"id": 1, "s": "s1", "x": None}, {"id": 2, "s": "b", "x": 20},
                                    {"id": 3, "s": "s3", "x": None}]
    assert client.producer_state("db.t", "p") == 0


def test_a_stream_opened_before_an_alter_goes_on_and_its_rows_read_with_the_new_schema(client, warehouse):
    client.create_table("db.t", V0)
    writer, reader = client.flight.do_put(
        flight.FlightDescriptor.for_command(json.dumps(names.write_command("db.t", "p"))), V0)
    writer.write_with_metadata(v0([1]), pa.py_buffer(messages.batch_seq(0)))
    assert messages.read_ack(reader.read()).seq == 0
    alter(warehouse, "db.t", add_column("x"), rename_column("s", "label"))
    seq = 1
    # The open stream goes on with its old columns; the server adopts the new schema between commits.
    def adopted() -> bool:
        nonlocal seq
        writer.write_with_metadata(v0([seq + 1]), pa.py_buffer(messages.batch_seq(seq)))
        assert messages.read_ack(reader.read()).seq == seq
        seq += 1
        latest = Warehouse(warehouse).catalog.get_table("db.t").snapshot_manager().get_latest_snapshot()
        return latest.schema_id == 1  # the server committed files of the altered schema
    wait_for(adopted, "the server to write with the altered schema", timeout=60)
    writer.write_with_metadata(v0([seq + 1]), pa.py_buffer(messages.batch_seq(seq)))
    writer.write_metadata(pa.py_buffer(messages.end(seq + 1)))
    writer.done_writing()
    while (buf := reader.read()) is not None:
        messages.read_ack(buf)
    writer.close()
    got = rows(client, "db.t")
    assert [r["id"] for r in got] == list(range(1, seq + 2))  # every batch once, none lost over the change
    assert all(r == {"id": r["id"], "label": f"s{r['id']}", "x": None} for r in got), got


@pytest.mark.parametrize("keys", [[], ["id"]])
def test_a_job_staged_before_an_alter_commits_after_it_with_the_new_schema(client, warehouse, keys):
    """An append table's attempt is files of the old schema (Paimon reads them with the new one); a
    primary-key table's waits in rows, written at the commit in the new schema."""
    client.create_table("db.t", V0, primary_keys=keys, options={"bucket": "2"} if keys else None)
    client.stage("db.t", "job-1", "a0", V0, [v0([1, 2])])
    alter(warehouse, "db.t", add_column("x"), rename_column("s", "label"))
    put(client, "db.t", [pa.record_batch([pa.array([3], pa.int64()), pa.array(["new"]), pa.array([30], pa.int64())],
                                         schema=pa.schema([*V0.set(1, pa.field("label", pa.string())),
                                                           ("x", pa.int64())]))])
    committed = client.commit_staged("db.t", "job-1", ["a0"])
    assert committed.rows == 2
    assert rows(client, "db.t") == [{"id": 1, "label": "s1", "x": None}, {"id": 2, "label": "s2", "x": None},
                                    {"id": 3, "label": "new", "x": 30}]


def test_reads_of_every_snapshot_across_changes_and_a_follow_that_meets_one(client, warehouse):
    from tests.paimon_tables import Follower, command, info

    client.create_table("db.t", V0, options={"write-only": "true"})
    first = put(client, "db.t", [v0([1])])[0].snapshot
    follower = Follower(client, info(client, command({"table": "db.t", "follow": True, "start": "earliest",
                                                       "poll_interval_ms": 50})).endpoints[0])
    try:
        follower.wait_rows(1)
        alter(warehouse, "db.t", add_column("x"), rename_column("s", "label"))
        v1 = pa.schema([*V0.set(1, pa.field("label", pa.string())), ("x", pa.int64())])
        second = put(client, "db.t", [pa.record_batch([pa.array([2], pa.int64()), pa.array(["b"]),
                                                       pa.array([20], pa.int64())], schema=v1)])[0].snapshot
        wait_for(lambda: follower.error is not None or follower.rows() >= 2, "the follow to meet the new schema")
        met = follower.error
        got = [r for _, b in follower.take() for r in b.to_pylist()]
    finally:
        follower.cancel()
    # A full read and a pinned read of the old snapshot read as today's schema (Paimon's time travel).
    assert rows(client, "db.t") == [{"id": 1, "label": "s1", "x": None}, {"id": 2, "label": "b", "x": 20}]
    pinned = client.flight.get_flight_info(flight.FlightDescriptor.for_command(
        json.dumps({"table": "db.t", "snapshot": first})))
    assert [r for e in pinned.endpoints for r in client.flight.do_get(e.ticket).read_all().to_pylist()] == \
        [{"id": 1, "label": "s1", "x": None}]
    assert second > first
    # The follow goes on with the columns it opened with: the renamed one by its old name (Paimon's
    # field id), the added one left out.
    assert met is None, met
    assert got == [{"id": 1, "s": "s1"}, {"id": 2, "s": "b"}]


def test_merge_schema_adds_a_producers_new_columns_once_however_many_producers_race(client, warehouse):
    import threading

    client.create_table("db.t", V0)
    v1 = pa.schema([*V0, ("email", pa.string()), ("score", pa.int64())])

    def batch(i: int) -> pa.RecordBatch:
        return pa.record_batch([pa.array([i], pa.int64()), pa.array([f"s{i}"]), pa.array([f"e{i}"]),
                                pa.array([i * 10], pa.int64())], schema=v1)

    with pytest.raises(pa.ArrowInvalid, match="column 'email' is not in the table"):
        put(client, "db.t", [batch(0)])  # without merge_schema: refused, naming the column
    errors = []

    def producer(i: int) -> None:
        try:
            command = names.write_command("db.t", f"p{i}", merge_schema=True)
            writer, reader = client.flight.do_put(flight.FlightDescriptor.for_command(json.dumps(command)), v1)
            writer.write_with_metadata(batch(i), pa.py_buffer(messages.batch_seq(0)))
            writer.write_metadata(pa.py_buffer(messages.end(1)))
            writer.done_writing()
            while reader.read() is not None:
                pass
            writer.close()
        except Exception as e:  # noqa: BLE001 - reported by the assertion below
            errors.append(e)

    threads = [threading.Thread(target=producer, args=(i,)) for i in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    assert rows(client, "db.t") == [{"id": i, "s": f"s{i}", "email": f"e{i}", "score": i * 10} for i in range(1, 5)]
    schemas = sorted(os.listdir(os.path.join(warehouse, "db.db", "t", "schema")))
    assert schemas == ["schema-0", "schema-1"], schemas  # the racing producers changed it once


def test_a_paimon_sink_with_merge_schema_adds_its_new_column(client):
    client.create_table("db.t", V0)
    v1 = pa.schema([*V0, ("email", pa.string())])
    with client.paimon_sink("db.t", producer="p", merge_schema=v1) as sink:
        sink.write(pa.record_batch([pa.array([1], pa.int64()), pa.array(["a"]), pa.array(["e1"])], schema=v1))
        sink.write(v0([2]))  # a batch without the new column: null
    assert rows(client, "db.t") == [{"id": 1, "s": "a", "email": "e1"}, {"id": 2, "s": "s2", "email": None}]


def test_a_delta_of_an_old_snapshot_and_a_widened_column_read_with_the_current_schema(client, warehouse):
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import SchemaChange

    narrow = pa.schema([pa.field("id", pa.int64(), nullable=False), ("n", pa.int32())])
    client.create_table("db.t", narrow, options={"write-only": "true"})
    first = put(client, "db.t", [pa.record_batch([pa.array([1], pa.int64()), pa.array([7], pa.int32())],
                                                 schema=narrow)])[0].snapshot
    alter(warehouse, "db.t", SchemaChange.update_column_type("n", AtomicType("BIGINT")), add_column("x"))
    with pytest.raises(pa.ArrowInvalid, match="column 'n' has type int32, expected int64"):
        put(client, "db.t", [pa.record_batch([pa.array([2], pa.int64()), pa.array([8], pa.int32())], schema=narrow)])
    wide = pa.schema([narrow[0], ("n", pa.int64())])  # a new stream sends the table's types (x left out: null)
    later = put(client, "db.t", [pa.record_batch([pa.array([2], pa.int64()), pa.array([8], pa.int64())], schema=wide)])
    assert later[0].snapshot > first
    delta = client.flight.get_flight_info(flight.FlightDescriptor.for_command(
        json.dumps({"table": "db.t", "from_snapshot": 0, "to_snapshot": first})))
    got = [r for e in delta.endpoints for t in [client.flight.do_get(e.ticket).read_all()] for r in t.to_pylist()]
    assert got == [{"id": 1, "n": 7, "x": None}]
    assert rows(client, "db.t") == [{"id": 1, "n": 7, "x": None}, {"id": 2, "n": 8, "x": None}]
    whole = client.flight.get_schema(flight.FlightDescriptor.for_path(*names.paimon_path("db.t"))).schema
    assert whole.field("n").type == pa.int64()


# -- compaction across schema versions (issue 46 item 4) ------------------------------------------

W0 = pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.string()), ("n", pa.int32()), ("d", pa.string())])
W1 = pa.schema([pa.field("id", pa.int64(), nullable=False), ("label", pa.string()), ("n", pa.int64()),
                ("x", pa.int64())])
W2 = pa.schema([pa.field("id", pa.int64(), nullable=False), ("y", pa.string()), ("label", pa.string()),
                ("n", pa.int64()), ("x", pa.int64())])


def w0(ids) -> pa.RecordBatch:
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array([f"a{i}" for i in ids]), pa.array(ids, pa.int32()),
                            pa.array([f"d{i}" for i in ids])], schema=W0)


def w1(ids) -> pa.RecordBatch:
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array([f"b{i}" for i in ids]),
                            pa.array([i + 2**40 for i in ids], pa.int64()), pa.array([i * 10 for i in ids], pa.int64())],
                           schema=W1)


def w2(ids) -> pa.RecordBatch:
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array([f"y{i}" for i in ids]),
                            pa.array([f"c{i}" for i in ids]), pa.array(ids, pa.int64()),
                            pa.array([-i for i in ids], pa.int64())], schema=W2)


def by_value(got: list[dict]) -> list[dict]:
    return sorted(got, key=lambda r: sorted((k, str(v)) for k, v in r.items()))


def live_schema_ids(warehouse: str, table: str) -> tuple[int, list[int]]:
    """The table's current schema id, and the schema id of each data file its latest snapshot reads
    (their manifest entries' `schema_id`)."""
    from flight_server.paimon import compat

    t = Warehouse(warehouse).catalog.get_table(table)
    latest = t.snapshot_manager().get_latest_snapshot()
    return t.table_schema.id, sorted(e.file.schema_id for e in compat.live_entries(t, latest.id))


def evolve_in_three_versions(client, warehouse: str, table: str) -> list[dict]:
    """Files of schema 0, 1 and 2 (ADD, RENAME, DROP and widen int32 to int64 by the server's
    alter_table, then ADD ... AFTER by pypaimon's), a key of a primary-key table written in each;
    returns every row as the table reads them, rows of an append table in any order."""
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import Move, SchemaChange

    from flight_server.wire import actions as wa

    put(client, table, [w0([1, 2])])
    put(client, table, [w0([3])])
    client.alter_table(table, [wa.SchemaChange.add_column("x", "int64"), wa.SchemaChange.rename_column("s", "label"),
                               wa.SchemaChange.drop_column("d"), wa.SchemaChange.update_column_type("n", "int64")])
    put(client, table, [w1([4, 1])])
    put(client, table, [w1([5])])
    alter(warehouse, table, SchemaChange.add_column("y", AtomicType("STRING"), move=Move.after("y", "id")))
    put(client, table, [w2([6, 2])])
    return rows(client, table)


def expected_rows(keys: list[str]) -> list[dict]:
    def r(i, y, label, n, x):
        return {"id": i, "y": y, "label": label, "n": n, "x": x}

    old = [r(i, None, f"a{i}", i, None) for i in (1, 2, 3)]
    mid = [r(i, None, f"b{i}", i + 2**40, i * 10) for i in (4, 1, 5)]
    new = [r(i, f"y{i}", f"c{i}", i, -i) for i in (6, 2)]
    if not keys:
        return by_value(old + mid + new)
    latest = {row["id"]: row for row in old + mid + new}  # deduplicate: the last write of a key wins
    return by_value(latest.values())


@pytest.mark.parametrize("keys", [[], ["id"]])
def test_compact_rewrites_files_of_every_schema_version_into_the_current_one(client, warehouse, keys):
    options = {"bucket": "1", "write-only": "true", **({} if keys else {"bucket-key": "id"})}
    client.create_table("db.t", W0, primary_keys=keys, options=options)
    before = evolve_in_three_versions(client, warehouse, "db.t")
    assert by_value(before) == expected_rows(keys)
    current, files = live_schema_ids(warehouse, "db.t")
    assert current == 2 and set(files) == {0, 1, 2}, files
    done = client.compact("db.t")
    assert len(done.snapshots) == 1 and done.files_in == len(files) and done.files_out == 1
    assert by_value(rows(client, "db.t")) == expected_rows(keys)
    assert live_schema_ids(warehouse, "db.t") == (2, [2]), "the rewritten file carries the current schema"
    # Paimon reads it as it reads any file (pypaimon's own read agrees with the server's).
    assert by_value(Warehouse(warehouse).read("db.t").to_pylist()) == expected_rows(keys)


@pytest.mark.parametrize("keys", [[], ["id"]])
def test_automatic_maintenance_compacts_files_of_old_schemas_into_the_current_one(warehouse, keys):
    from producers import Client
    from tests.conftest import RunningServer

    running = RunningServer(warehouse, commit_interval_ms=5)
    running.server.maintainer.round_s = 0.05
    running.server.maintainer.settle_s = 0.2
    c = Client(running.uri, timeout=30)
    try:
        options = {"bucket": "1", **({"num-sorted-run.compaction-trigger": "2"} if keys else {"bucket-key": "id"})}
        c.create_table("db.t", W0, primary_keys=keys, options=options)
        evolve_in_three_versions(c, warehouse, "db.t")

        def compacted():
            state = c.stats("db.t").maintenance.get("db.t")
            if state is None:  # no maintenance round yet
                return False
            assert state.last_error is None, state.last_error  # a failed round fails the test at once
            return not state.due and live_schema_ids(warehouse, "db.t")[1] == [2]
        wait_for(compacted, lambda: f"maintenance to leave one current-schema file: {live_schema_ids(warehouse, 'db.t')}",
                 timeout=60)
        assert by_value(rows(c, "db.t")) == expected_rows(keys)
    finally:
        c.close()
        running.stop()


# -- follows across a change (issue 46 item 5) ------------------------------------------------------

V1 = pa.schema([pa.field("id", pa.int64(), nullable=False), ("label", pa.string()), ("x", pa.int64())])


def v1(ids) -> pa.RecordBatch:
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array([f"b{i}" for i in ids]),
                            pa.array([i * 10 for i in ids], pa.int64())], schema=V1)


def add_x_rename_s(client, table: str):
    from flight_server.wire import actions as wa

    return client.alter_table(table, [wa.SchemaChange.add_column("x", "int64"),
                                      wa.SchemaChange.rename_column("s", "label")])


def test_a_follow_that_asks_to_end_at_a_schema_change_ends_typed_naming_the_snapshot_to_resume_at(client):
    from flight_server.wire.errors import SchemaChanged, from_flight
    from tests.paimon_tables import Follower, command, info

    client.create_table("db.t", V0, options={"bucket": "2", "bucket-key": "id"})
    put(client, "db.t", [v0([1, 2, 3, 4])])
    cmd = {"table": "db.t", "follow": True, "start": "earliest", "poll_interval_ms": 50, "on_schema_change": "end"}
    followers = [Follower(client, e) for e in info(client, command(cmd)).endpoints]
    try:
        wait_for(lambda: all(f.done >= 1 for f in followers), "the follow to send snapshot 1")
        add_x_rename_s(client, "db.t")
        changed = put(client, "db.t", [v1([5, 6, 7, 8])])[0].snapshot
        wait_for(lambda: all(f.error is not None for f in followers), "every endpoint to end at the change")
        errors = [from_flight(f.error) for f in followers]
        got = [r for f in followers for _, b in f.take() for r in b.to_pylist()]
    finally:
        for f in followers:
            f.cancel()
    assert all(isinstance(e, SchemaChanged) and e.detail["snapshot"] == changed for e in errors), errors
    assert f"changed its schema: snapshot {changed} was written with schema 1" in errors[0].message
    assert all(f.done == changed - 1 for f in followers), "everything before the change was sent"
    assert sorted(got, key=lambda r: r["id"]) == [{"id": i, "s": f"s{i}"} for i in range(1, 5)]
    # Opened again at that snapshot: the new columns, nothing lost or repeated.
    cmd = {**cmd, "start": f"snapshot:{changed}"}
    followers = [Follower(client, e) for e in info(client, command(cmd)).endpoints]
    try:
        wait_for(lambda: all(f.done >= changed for f in followers), "the follow to send the changed snapshot")
        again = [r for f in followers for _, b in f.take() for r in b.to_pylist()]
    finally:
        for f in followers:
            f.cancel()
    assert sorted(again, key=lambda r: r["id"]) == [{"id": i, "label": f"b{i}", "x": i * 10} for i in range(5, 9)]
    with pytest.raises(pa.ArrowInvalid, match="'on_schema_change' must be one of continue, end"):
        info(client, command({**cmd, "on_schema_change": "stop"}))
    with pytest.raises(pa.ArrowInvalid, match="'on_schema_change' applies only with \"follow\": true"):
        info(client, command({"table": "db.t", "on_schema_change": "end"}))


def test_flight_cli_tail_shows_the_new_columns_after_a_change_and_its_consumer_resumes_exactly(client):
    import subprocess
    import sys

    from tests.conftest import ROOT, child_env

    client.create_table("db.t", V0, options={"bucket": "2", "bucket-key": "id"})
    put(client, "db.t", [v0([1, 2, 3, 4])])

    def tail(limit: int) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, "-m", "flight_cli", "tail", "db.t", "--from", "earliest",
                                 "--consumer-id", "c", "--limit", str(limit), "--format", "jsonl", "--uri",
                                 client.uri], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=child_env(), cwd=ROOT)

    first = tail(10)
    try:
        wait_for(lambda: client.consumer_progress("db.t", "c") == 2 or first.poll() is not None,
                 "tail to print snapshot 1", timeout=60)
        add_x_rename_s(client, "db.t")
        changed = put(client, "db.t", [v1([5, 6, 7, 8])])[0].snapshot
        put(client, "db.t", [v1([9, 10])])
        out, err = first.communicate(timeout=60)
    finally:
        first.kill()
    assert first.returncode == 0, err
    printed = [{k: v for k, v in json.loads(line).items() if k != "_snapshot"} for line in out.splitlines()]
    assert sorted(printed[:4], key=lambda r: r["id"]) == [{"id": i, "s": f"s{i}"} for i in range(1, 5)]
    assert sorted(printed[4:], key=lambda r: r["id"]) == [{"id": i, "label": f"b{i}", "x": i * 10}
                                                          for i in range(5, 11)]
    assert f"changed its schema at snapshot {changed}; reading on from there with its columns: id, label, x" in err
    # The consumer's progress went on across the change (the snapshot --limit stopped in is read
    # again, as after any stop: at least once), and the next tail reads on with the new columns.
    assert client.consumer_progress("db.t", "c") == changed + 1
    put(client, "db.t", [v1([11])])
    second = tail(3)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    assert sorted(({k: v for k, v in json.loads(line).items() if k != "_snapshot"} for line in out.splitlines()),
                  key=lambda r: r["id"]) == [{"id": i, "label": f"b{i}", "x": i * 10} for i in (9, 10, 11)]


def test_a_follow_that_goes_on_across_changes_ends_typed_when_a_column_it_reads_is_widened(client, warehouse):
    """Read in its old type (int32), a widened value (2**40) would come out null: a silently wrong row."""
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import SchemaChange

    from flight_server.wire.errors import from_flight
    from tests.paimon_tables import Follower, command, info

    narrow = pa.schema([pa.field("id", pa.int64(), nullable=False), ("n", pa.int32())])
    client.create_table("db.t", narrow, options={"write-only": "true"})
    put(client, "db.t", [pa.record_batch([pa.array([1], pa.int64()), pa.array([7], pa.int32())], schema=narrow)])
    follower = Follower(client, info(client, command({"table": "db.t", "follow": True, "start": "earliest",
                                                       "poll_interval_ms": 50})).endpoints[0])
    try:
        follower.wait_rows(1)
        alter(warehouse, "db.t", SchemaChange.update_column_type("n", AtomicType("BIGINT")))
        wide = pa.schema([narrow[0], ("n", pa.int64())])
        put(client, "db.t", [pa.record_batch([pa.array([2], pa.int64()), pa.array([2**40], pa.int64())], schema=wide)])
        wait_for(lambda: follower.error is not None, "the follow to end at the widened column's snapshot")
    finally:
        follower.cancel()
    error = from_flight(follower.error)
    assert error.code == "schema_changed" and "snapshot 2" in str(error), error
    assert [r for _, b in follower.take() for r in b.to_pylist()] == [{"id": 1, "n": 7}]  # no null for 2**40
