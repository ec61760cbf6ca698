"""Table maintenance on real servers and real pypaimon tables: compaction and snapshot expiry keep a
durable table's files and snapshots bounded, readers see every row exactly once, and nothing a
kept snapshot, tag or consumer needs is ever deleted."""

from __future__ import annotations

import collections
import os

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.wire import names
from flight_server.wire.actions import MaintenanceStats
from producers import Client
from tests.conftest import RunningServer, wait_for
from tests.paimon_tables import Follower, Warehouse, command, read_all, rows
from tests.test_ingest import SCHEMA as INGEST_SCHEMA
from tests.test_ingest import put_raw
from tests.test_ingest import rows as ingest_rows

pytestmark = pytest.mark.timeout(180)

OPTIONS = {"bucket": "2", "bucket-key": "id"}


def batch_rows(b: int, n: int = 20) -> pa.RecordBatch:
    return ingest_rows(b, n)


@pytest.fixture
def fast(warehouse):
    """A server committing every 5 ms (a snapshot per batch) with maintenance rounds every 50 ms,
    settling a table quiet for 200 ms."""
    running = RunningServer(warehouse, commit_interval_ms=5)
    running.server.maintainer.round_s = 0.05
    running.server.maintainer.settle_s = 0.2
    client = Client(running.uri, timeout=30)
    yield running, client
    client.close()
    running.stop()


def ingest(client, table: str, batches: range) -> list:
    descriptor = flight.FlightDescriptor.for_path(*names.paimon_path(table))
    return [put_raw(client, descriptor, [batch_rows(b)])[0] for b in batches]


def table_of(warehouse: str, name: str):
    return Warehouse(warehouse).catalog.get_table(name)


def live_files(table, snapshot_id: int | None = None) -> list:
    t = table if snapshot_id is None else table.copy({"scan.snapshot-id": str(snapshot_id)})
    return t.new_read_builder().new_scan().file_scanner.plan_files()


def maintenance(client, table: str) -> MaintenanceStats | None:
    return client.stats(table).maintenance.get(table)


def settled(client, table: str) -> bool:
    """Maintenance has run since the table's last commit and has nothing more to do."""
    state = maintenance(client, table)
    return state is not None and not state.due


def data_files_on_disk(warehouse: str, table: str) -> set[str]:
    db, name = table.split(".")
    root = os.path.join(warehouse, f"{db}.db", name)
    return {f for _, _, files in os.walk(root) for f in files if f.startswith("data-")}


def test_durable_ingest_keeps_an_append_table_compacted_and_readers_see_each_row_once(fast, warehouse):
    running, client = fast
    client.create_table("db.t", INGEST_SCHEMA, options=OPTIONS)
    follow = client.flight.get_flight_info(command({"table": "db.t", "follow": True, "start": "earliest",
                                                    "poll_interval_ms": 20}))
    followers = [Follower(client, ep) for ep in follow.endpoints]
    acks = ingest(client, "db.t", range(60))
    last = max(a.snapshot for a in acks)
    wait_for(lambda: settled(client, "db.t"), "maintenance after the last commit", timeout=60)
    table = table_of(warehouse, "db.t")
    kinds = collections.Counter(table.snapshot_manager().get_snapshot_by_id(i).commit_kind
                                for i in range(1, table.snapshot_manager().get_latest_snapshot().id + 1))
    assert kinds["APPEND"] == 60 and kinds["COMPACT"] >= 1
    assert len(live_files(table)) < 10, "a bucket keeps fewer than compaction.min.file-num small files"
    expected = sorted(i for b in range(60) for i in batch_rows(b).column("id").to_pylist())
    _, whole = read_all(client, command({"table": "db.t"}))
    assert sorted(whole.column("id").to_pylist()) == expected
    latest = table.snapshot_manager().get_latest_snapshot().id
    _, delta = read_all(client, command({"table": "db.t", "from_snapshot": 0, "to_snapshot": latest}))
    assert sorted(delta.column("id").to_pylist()) == expected, "a delta over COMPACT snapshots reads each row once"
    _, then = read_all(client, command({"table": "db.t", "snapshot": acks[29].snapshot}))
    assert sorted(then.column("id").to_pylist()) == sorted(i for b in range(30) for i in batch_rows(b).column("id").to_pylist())
    got = []
    for f in followers:
        f.drain_until_done(latest)
        f.cancel()
        got += [i for _, batch in f.received for i in batch.column("id").to_pylist()]
    assert sorted(got) == expected, "a follow skips COMPACT snapshots: every row exactly once"
    assert last < latest


