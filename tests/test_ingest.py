"""Durable ingest: do_put into real pypaimon tables through a real server on a loopback port."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.wire import messages, names
from producers.sink import SinkError

pytestmark = pytest.mark.timeout(120)

SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("batch", pa.int64()), ("name", pa.string())])


def rows(batch_no: int, n: int = 50) -> pa.RecordBatch:
    ids = [batch_no * 1000 + i for i in range(n)]
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array([batch_no] * n, pa.int64()),
                            pa.array([f"r{i}" for i in ids])], schema=SCHEMA)


def read(client, table: str, snapshot: int | None = None) -> pa.Table:
    cmd = {"table": table} if snapshot is None else {"table": table, "snapshot": snapshot}
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(cmd)))
    parts = [client.flight.do_get(e.ticket).read_all() for e in info.endpoints]
    return pa.concat_tables([p.select(SCHEMA.names).cast(SCHEMA) for p in parts]) if parts else SCHEMA.empty_table()


def put_raw(client, descriptor, batches, metadata=None, schema=SCHEMA):
    """A plain Flight do_put; returns the acks in order (what the server answered per batch)."""
    writer, reader = client.flight.do_put(descriptor, schema)
    for i, b in enumerate(batches):
        meta = metadata(i) if metadata else None
        if meta is None:
            writer.write_batch(b)
        else:
            writer.write_with_metadata(b, pa.py_buffer(meta))
    writer.write_metadata(pa.py_buffer(messages.end(len(batches))))
    writer.done_writing()
    acks = []
    while (buf := reader.read()) is not None:
        acks.append(messages.read_ack(buf))
    writer.close()
    return acks


@pytest.mark.parametrize("keys,options", [
    ([], {}),                                          # append, bucket -1 (unaware)
    ([], {"bucket": "3", "bucket-key": "id"}),         # append, fixed buckets
    (["id"], {"bucket": "2"}),                         # primary key, fixed buckets
    (["id"], {}),                                      # primary key, dynamic buckets (-1)
])
def test_every_acked_batch_is_in_the_snapshot_its_ack_names(client, keys, options):
    client.create_table("db.t", SCHEMA, primary_keys=keys, options=options)
    acks = put_raw(client, flight.FlightDescriptor.for_path(*names.paimon_path("db.t")), [rows(b) for b in range(6)])
    assert [a.seq for a in acks] == list(range(6))
    for ack in acks:
        assert ack.snapshot is not None
        at = set(read(client, "db.t", ack.snapshot).column("batch").to_pylist())
        before = set(read(client, "db.t", ack.snapshot - 1).column("batch").to_pylist()) if ack.snapshot > 1 else set()
        assert ack.seq in at, f"batch {ack.seq} is not in snapshot {ack.snapshot}"
        assert ack.seq not in before, f"batch {ack.seq} was already in snapshot {ack.snapshot - 1}"
    table = read(client, "db.t")
    assert sorted(table.column("id").to_pylist()) == sorted(i for b in range(6) for i in rows(b).column(0).to_pylist())


def test_close_returns_after_the_last_ack_and_the_rows_are_there(client):
    client.create_table("db.t", SCHEMA, partition_keys=["batch"])
    with client.paimon_sink("db.t") as sink:
        for b in range(10):
            sink.write(rows(b))
    assert sink.acked == 10 and sink.last_snapshot is not None
    got = read(client, "db.t", sink.last_snapshot)
    assert got.num_rows == 500 and sorted(set(got.column("batch").to_pylist())) == list(range(10))


def test_group_commit_puts_concurrent_producers_into_shared_snapshots(server, client):
    client.create_table("db.t", SCHEMA, options={"write-only": "true"})  # every snapshot a group commit
    sinks = [client.paimon_sink("db.t", producer=f"p{i}") for i in range(4)]
    for b in range(5):
        for i, sink in enumerate(sinks):
            sink.write(rows(i * 100 + b))
    for sink in sinks:
        sink.close()
    table = read(client, "db.t")
    assert table.num_rows == 4 * 5 * 50
    latest = client.action(names.LATEST_SNAPSHOT, {"table": "db.t"})["snapshot_id"]
    assert latest < 20, f"{latest} snapshots for 20 batches: the committer did not group them"
    assert [client.producer_state("db.t", f"p{i}") for i in range(4)] == [4, 4, 4, 4]
    writes = client.stats("db.t").paimon_writes["db.t"]
    assert writes.commits == latest and writes.last_snapshot == latest and writes.queued_batches == 0
    assert writes.named_producers_writing == [] and client.stats().paimon_writes.keys() == {"db.t"}


def test_a_named_producer_resumes_and_a_resent_batch_is_not_written_twice(client):
    client.create_table("db.t", SCHEMA)
    assert client.producer_state("db.t", "p1") is None
    with client.paimon_sink("db.t", producer="p1") as sink:
        for b in range(3):
            sink.write(rows(b))
    assert sink.last_seq == 2 and client.producer_state("db.t", "p1") == 2
    # A producer that lost its acks resends 1..4: 1 and 2 are acked without being written.
    desc = flight.FlightDescriptor.for_command(json.dumps(names.write_command("db.t", "p1")))
    acks = put_raw(client, desc, [rows(b) for b in (1, 2, 3, 4)], metadata=lambda i: messages.batch_seq(i + 1))
    assert [a.seq for a in acks] == [1, 2, 3, 4]
    assert acks[0].snapshot == acks[1].snapshot == sink.last_snapshot
    ids = read(client, "db.t").column("id").to_pylist()
    assert len(ids) == len(set(ids)) == 5 * 50
    resumed = client.paimon_sink("db.t", producer="p1")
    assert resumed.last_seq == 4
    resumed.write(rows(5))
    resumed.close()
    assert client.producer_state("db.t", "p1") == 5


def test_the_producer_map_survives_a_server_restart(warehouse):
    from producers import Client
    from tests.conftest import RunningServer

    first = RunningServer(warehouse)
    c = Client(first.uri, timeout=10)
    c.create_table("db.t", SCHEMA)
    with c.paimon_sink("db.t", producer="a") as a, c.paimon_sink("db.t", producer="b") as b:
        a.write(rows(1), seq=10)
        b.write(rows(2), seq=7)
    with c.paimon_sink("db.t", producer="a") as a:
        a.write(rows(3))
    first.stop()
    second = RunningServer(warehouse)
    try:
        c2 = Client(second.uri, timeout=10)
        assert (c2.producer_state("db.t", "a"), c2.producer_state("db.t", "b")) == (11, 7)
    finally:
        second.stop()


class CancellingServer:
    """A real server whose next `cancel` do_put streams end CANCELLED after `after` batches, as a
    gRPC server that is shutting down cancels the calls it still holds."""

    def __new__(cls, *args, cancel: list, after: int, **kwargs):
        from flight_server.server import FlightPaimonServer

        class Server(FlightPaimonServer):
            def do_put(self, context, descriptor, reader, writer):
                if not cancel:
                    return super().do_put(context, descriptor, reader, writer)
                cancel.pop()
                return super().do_put(context, descriptor, _CancelledAfter(reader, after), writer)

        return Server(*args, **kwargs)


class _CancelledAfter:
    def __init__(self, reader, after: int):
        self._reader, self._left, self.schema = reader, after, reader.schema

    def read_chunk(self):
        if self._left == 0:
            raise flight.FlightCancelledError("Cancelled on the server side (the server is shutting down)")
        self._left -= 1
        return self._reader.read_chunk()


@pytest.mark.parametrize("producer", ["p1", None])
def test_a_stream_the_server_cancels_is_resent_by_a_named_producer_and_an_error_for_an_unnamed_one(warehouse, producer):
    from producers import Client
    from tests.conftest import RunningServer

    cancel = ["once"]
    running = RunningServer(warehouse, server_class=lambda *a, **k: CancellingServer(*a, cancel=cancel, after=3, **k))
    try:
        client = Client(running.uri, timeout=10)
        client.create_table("db.t", SCHEMA)
        sink = client.paimon_sink("db.t", producer=producer, reconnect_timeout=10)
        if producer is None:
            with pytest.raises(SinkError, match="connection to the server broke.*unnamed producer"):
                for b in range(10):
                    sink.write(rows(b))
                sink.close()
            assert not cancel, "the server did not cancel the stream"
            return
        for b in range(10):
            sink.write(rows(b))
        sink.close()
        assert not cancel and sink.reconnects >= 1
        ids = read(client, "db.t").column("id").to_pylist()
        assert sorted(ids) == [b * 1000 + i for b in range(10) for i in range(50)]
        assert client.producer_state("db.t", "p1") == 9
    finally:
        running.stop()


def test_named_producer_batches_must_carry_increasing_seqs(warehouse):
    from producers import Client
    from tests.conftest import RunningServer

    # A commit interval no run reaches: batch seq 5 cannot be committed (and acked: it is valid on
    # its own) before seq 3 arrives, however slow the machine; the refused stream commits nothing.
    running = RunningServer(warehouse, commit_interval_ms=600_000)
    try:
        client = Client(running.uri, timeout=30)
        client.create_table("db.t", SCHEMA)
        desc = flight.FlightDescriptor.for_command(json.dumps(names.write_command("db.t", "p1")))
        with pytest.raises(pa.ArrowInvalid, match=r"without its app_metadata \{\"seq\": N\}"):
            put_raw(client, desc, [rows(0)])
        with pytest.raises(pa.ArrowInvalid, match="seq 3 after 5"):
            put_raw(client, desc, [rows(0), rows(1)], metadata=lambda i: messages.batch_seq([5, 3][i]))
        assert client.action(names.LATEST_SNAPSHOT, {"table": "db.t"})["snapshot_id"] is None
    finally:
        running.stop()


def test_a_mismatched_schema_is_refused_naming_the_column_and_nothing_is_written(client):
    client.create_table("db.t", SCHEMA)
    wrong = pa.schema([("id", pa.int64()), ("batch", pa.string()), ("name", pa.string())])
    batch = pa.record_batch([pa.array([1], pa.int64()), pa.array(["1"]), pa.array(["x"])], schema=wrong)
    with pytest.raises(pa.ArrowInvalid, match="column 'batch' has type string, expected int64"):
        put_raw(client, flight.FlightDescriptor.for_path("paimon", "db.t"), [batch], schema=wrong)
    with pytest.raises(ValueError, match="column 'batch' has type string"):
        with client.paimon_sink("db.t") as sink:  # the `with` ends the stream: no idle do_put left open
            sink.write(batch)
    assert client.action(names.LATEST_SNAPSHOT, {"table": "db.t"})["snapshot_id"] is None


def test_a_null_in_a_not_null_key_refuses_the_batch_and_nothing_of_it_is_written(client):
    client.create_table("db.t", SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    loose = pa.schema([("id", pa.int64()), ("batch", pa.int64()), ("name", pa.string())])
    good = pa.record_batch([pa.array([1, 2], pa.int64()), pa.array([0, 0], pa.int64()), pa.array(["a", "b"])], schema=loose)
    assert [a.seq for a in put_raw(client, flight.FlightDescriptor.for_path("paimon", "db.t"), [good], schema=loose)] == [0]
    bad = pa.record_batch([pa.array([3, None], pa.int64()), pa.array([1, 1], pa.int64()), pa.array(["c", "d"])], schema=loose)
    with pytest.raises(SinkError, match="1 null\\(s\\) in column 'id', which is NOT NULL"):
        with client.paimon_sink("db.t") as sink:
            sink.write(bad)
    assert sorted(read(client, "db.t").column("id").to_pylist()) == [1, 2]


def test_an_unknown_table_is_not_found(client):
    with pytest.raises(KeyError, match="Paimon table 'db.nope' does not exist"):  # NOT_FOUND
        put_raw(client, flight.FlightDescriptor.for_path("paimon", "db.nope"), [rows(0)])
    with pytest.raises(pa.ArrowInvalid, match="is not 'DB.TABLE'"):
        put_raw(client, flight.FlightDescriptor.for_command(b'{"write": "nodot"}'), [rows(0)])


def test_a_failed_commit_reaches_the_producer_with_its_cause_and_nothing_unacked_is_committed(client, warehouse):
    import os
    import shutil

    client.create_table("db.t", SCHEMA)
    with client.paimon_sink("db.t", producer="p") as sink:
        sink.write(rows(0))
    manifest = os.path.join(warehouse, "db.db", "t", "manifest")
    saved = manifest + ".saved"
    shutil.move(manifest, saved)
    open(manifest, "w").close()  # a file where the commit writes its manifests: every commit fails
    try:
        sink = client.paimon_sink("db.t", producer="p")
        with pytest.raises(SinkError, match="group commit into Paimon table 'db.t' failed: .*manifest"):
            sink.write(rows(1))
            sink.close()
        assert sink.last_seq == 0 and sink.acked == 0
    finally:
        os.remove(manifest)
        shutil.move(saved, manifest)
    assert client.producer_state("db.t", "p") == 0
    assert sorted(set(read(client, "db.t").column("batch").to_pylist())) == [0]
    with client.paimon_sink("db.t", producer="p") as again:  # the table works again once the cause is gone
        again.write(rows(1))
    assert sorted(set(read(client, "db.t").column("batch").to_pylist())) == [0, 1]


def test_create_table_errors_name_what_to_fix(client):
    with pytest.raises(pa.ArrowInvalid, match="primary_keys column 'nope' is not in the schema"):
        client.create_table("db.t", SCHEMA, primary_keys=["nope"])
    with pytest.raises(pa.ArrowInvalid, match="needs option 'bucket-key'"):
        client.create_table("db.t", SCHEMA, options={"bucket": "4"})
    client.create_table("db.t", SCHEMA)
    with pytest.raises(flight.FlightServerError, match="Paimon table 'db.t' already exists"):
        client.create_table("db.t", SCHEMA)


def test_a_half_close_without_the_end_marker_discards_the_unacked_batches(warehouse):
    from producers import Client
    from tests.conftest import RunningServer

    running = RunningServer(warehouse, commit_interval_ms=60_000)  # after a commit, the next waits a minute
    try:
        client = Client(running.uri, timeout=10)
        client.create_table("db.t", SCHEMA)
        with client.paimon_sink("db.t") as sink:
            sink.write(rows(0))  # committed at once (nothing was committed before), then the clock runs
        writer, reader = client.flight.do_put(flight.FlightDescriptor.for_path("paimon", "db.t"), SCHEMA)
        writer.write_batch(rows(1))  # queued behind the interval
        writer.done_writing()
        with pytest.raises(flight.FlightServerError, match="half-closed after 1 batch\\(es\\) without its end marker"):
            while reader.read() is not None:
                pass
            writer.close()
        assert sorted(set(read(client, "db.t").column("batch").to_pylist())) == [0]
    finally:
        running.stop()


def test_producer_state_on_another_server_follows_the_writes_of_the_first(server, client, warehouse):
    from producers import Client
    from tests.conftest import RunningServer

    client.create_table("db.t", SCHEMA)
    other = RunningServer(warehouse)
    try:
        reader = Client(other.uri, timeout=10)
        assert reader.producer_state("db.t", "p") is None
        with client.paimon_sink("db.t", producer="p") as sink:
            sink.write(rows(0))
        assert reader.producer_state("db.t", "p") == 0
        with client.paimon_sink("db.t", producer="p") as sink:
            sink.write(rows(1))
        assert reader.producer_state("db.t", "p") == 1
    finally:
        other.stop()


def test_a_second_stream_of_a_producer_fences_the_first_and_nothing_is_written_twice(warehouse):
    from producers import Client
    from tests.conftest import RunningServer, wait_for

    running = RunningServer(warehouse, commit_interval_ms=1000)
    try:
        client = Client(running.uri, timeout=10)
        client.create_table("db.t", SCHEMA)
        with client.paimon_sink("db.t", producer="p") as first:
            first.write(rows(0))  # committed at once; the next commit waits out the interval
        desc = flight.FlightDescriptor.for_command(json.dumps(names.write_command("db.t", "p")))
        old_writer, old_acks = client.flight.do_put(desc, SCHEMA)
        for seq in (1, 2):
            old_writer.write_with_metadata(rows(seq), pa.py_buffer(messages.batch_seq(seq)))

        def old_stream_received():  # gRPC starts a call lazily: the old stream must reach the server first
            w = client.stats("db.t").paimon_writes["db.t"]
            return w.commits > 1 or w.queued_batches + w.written_batches + w.in_commit_batches == 2

        wait_for(old_stream_received, "the old stream's two batches at the server")
        # The producer "restarts" while the server still holds batches 1 and 2 of its first stream,
        # uncommitted, and resends them: the new stream waits for them to land (or to be dropped,
        # if they were still queued), so each batch is written once.
        acks = put_raw(client, desc, [rows(seq) for seq in (1, 2, 3)], metadata=lambda i: messages.batch_seq(i + 1))
        assert [a.seq for a in acks] == [1, 2, 3]
        with pytest.raises(flight.FlightServerError, match="A newer stream of producer 'p' .* took over"):
            old_writer.done_writing()
            while old_acks.read() is not None:
                pass
            old_writer.close()
        batches = read(client, "db.t").column("batch").to_pylist()
        assert sorted(set(batches)) == [0, 1, 2, 3] and len(batches) == 4 * 50
        assert client.producer_state("db.t", "p") == 3
    finally:
        running.stop()


@pytest.mark.parametrize("keys,options,partitions,merged_bytes", [
    ([], {}, None, None),                    # append, bucket -1
    (["id"], {"bucket": "2"}, None, None),   # primary key, fixed buckets
    ([], {}, ["batch"], None),               # append, a partition per commit
    ([], {"write-only": "true"}, None, 4096),  # merged files fill up: later merges leave them be (no
                                               # compaction, whose commits cancel entries: every file stays live)
])
def test_many_small_commits_keep_few_manifests_and_every_snapshot_reads_whole(warehouse, monkeypatch, keys,
                                                                              options, partitions, merged_bytes):
    """pypaimon leaves manifest merging to external maintenance: without our merge each commit's
    base manifest list grew by one and every commit got slower (the soak's RSS climb)."""
    from flight_server.paimon import compat
    from producers import Client
    from tests.conftest import RunningServer

    if merged_bytes:
        monkeypatch.setattr(compat.manifests, "MERGED_MANIFEST_BYTES", merged_bytes)
    running = RunningServer(warehouse, commit_interval_ms=5)  # a commit per batch, without waiting 100 ms
    client = Client(running.uri, timeout=10)
    try:
        _many_small_commits(client, warehouse, keys, options, partitions, merged_bytes)
    finally:
        client.close()
        running.stop()


def _many_small_commits(client, warehouse, keys, options, partitions, merged_bytes):
    from pypaimon.manifest.manifest_list_manager import ManifestListManager

    from flight_server.paimon import compat
    from tests.paimon_tables import Follower, Warehouse, command

    client.create_table("db.t", SCHEMA, primary_keys=keys, options=options, partition_keys=partitions)
    follow = client.flight.get_flight_info(command({"table": "db.t", "follow": True, "start": "earliest"}))
    followers = [Follower(client, ep) for ep in follow.endpoints]
    commits = (3 if merged_bytes else 2) * compat.MANIFEST_MERGE_MIN_COUNT + 10
    descriptor = flight.FlightDescriptor.for_path(*names.paimon_path("db.t"))
    acks = [put_raw(client, descriptor, [rows(b, 20)])[0] for b in range(commits)]  # a snapshot each
    assert len({a.snapshot for a in acks}) == commits

    table = Warehouse(warehouse).catalog.get_table("db.t")
    latest = table.snapshot_manager().get_latest_snapshot()
    manifests = ManifestListManager(table).read_all(latest)
    assert len(manifests) <= compat.MANIFEST_MERGE_MIN_COUNT, f"{len(manifests)} manifests after {commits} commits"
    if merged_bytes:  # a merged file that filled up is left alone by the merges after it
        full = set()
        for ack in acks:
            snapshot = table.snapshot_manager().get_snapshot_by_id(ack.snapshot)
            full = {m.file_name for m in ManifestListManager(table).read_all(snapshot) if m.file_size >= merged_bytes}
            if full:
                break
        assert full and ack is not acks[-1], "merges filled a manifest before the last commit"
        assert full <= {m.file_name for m in manifests}, "a full manifest is never merged again"
    expected = lambda upto: sorted(i for b in range(upto) for i in rows(b, 20).column(0).to_pylist())  # noqa: E731
    assert sorted(read(client, "db.t").column("id").to_pylist()) == expected(commits)
    for b in (0, compat.MANIFEST_MERGE_MIN_COUNT - 1, compat.MANIFEST_MERGE_MIN_COUNT, commits - 2):
        assert sorted(read(client, "db.t", acks[b].snapshot).column("id").to_pylist()) == expected(b + 1)
    got = []
    for f in followers:  # each endpoint's bucket; together every row once
        f.drain_until_done(acks[-1].snapshot)
        f.cancel()
        got += [i for _, batch in f.received for i in batch.column("id").to_pylist()]
    assert sorted(got) == expected(commits)


def test_writer_threads_share_an_append_table_and_every_commit_holds_a_prefix_of_each_producer(warehouse):
    """Three writer threads encode one append table's batches at once (the committer coalesces the
    small batches); each commit still holds, of every producer, exactly its batches up to the seq
    the snapshot records, and each batch once."""
    import threading

    from flight_server.ingest.seqs import PROPERTY
    from producers import Client
    from tests.conftest import RunningServer

    running = RunningServer(warehouse, write_threads=3, commit_interval_ms=20)
    try:
        client = Client(running.uri, timeout=30)
        client.create_table("db.t", SCHEMA)
        client.create_table("db.k", SCHEMA, primary_keys=["id"], options={"bucket": "2"})
        errors = []

        def produce(i):
            try:
                with client.paimon_sink("db.t", producer=f"p{i}") as sink:
                    for b in range(150):
                        sink.write(rows(i * 1000 + b, n=20))
            except BaseException as e:  # noqa: BLE001 - reported below
                errors.append(e)

        threads = [threading.Thread(target=produce, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(90)
        assert not errors, errors
        writes = client.stats("db.t").paimon_writes["db.t"]
        assert writes.writers == 3
        assert sum(1 for cpu in writes.write_cpu_s if cpu > 0) >= 2, writes.write_cpu_s
        latest = client.action(names.LATEST_SNAPSHOT, {"table": "db.t"})["snapshot_id"]
        assert latest > 2, "one commit: the test did not see commits between writes"

        from pypaimon import CatalogFactory

        snapshots = CatalogFactory.create({"warehouse": warehouse}).get_table("db.t").snapshot_manager()
        appends = [s for s in map(snapshots.get_snapshot_by_id, range(1, latest + 1)) if s.commit_kind == "APPEND"]
        assert len(appends) > 2, "one commit: the test did not see commits between writes"
        for snapshot in appends:  # (a compaction may commit between them: it holds the same rows)
            sid, recorded = snapshot.id, json.loads(snapshot.properties[PROPERTY])
            held = read(client, "db.t", sid).column("batch").to_pylist()
            for i in range(4):
                mine = sorted({b - i * 1000 for b in held if i * 1000 <= b < i * 1000 + 1000})
                last = recorded.get(f"p{i}")
                assert mine == list(range(0 if last is None else last + 1)), (sid, i, last, mine[-3:])
        final = read(client, "db.t").column("id").to_pylist()
        assert len(final) == len(set(final)) == 4 * 150 * 20
        with client.paimon_sink("db.k") as sink:  # rows go to buckets: one writer, as Java Paimon's
            sink.write(rows(1))
        assert client.stats("db.k").paimon_writes["db.k"].writers == 1
    finally:
        running.stop()


def test_a_sink_keeps_at_most_its_byte_window_unacked(warehouse):
    import threading

    from producers import Client
    from tests.conftest import RunningServer, wait_for

    running = RunningServer(warehouse, commit_interval_ms=3000)
    try:
        client = Client(running.uri, timeout=30)
        client.create_table("db.t", SCHEMA)
        size = rows(0).nbytes
        sink = client.paimon_sink("db.t", producer="p", max_unacked_bytes=int(2.5 * size))
        sink.write(rows(0))
        wait_for(lambda: sink.acked == 1, "the first batch's commit, at once")  # the next waits out 3 s
        writer = threading.Thread(target=lambda: [sink.write(rows(b)) for b in range(1, 7)])
        writer.start()
        def held():
            writes = client.stats("db.t").paimon_writes["db.t"]
            return writes.queued_batches + writes.written_batches

        wait_for(lambda: held() == 2, "two batches held by the server until the next commit")
        batches, nbytes = sink.unacked
        assert batches == 2 and 2 * size <= nbytes <= sink.max_unacked_bytes and sink.acked == 1
        writer.join(30)
        sink.close()
        assert sink.acked == 7 and sink.unacked == (0, 0)
        with pytest.raises(ValueError, match="max_unacked_bytes"):
            client.paimon_sink("db.t", max_unacked_bytes=0)
    finally:
        running.stop()