def test_expiry_keeps_num_retained_and_deletes_only_what_no_kept_snapshot_reads(fast, warehouse):
    running, client = fast
    client.create_table("db.t", INGEST_SCHEMA, options={
        **OPTIONS, "snapshot.num-retained.min": "2", "snapshot.num-retained.max": "5", "compaction.min.file-num": "3"})
    ingest(client, "db.t", range(40))
    table = table_of(warehouse, "db.t")
    manager = table.snapshot_manager()

    wait_for(lambda: settled(client, "db.t"), "maintenance after the last commit", timeout=60)
    assert maintenance(client, "db.t").snapshots <= 5
    latest = manager.get_latest_snapshot().id
    earliest = latest - maintenance(client, "db.t").snapshots + 1
    assert manager.get_snapshot_by_id(earliest - 1) is None
    on_disk = data_files_on_disk(warehouse, "db.t")
    needed = set()
    expected = sorted(i for b in range(40) for i in batch_rows(b).column("id").to_pylist())
    for sid in range(earliest, latest + 1):  # every kept snapshot reads whole: none of its files was deleted
        files = {e.file.file_name for e in live_files(table, sid)}
        assert files <= on_disk, f"snapshot {sid} names deleted files {sorted(files - on_disk)[:3]}"
        needed |= files
        data = Warehouse(warehouse).read("db.t", sid)
        if manager.get_snapshot_by_id(sid).total_record_count == 800:
            assert sorted(data.column("id").to_pylist()) == expected
    assert on_disk == needed, f"{len(on_disk - needed)} data files no kept snapshot reads were left"
    state = maintenance(client, "db.t")
    assert state.files_deleted > 0 and state.last_expiry.done.first_kept <= earliest


def test_a_consumer_keeps_its_snapshots_until_it_expires(fast, warehouse):
    running, client = fast
    client.create_table("db.t", INGEST_SCHEMA, options={
        **OPTIONS, "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "3",
        "consumer.expiration-time": "1 h"})
    first = ingest(client, "db.t", range(1))  # the consumer commits before anything can expire
    client.action(names.CONSUMER_COMMIT, {"table": "db.t", "consumer_id": "slow",
                                          "next_snapshot": first[0].snapshot + 1})
    acks = first + ingest(client, "db.t", range(1, 30))
    manager = table_of(warehouse, "db.t").snapshot_manager()
    wait_for(lambda: settled(client, "db.t"), "maintenance after the last commit", timeout=60)
    assert maintenance(client, "db.t").expiries > 0
    assert manager.get_snapshot_by_id(acks[1].snapshot) is not None, "the consumer's next snapshot was expired"
    _, still = read_all(client, command({"table": "db.t", "snapshot": acks[1].snapshot}))
    assert still.num_rows == 40
    client.action(names.CONSUMER_COMMIT, {"table": "db.t", "consumer_id": "slow",
                                          "next_snapshot": manager.get_latest_snapshot().id})
    result = client.action(names.EXPIRE_SNAPSHOTS, {"table": "db.t"})
    assert result["expired"] > 0 and manager.get_snapshot_by_id(acks[1].snapshot) is None
    # A consumer not written to for consumer.expiration-time is removed, as Paimon's committer does.
    old = manager.get_latest_snapshot().id
    client.action(names.CONSUMER_COMMIT, {"table": "db.t", "consumer_id": "gone", "next_snapshot": old})
    consumer_file = os.path.join(warehouse, "db.db", "t", "consumer", "consumer-gone")
    os.utime(consumer_file, (1, 1))  # last written in 1970
    ingest(client, "db.t", range(30, 40))
    wait_for(lambda: not os.path.exists(consumer_file), "the stale consumer's removal", timeout=60)
    assert os.path.exists(os.path.join(warehouse, "db.db", "t", "consumer", "consumer-slow"))
    client.action(names.CONSUMER_COMMIT, {"table": "db.t", "consumer_id": "slow",
                                          "next_snapshot": manager.get_latest_snapshot().id + 1})
    client.action(names.EXPIRE_SNAPSHOTS, {"table": "db.t"})
    assert manager.get_snapshot_by_id(old) is None


def test_a_tag_keeps_its_files_through_compaction_and_expiry(fast, warehouse):
    running, client = fast
    client.create_table("db.t", INGEST_SCHEMA, options={
        **OPTIONS, "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2", "write-only": "true"})
    acks = ingest(client, "db.t", range(10))
    table = table_of(warehouse, "db.t")
    table.create_tag("at10", snapshot_id=acks[-1].snapshot)
    ingest(client, "db.t", range(10, 20))
    assert getattr(maintenance(client, "db.t"), "compactions", 0) == 0, "write-only: the writer maintains nothing"
    client.action(names.COMPACT, {"table": "db.t"})
    ingest(client, "db.t", range(20, 25))
    result = client.action(names.EXPIRE_SNAPSHOTS, {"table": "db.t"})
    assert result["expired"] >= 20 and result["files_deleted"] > 0
    tagged = table.copy({"scan.tag-name": "at10"})
    rb = tagged.new_read_builder()
    data = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    assert sorted(data.column("id").to_pylist()) == sorted(i for b in range(10) for i in batch_rows(b).column("id").to_pylist())


def test_compact_and_expire_by_hand_on_a_table_written_by_pypaimon(client, warehouse):
    wh = Warehouse(warehouse)
    t = wh.create("logs", buckets=-1, partition_keys=["region"])
    for i in range(12):
        wh.commit(t, rows(i * 10, 10))
    before = sorted(wh.read(t).column("id").to_pylist())
    result = client.action(names.COMPACT, {"table": t, "partition": {"region": "eu"}})
    assert result["files_in"] == 12 and result["files_out"] == 1 and len(result["snapshots"]) == 1
    result = client.action(names.COMPACT, {"table": t})
    assert result["files_in"] == 24 and len(result["snapshots"]) == 2
    assert sorted(wh.read(t).column("id").to_pylist()) == before
    with pytest.raises(pa.ArrowInvalid, match="retain_max 1 is below retain_min 10"):
        client.action(names.EXPIRE_SNAPSHOTS, {"table": t, "retain_max": 1})
    result = client.action(names.EXPIRE_SNAPSHOTS, {"table": t, "retain_max": 1, "retain_min": 1})
    assert result == {"expired": 14, "first_kept": 15, "files_deleted": result["files_deleted"], "consumers_removed": []}
    assert sorted(wh.read(t).column("id").to_pylist()) == before
    assert len(data_files_on_disk(warehouse, t)) == 3
    with pytest.raises(pa.ArrowInvalid, match="retain_max"):
        client.action(names.EXPIRE_SNAPSHOTS, {"table": t, "retain_max": 0})
    with pytest.raises(pa.ArrowInvalid, match="takes no key"):
        client.action(names.COMPACT, {"table": t, "full": True})


def test_flight_cli_compact_and_expire_snapshots(server, warehouse):
    import json
    import subprocess
    import sys

    from tests.conftest import ROOT, child_env

    wh = Warehouse(warehouse)
    t = wh.create("events", buckets=1)
    for i in range(6):
        wh.commit(t, rows(i * 10, 10))

    def cli(*args) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "flight_cli", *args, "--uri", server.uri],
                              capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=60)

    done = cli("compact", f"paimon:{t}")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["files_in"] == 6
    done = cli("expire-snapshots", t, "--retain-max", "2", "--retain-min", "1", "--older-than", "2000-01-01 00:00:00")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["expired"] == 5, "past retain-max goes, whatever its age"
    done = cli("expire-snapshots", t, "--retain-min", "1", "--older-than", "2099-01-01T00:00:00Z")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["expired"] == 1
    bad = cli("expire-snapshots", t, "--older-than", "yesterday")
    assert bad.returncode == 2 and "--older-than 'yesterday' is not epoch ms" in bad.stderr, bad.stderr
    assert "Traceback" not in bad.stderr
    bad = cli("compact", "push:orders")
    assert bad.returncode == 2 and "need no maintenance" in bad.stderr and "Traceback" not in bad.stderr
    assert sorted(wh.read(t).column("id").to_pylist()) == list(range(60))


def test_a_read_pinned_to_a_snapshot_that_expires_fails_naming_it(client, warehouse):
    wh = Warehouse(warehouse)
    t = wh.create("orders", buckets=1)
    for i in range(6):
        wh.commit(t, rows(i * 10, 10))
    at3 = client.flight.get_flight_info(command({"table": t, "snapshot": 3}), client.options())
    delta = client.flight.get_flight_info(command({"table": t, "from_snapshot": 1, "to_snapshot": 4}), client.options())
    client.action(names.COMPACT, {"table": t})
    client.action(names.EXPIRE_SNAPSHOTS, {"table": t, "retain_max": 1, "retain_min": 1})
    for fi, gone in ((at3, 3), (delta, 2)):
        with pytest.raises(KeyError, match=f"Snapshot {gone} of Paimon table 'db.orders' expired while it was read"):
            client.flight.do_get(fi.endpoints[0].ticket, client.options()).read_all()


def test_two_servers_ingesting_and_maintaining_one_table_lose_and_double_nothing(warehouse):
    """Both servers commit into one table and both compact and expire it: Paimon's optimistic commit
    lets only one of two conflicting compactions land, and expiry deletes no file a kept snapshot reads."""
    from producers.examples.events import SCHEMA as EVENTS
    from producers.examples.events import batch

    servers = [RunningServer(warehouse, commit_interval_ms=5) for _ in range(2)]
    for s in servers:
        s.server.maintainer.round_s = 0.02
    clients = [Client(s.uri, timeout=30) for s in servers]
    try:
        clients[0].create_table("db.e", EVENTS, options={
            "bucket": "2", "bucket-key": "id", "snapshot.num-retained.min": "3", "snapshot.num-retained.max": "8",
            "compaction.min.file-num": "3"})
        errors = []

        def produce(i: int) -> None:
            try:
                with clients[i % 2].paimon_sink("db.e", producer=f"p{i}", max_unacked=4) as sink:
                    for seq in range(40):
                        sink.write(batch(f"p{i}", seq, 10))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(e)

        import threading
        threads = [threading.Thread(target=produce, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not errors, errors
        wait_for(lambda: all(settled(c, "db.e") for c in clients), "both servers' maintenance", timeout=60)
        states = [maintenance(c, "db.e") for c in clients]
        assert sum(s.compactions for s in states) > 0 and sum(s.files_deleted for s in states) > 0
        table = table_of(warehouse, "db.e")
        manager = table.snapshot_manager()
        latest, on_disk = manager.get_latest_snapshot().id, data_files_on_disk(warehouse, "db.e")
        earliest = latest
        while manager.get_snapshot_by_id(earliest - 1) is not None:
            earliest -= 1
        for sid in range(earliest, latest + 1):
            files = {e.file.file_name for e in live_files(table, sid)}
            assert files <= on_disk, f"kept snapshot {sid} names deleted files"
        data = Warehouse(warehouse).read("db.e")
        held = collections.Counter(zip(data.column("producer").to_pylist(), data.column("seq").to_pylist()))
        assert held == {(f"p{i}", seq): 10 for i in range(4) for seq in range(40)}
    finally:
        for c in clients:
            c.close()
        for s in servers:
            s.stop()


def test_remove_orphan_files_deletes_only_old_files_nothing_names(client, warehouse):
    import time

    from flight_server.paimon import compat

    wh = Warehouse(warehouse)
    t = wh.create("orders", buckets=1)
    for i in range(4):
        wh.commit(t, rows(i * 10, 10))
    table = compat.native_write_table(wh.catalog.get_table(t))
    write = table.new_batch_write_builder().new_write()  # a writer killed before its commit: its files stay
    write.write_arrow(rows(100, 10))
    orphan_messages = write.prepare_commit()
    write.close()
    root = os.path.join(warehouse, "db.db", "orders")
    crashed = [f.file_name for m in orphan_messages for f in m.new_files]
    young = os.path.join(root, "bucket-0", "data-young-orphan.parquet")
    old_manifest = os.path.join(root, "manifest", "manifest-old-orphan-0")
    for path in (young, old_manifest):
        with open(path, "w") as f:
            f.write("not named by any snapshot")
    day_ago = time.time() - 2 * 86400
    for path in [os.path.join(root, "bucket-0", name) for name in crashed] + [old_manifest]:
        os.utime(path, (day_ago, day_ago))
    before = {f for _, _, files in os.walk(root) for f in files}
    result = client.action(names.REMOVE_ORPHAN_FILES, {"table": t})
    after = {f for _, _, files in os.walk(root) for f in files}
    assert result["deleted"] == len(crashed) + 1 and before - after == {*crashed, "manifest-old-orphan-0"}
    assert "data-young-orphan.parquet" in after, "a file younger than older_than may be a commit in flight"
    assert sorted(wh.read(t).column("id").to_pylist()) == list(range(40))
    for sid in range(1, 5):
        assert wh.read(t, sid).num_rows == sid * 10
    with pytest.raises(pa.ArrowInvalid, match="at least 10 minutes ago"):
        client.action(names.REMOVE_ORPHAN_FILES, {"table": t, "older_than": int(time.time() * 1000)})


def test_orphan_removal_keeps_what_snapshots_name_whatever_the_earliest_hint_says_and_lists_only_paimon_dirs(
        client, warehouse):
    """pypaimon gives up on an EARLIEST hint it cannot follow (torn, or no snapshot within 300 ids of
    it) and a lister that trusted it would keep nothing; the server lists the snapshot directory.
    Only manifest/, index/ and partition and bucket directories hold candidates (Paimon's
    OrphanFilesClean): other directories, such as Iceberg metadata, are never touched; a table with
    branches is refused (their files live beside the main branch's)."""
    import time

    wh = Warehouse(warehouse)
    t = wh.create("hinted", buckets=1)
    for i in range(5):
        wh.commit(t, rows(i * 10, 10))
    root = os.path.join(warehouse, "db.db", "hinted")
    os.makedirs(os.path.join(root, "metadata"))
    with open(os.path.join(root, "metadata", "v1.metadata.json"), "w") as f:
        f.write("{}")  # what metadata.iceberg.storage=table-location writes
    day_ago = time.time() - 2 * 86400
    for folder, _, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(folder, name), (day_ago, day_ago))
    before = {f for _, _, files in os.walk(root) for f in files}
    for hint in ("1000", ""):  # past every snapshot (so never found), then torn
        with open(os.path.join(root, "snapshot", "EARLIEST"), "w") as f:
            f.write(hint)
        result = client.action(names.REMOVE_ORPHAN_FILES, {"table": t})
        assert result["deleted"] == 0 and {f for _, _, files in os.walk(root) for f in files} == before | {"EARLIEST"}
        assert sorted(wh.read(t).column("id").to_pylist()) == list(range(50))
    result = client.action(names.EXPIRE_SNAPSHOTS, {"table": t, "retain_max": 2, "retain_min": 1})
    assert result["expired"] == 3 and result["first_kept"] == 4
    assert sorted(wh.read(t).column("id").to_pylist()) == list(range(50))
    os.makedirs(os.path.join(root, "branch", "branch-b1", "snapshot"))
    with open(os.path.join(root, "branch", "branch-b1", "snapshot", "LATEST"), "w") as f:
        f.write("1")
    with pytest.raises(pa.ArrowInvalid, match="branches"):
        client.action(names.REMOVE_ORPHAN_FILES, {"table": t})


def upserts(b: int, n: int = 20) -> pa.RecordBatch:
    """Batch `b` rewrites ids b % 7 * 10 ... + n: every id is written again and again."""
    ids = [(b % 7) * 10 + i for i in range(n)]
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array([b] * n, pa.int64()),
                            pa.array([f"b{b}" for _ in ids])], schema=INGEST_SCHEMA)


def test_durable_ingest_keeps_a_primary_key_table_merged_and_readers_see_each_change_once(fast, warehouse):
    running, client = fast
    client.create_table("db.k", INGEST_SCHEMA, primary_keys=["id"], options={
        "bucket": "2", "snapshot.num-retained.min": "2", "snapshot.num-retained.max": "200"})
    follow = client.flight.get_flight_info(command({"table": "db.k", "follow": True, "start": "earliest",
                                                    "poll_interval_ms": 20}))
    followers = [Follower(client, ep) for ep in follow.endpoints]
    descriptor = flight.FlightDescriptor.for_path(*names.paimon_path("db.k"))
    batches = [upserts(b) for b in range(60)]
    for b in batches:
        put_raw(client, descriptor, [b])
    latest_of = {}
    for b in batches:
        latest_of.update({i: n for i, n in zip(b.column("id").to_pylist(), b.column("batch").to_pylist())})
    wait_for(lambda: settled(client, "db.k"), "maintenance after the last commit", timeout=60)
    state = maintenance(client, "db.k")
    assert state.last_error is None and state.compactions > 0
    table = table_of(warehouse, "db.k")
    by_bucket = collections.defaultdict(list)
    for e in live_files(table):
        by_bucket[e.bucket].append(e.file)
    assert len(by_bucket) == 2
    for bucket, files in by_bucket.items():  # sorted runs: each level-0 file, and each level above
        runs = sum(1 for f in files if f.level == 0) + len({f.level for f in files if f.level > 0})
        assert runs < 5, f"bucket {bucket} holds {runs} sorted runs, past num-sorted-run.compaction-trigger"
        assert max(f.level for f in files) > 0
    _, whole = read_all(client, command({"table": "db.k"}))
    assert dict(zip(whole.column("id").to_pylist(), whole.column("batch").to_pylist())) == latest_of
    assert whole.num_rows == len(latest_of)
    assert dict(zip(*[Warehouse(warehouse).read("db.k").column(c).to_pylist() for c in ("id", "batch")])) == latest_of
    got = []
    latest = table.snapshot_manager().get_latest_snapshot().id
    for f in followers:
        f.drain_until_done(latest)
        f.cancel()
        got += [(i, n) for _, batch in f.received for i, n in zip(batch.column("id").to_pylist(),
                                                                 batch.column("batch").to_pylist())]
    written = [(i, n) for b in batches for i, n in zip(b.column("id").to_pylist(), b.column("batch").to_pylist())]
    assert sorted(got) == sorted(written), "a follow skips COMPACT snapshots: every change exactly once"


def pk_table(wh: Warehouse, name: str, options: dict) -> str:
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string()), ("amount", pa.float64()),
                        ("op", pa.string())])
    from pypaimon import Schema
    wh.catalog.create_table(f"db.{name}", Schema.from_pyarrow_schema(schema, primary_keys=["id"], options={
        "bucket": "1", **options}), False)
    return f"db.{name}"


def changes(ids, tag: str, op: str = "+I", amount: float = 1.0) -> pa.Table:
    return pa.table({"id": pa.array(ids, pa.int64()), "name": [f"{tag}{i}" for i in ids],
                     "amount": pa.array([amount] * len(ids), pa.float64()), "op": [op] * len(ids)})


def by_id(wh: Warehouse, table: str) -> dict:
    data = wh.read(table)
    return {i: (n, a) for i, n, a in zip(*[data.column(c).to_pylist() for c in ("id", "name", "amount")])}


@pytest.mark.parametrize("engine", ["deduplicate", "partial-update", "aggregation", "first-row"])
def test_compacting_a_merge_tree_by_hand_keeps_what_each_merge_engine_reads(client, warehouse, engine):
    wh = Warehouse(warehouse)
    options = {"merge-engine": engine, "num-sorted-run.compaction-trigger": "3"}
    if engine == "deduplicate":
        options["rowkind.field"] = "op"
    if engine == "aggregation":
        options["fields.amount.aggregate-function"] = "sum"
    t = pk_table(wh, f"k_{engine.replace('-', '_')}", options)
    model: dict = {}
    for c in range(12):
        ids = list(range(c * 5, c * 5 + 30))
        data = changes(ids, f"c{c}-", amount=float(c))
        if engine == "partial-update":  # nulls leave the column as it was
            data = data.set_column(1, "name", pa.array([None if i % 2 else f"c{c}-{i}" for i in ids], pa.string()))
        wh.commit(t, data)
        for i, n in zip(ids, data.column("name").to_pylist()):
            old = model.get(i)
            if engine == "deduplicate":
                model[i] = (n, float(c))
            elif engine == "first-row":
                model.setdefault(i, (n, float(c)))
            elif engine == "partial-update":
                model[i] = (n if n is not None else (old[0] if old else None), float(c))
            else:
                model[i] = (n, float(c) + (old[1] if old else 0.0))
        if engine == "deduplicate" and c % 3 == 2:
            gone = ids[::4]
            wh.commit(t, changes(gone, "x", op="-D"))
            for i in gone:
                model.pop(i, None)
        if c % 4 == 1:
            client.action(names.COMPACT, {"table": t})
        if engine != "first-row":  # first-row reads skip level 0: its rows show once compacted
            assert by_id(wh, t) == model, f"after commit {c}"
    result = client.action(names.COMPACT, {"table": t})
    assert result["files_out"] >= 1 and len(result["snapshots"]) == 1
    assert by_id(wh, t) == model
    files = live_files(table_of(warehouse, t))
    assert [(f.file.level, f.file.delete_row_count) for f in files] == [(3, 0)], "one file at the top level"
    _, whole = read_all(client, command({"table": t}))
    assert dict(zip(whole.column("id").to_pylist(), whole.column("name").to_pylist())) == {i: v[0] for i, v in model.items()}
    result = client.action(names.EXPIRE_SNAPSHOTS, {"table": t, "retain_max": 1, "retain_min": 1})
    assert result["expired"] > 0 and by_id(wh, t) == model


def test_compaction_skips_deletes_once_a_table_ignores_them_as_java_paimon_reads_it(client, warehouse):
    """Deletes written before `ignore-delete` was set: Java Paimon's deduplicate merge skips them,
    so the rows they retracted read again; compaction must keep those rows, not drop them with
    the deletes at the top level (pypaimon's own read still applies them before compaction)."""
    from pypaimon.schema.schema_change import SchemaChange

    wh = Warehouse(warehouse)
    t = pk_table(wh, "ignoring", {"rowkind.field": "op"})
    wh.commit(t, changes(range(10), "a"))
    wh.commit(t, changes(range(5), "x", op="-D"))
    wh.catalog.alter_table(t, [SchemaChange.set_option("ignore-delete", "true")], False)
    wh.commit(t, changes(range(20, 30), "b"))
    assert sorted(by_id(wh, t)) == [*range(5, 10), *range(20, 30)]
    result = client.action(names.COMPACT, {"table": t})
    assert result["files_in"] == 3 and result["files_out"] == 1
    assert sorted(by_id(wh, t)) == [*range(10), *range(20, 30)], "the skipped deletes took their rows along"
    assert [f.file.file_source for f in live_files(table_of(warehouse, t))] == [1], "marked as Java's COMPACT"


def test_with_a_sequence_field_a_delete_at_the_bottom_still_hides_a_later_row_with_a_lower_sequence(client,
                                                                                                    warehouse):
    """`+I s=5`, `-D s=5`, compaction to the top level, then `+I s=1`: the delete still wins (the
    read before compaction says so); Java Paimon drops it there and the late row comes back
    (apache/paimon#4767). Compaction must change no row."""
    from pypaimon import Schema

    wh = Warehouse(warehouse)
    schema = pa.schema([pa.field("id", pa.int64(), nullable=False), ("s", pa.int64()), ("op", pa.string())])
    wh.catalog.create_table("db.seq", Schema.from_pyarrow_schema(schema, primary_keys=["id"], options={
        "bucket": "1", "sequence.field": "s", "rowkind.field": "op"}), False)

    def commit(ids, s, op):
        wh.commit("db.seq", pa.table({"id": pa.array(ids, pa.int64()), "s": pa.array([s] * len(ids), pa.int64()),
                                      "op": [op] * len(ids)}))

    def ids() -> list[int]:
        return sorted(wh.read("db.seq").column("id").to_pylist())

    commit([1, 2, 3], 5, "+I")
    commit([1, 2], 5, "-D")
    assert ids() == [3]
    client.action(names.COMPACT, {"table": "db.seq"})  # everything to the top level
    files = live_files(table_of(warehouse, "db.seq"))
    assert len(files) == 1 and files[0].file.delete_row_count == 2, "the deletes stay with the rows they hide"
    commit([1], 1, "+I")  # written later, ordered before the delete by its sequence value
    assert ids() == [3]
    client.action(names.COMPACT, {"table": "db.seq"})
    assert ids() == [3], "compaction brought back a row its delete hides"
    _, whole = read_all(client, command({"table": "db.seq"}))
    assert sorted(whole.column("id").to_pylist()) == [3]
    commit([2], 9, "+I")  # a higher sequence value wins over the delete, compacted or not
    assert ids() == [2, 3]
    client.action(names.COMPACT, {"table": "db.seq"})
    assert ids() == [2, 3]


def test_a_file_compaction_moved_up_a_level_survives_expiry(client, warehouse):
    """A file that overlaps no other is moved to the output level, not rewritten (Paimon's upgrade:
    DELETE at level 0 and ADD at level 5 of the same file in one snapshot): expiring the snapshots
    before that one must not delete it, as it would if each DELETE entry were deleted."""
    wh = Warehouse(warehouse)
    t = pk_table(wh, "up", {"target-file-size": "1 kb"})
    wh.commit(t, changes(range(0, 100), "a"))
    wh.commit(t, changes(range(1000, 1100), "b"))
    before = by_id(wh, t)
    files = len(live_files(table_of(warehouse, t)))  # the writer rolls files at 1 kb: several a commit
    result = client.action(names.COMPACT, {"table": t})
    assert result["upgraded"] == files and result["files_out"] == 0
    assert [f.file.level for f in live_files(table_of(warehouse, t))] == [5] * files
    result = client.action(names.EXPIRE_SNAPSHOTS, {"table": t, "retain_max": 1, "retain_min": 1})
    assert result["expired"] == 2 and result["first_kept"] == 3  # its manifests went, not its data files
    assert len(data_files_on_disk(warehouse, t)) == files and by_id(wh, t) == before


def test_a_primary_key_table_this_server_cannot_merge_is_expired_but_not_compacted(fast, warehouse):
    running, client = fast
    client.create_table("db.k", INGEST_SCHEMA, primary_keys=["id"], options={
        "bucket": "1", "deletion-vectors.enabled": "true", "deletion-vectors.merge-on-read": "true",
        "snapshot.num-retained.min": "2",
        "snapshot.num-retained.max": "4"})
    ingest(client, "db.k", range(12))
    wait_for(lambda: settled(client, "db.k"), "maintenance after the last commit", timeout=60)
    state = maintenance(client, "db.k")
    assert state.last_error is None and state.snapshots <= 4 and state.compactions == 0
    _, whole = read_all(client, command({"table": "db.k"}))
    assert whole.num_rows == 12 * 20
    with pytest.raises(pa.ArrowInvalid, match="deletion vectors"):
        client.action(names.COMPACT, {"table": "db.k"})


def _files(*sizes: int) -> list:
    from flight_server.maintenance.store import LiveFile

    return [LiveFile(None, f"f{i}", size, 1, i, 0) for i, size in enumerate(sizes)]


def test_pick_merges_tiny_files_by_size_tier_and_part_files_once_they_add_up_to_the_target():
    from flight_server.maintenance.compaction import tier_bounds, tier_pick
    from flight_server.maintenance.options import MaintenanceOptions

    opts = MaintenanceOptions(target_file_size=16 * 4096)  # part files: 4096 and up; tiers below 4096, 256, 16, 1
    assert tier_bounds(opts) == [1, 16, 256, 4096]
    names = lambda files: [f.name for f in files]  # noqa: E731
    assert tier_pick(_files(40, 40, 40, 40), opts) == [], "fewer than min-file-num tiny files wait"
    assert tier_pick(_files(40, 40, 40, 40, 40), opts) == [], "min-file-num files below a tier's bound wait to add up to it"
    assert names(tier_pick(_files(40, 40, 40, 40, 40, 40, 40), opts)) == [f"f{i}" for i in range(7)], \
        "files below 256 that add up to it merge: the merge lands a tier up"
    assert names(tier_pick(_files(300, 40, 40, 40, 40, 40, 40, 40), opts)) == [f"f{i}" for i in range(1, 8)], \
        "a file of the next tier is not rewritten with them"
    assert names(tier_pick(_files(1000, 1000, 1000, 600, 600, 10, 10), opts)) == [f"f{i}" for i in range(7)], \
        "the lowest tier the files add up to: here the part size"
    assert names(tier_pick(_files(3, 3, 3, 3, 3, 3, 300, 300), opts)) == [f"f{i}" for i in range(6)], \
        "the lowest tier first"
    parts = _files(*[16 * 300] * 15)
    assert tier_pick(parts[:13], opts) == [], "part files below the target together wait"
    assert names(tier_pick(parts, opts)) == [f"f{i}" for i in range(14)], "once they add up to it they merge"
    assert tier_pick(_files(60000, 60000, 60000), opts) == [], "files of the target size are left alone"
    many = _files(*[10] * 40)
    assert len(tier_pick(many, MaintenanceOptions(target_file_size=16 * 4096, max_file_num=30))) == 30, \
        "max-file-num at most"


def test_the_tiers_rewrite_a_byte_a_few_times_whatever_the_commit_size():
    """Commits of one size each, merged as tier_pick says with a merge as large as its inputs: bytes
    rewritten over bytes committed stays within the tiers a commit climbs to the part size (and the
    one rewrite of part files into the target), and a bucket never holds many files."""
    from flight_server.maintenance.compaction import tier_pick
    from flight_server.maintenance.options import MaintenanceOptions
    from flight_server.maintenance.store import LiveFile

    opts = MaintenanceOptions(target_file_size=16 << 20)  # 1/16 of the default: commits 1/16 of 20 KB, 320 KB, 3 MiB
    for commit, bound in ((1_250, 4), (20_000, 3), (200_000, 2)):
        files: list = []
        rewritten = written = 0
        for n in range(1, (64 << 20) // commit + 1):  # four target files a bucket
            files.append(LiveFile(None, f"c{n}", commit, 1, n, 0))
            written += commit
            while chosen := tier_pick(files, opts):
                rewritten += sum(f.size for f in chosen)
                files = [f for f in files if f not in chosen] + [LiveFile(None, f"m{n}", sum(f.size for f in chosen), 1, n, 0)]
            assert len(files) < 64, (commit, n, len(files))
        assert rewritten / written <= bound, (commit, rewritten / written)


def test_a_quiet_bucket_settles_to_a_file_per_4_mib_besides_the_first():
    from flight_server.maintenance.compaction import settle_pick
    from flight_server.maintenance.options import MaintenanceOptions

    opts = MaintenanceOptions()
    plenty = 1 << 40
    names = lambda files: [f.name for f in files]  # noqa: E731
    assert names(settle_pick(_files(*[20_000] * 12), opts, plenty)) == [f"f{i}" for i in range(12)], \
        "a small bucket: one file"
    assert settle_pick(_files(5 << 20, 20_000), opts, plenty) == [], "one file per 4 MiB of data besides the first"
    assert names(settle_pick(_files(12 << 20, *[20_000] * 6), opts, plenty)) == ["f1", "f2", "f3", "f4"], \
        "the smallest merge"
    assert settle_pick(_files(20 << 20, 20 << 20, 20 << 20), opts, plenty) == [], "part files stay"
    assert names(settle_pick(_files(3 << 20, 20_000, 20_000), opts, 100_000)) == ["f1", "f2"], \
        "within the budget: the large file waits"
    assert settle_pick(_files(3 << 20, 20_000), opts, 100_000) == [], "one file within the budget is no merge"


def test_settling_a_table_that_commits_once_per_quiet_spell_rewrites_a_byte_a_few_times():
    """A commit, then a settling round, again and again (a producer slower than settle_s): with
    the budget, settling's rewrites stay within SETTLE_COST per byte (without it, each settle
    rewrote the growing file: 75x for 20 KB commits), and the bucket keeps few files."""
    from flight_server.maintenance.compaction import SETTLE_COST, settle_pick, tier_pick
    from flight_server.maintenance.options import MaintenanceOptions
    from flight_server.maintenance.store import LiveFile

    opts = MaintenanceOptions()
    for commit in (1_000, 20_000, 100_000):
        files: list = []
        rewritten = written = unsettled = 0
        most = 0
        for n in range(1, 3001):
            files.append(LiveFile(None, f"c{n}", commit, 1, n, 0))
            written += commit
            unsettled += commit
            for chosen in iter(lambda: tier_pick(files, opts), []):  # the rounds after the commit
                rewritten += sum(f.size for f in chosen)
                files = [f for f in files if f not in chosen] + [LiveFile(None, f"m{n}", sum(f.size for f in chosen), 1, n, 0)]
            chosen = settle_pick(files, opts, SETTLE_COST * unsettled)  # the quiet spell
            if chosen:
                rewritten += sum(f.size for f in chosen)
                files = [f for f in files if f not in chosen] + [LiveFile(None, f"s{n}", sum(f.size for f in chosen), 1, n, 0)]
                unsettled = 0
            most = max(most, len(files))
        assert rewritten / written <= SETTLE_COST + 4, (commit, rewritten / written)
        assert most <= 40, (commit, most)


def test_part_files_wait_until_they_add_up_to_the_target(fast, warehouse):
    from flight_server.maintenance.store import TableStore

    running, client = fast
    client.create_table("db.p", INGEST_SCHEMA, options={"bucket": "1", "bucket-key": "id", "target-file-size": "512 kb"})
    descriptor = flight.FlightDescriptor.for_path(*names.paimon_path("db.p"))
    big = lambda b: ingest_rows(b, 10_000)  # noqa: E731 - a file of ~50 KB a commit: a part file (32 KiB up)
    for b in range(3):
        put_raw(client, descriptor, [big(b)])
    wait_for(lambda: settled(client, "db.p"), "maintenance after three commits", timeout=60)
    sizes = [e.file.file_size for e in live_files(table_of(warehouse, "db.p"))]
    assert len(sizes) == 3 and min(sizes) >= (512 << 10) // 16, f"each commit wrote a part file: {sizes}"
    assert getattr(maintenance(client, "db.p"), "compactions", 0) == 0, "three part files far below the target wait"
    batches = 3
    while (batches - 1) * min(sizes) < 1 << 20:  # the parts add up to the target twice
        put_raw(client, descriptor, [big(batches)])
        batches += 1
    wait_for(lambda: settled(client, "db.p") and maintenance(client, "db.p").compactions >= 1,
             "a compaction once the part files add up to the target", timeout=60)
    table = table_of(warehouse, "db.p")
    store, sm = TableStore(table, "db.p"), table.snapshot_manager()
    appended, first = {}, None
    for i in range(1, sm.get_latest_snapshot().id + 1):
        snapshot = sm.get_snapshot_by_id(i)
        entries = store.delta_entries(snapshot)
        if snapshot.commit_kind == "APPEND":
            appended |= {e.file.file_name: e.file.file_size for e in entries}
        elif first is None:
            first = [e.file.file_name for e in entries if e.kind == 1]
    assert first is not None and len(first) >= 5 and set(first) <= set(appended), first
    assert sum(appended[name] for name in first) >= 512 << 10, "the part files waited until they added up to the target"
    assert maintenance(client, "db.p").data_files < batches
    _, whole = read_all(client, command({"table": "db.p"}))
    assert sorted(whole.column("id").to_pylist()) == sorted(i for b in range(batches) for i in big(b).column("id").to_pylist())


def test_a_dropped_table_is_forgotten_by_maintenance_and_one_created_again_starts_afresh(fast):
    running, client = fast
    client.create_table("db.d", INGEST_SCHEMA, options=OPTIONS)
    ingest(client, "db.d", range(8))
    wait_for(lambda: settled(client, "db.d") and maintenance(client, "db.d").compactions >= 1,
             "a compaction of db.d", timeout=60)
    before = maintenance(client, "db.d")
    client.drop_table("db.d")
    assert "db.d" not in client.stats().maintenance
    client.create_table("db.d", INGEST_SCHEMA, options=OPTIONS)
    ingest(client, "db.d", range(2))
    wait_for(lambda: settled(client, "db.d"), "maintenance of the new db.d", timeout=60)
    state = maintenance(client, "db.d")
    assert state.last_error is None and state.compactions <= 2, state  # a settling merge a bucket at most
    assert 0 < state.ingested_bytes < before.ingested_bytes / 2, (state, before)
