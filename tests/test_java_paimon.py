"""Tables shared with Java Paimon (0.9, tests/java_paimon.py): what Java commits the server serves
(to Spark too) and keeps writing, dynamic-bucket tables included, and what the server writes Java
reads at every snapshot and compacts. Real server on loopback, real tables, one real JVM for the
module; skipped with a reason where Java or the Paimon jar is missing."""

from __future__ import annotations

import secrets
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from flight_server.wire import names
from tests.conftest import wait_for
from tests.java_paimon import java_paimon, java_vm  # noqa: F401  (fixtures)
from tests.paimon_tables import Follower, command, info, read_all
from tests.test_spark_paimon import read as spark_read
from tests.test_spark_paimon import run_available_now

pytestmark = pytest.mark.timeout(1800)  # JVMs: generous for a machine 10x slower

POLL = {"poll_interval_ms": 50}
FOLLOW_S = 900  # a follow's deadline: open across Spark's reads and JVM commands on a slow machine
FIELDS = [["id", "bigint!"], ["name", "string"]]
SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("name", pa.string())])


def batch(ids, tag="s") -> pa.RecordBatch:
    return pa.record_batch([pa.array(ids, pa.int64()), pa.array([f"{tag}{i}" for i in ids])], schema=SCHEMA)


def by_id(rows) -> dict[int, str]:
    rows = rows.to_pylist() if isinstance(rows, pa.Table) else rows
    return {r["id"]: r["name"] for r in rows}


def ids(table: pa.Table) -> list[int]:
    return sorted(table.column("id").to_pylist())


def java_rows(ids_, tag="j") -> list[dict]:
    return [{"id": i, "name": f"{tag}{i}"} for i in ids_]


# -- the server serves what Java wrote -------------------------------------------------------


def spark_ids(df) -> list[int]:
    return sorted(r.id for r in df.select("id").collect())


@pytest.mark.parametrize("primary_key", [False, True], ids=["append", "primary-key"])
def test_the_server_serves_and_writes_a_table_java_committed(java_paimon, client, server, fp, tmp_path,  # noqa: F811
                                                             primary_key):
    t = "db.j"
    java_paimon.create(t, FIELDS, primary_keys=["id"] if primary_key else [], options={"bucket": "2"} if primary_key
                       else {"bucket": "-1"})
    s1 = java_paimon.write(t, java_rows(range(0, 5)))
    follows = [Follower(client, e, FOLLOW_S) for e in
               info(client, command({"table": t, "follow": True, "start": "earliest", **POLL})).endpoints]
    s2 = java_paimon.write(t, java_rows(range(5, 10)))

    _, full = read_all(client, command({"table": t}))
    assert ids(full) == list(range(10))
    _, pinned = read_all(client, command({"table": t, "snapshot": s1}))
    assert ids(pinned) == list(range(5))
    _, delta = read_all(client, command({"table": t, "from_snapshot": s1, "to_snapshot": s2}))
    assert ids(delta) == list(range(5, 10))
    wait_for(lambda: sum(f.rows() for f in follows) >= 10, "10 rows from the follows", 120)
    stats = client.stats(table=t).paimon[t]  # read from Java's manifests
    assert (stats.latest_snapshot, stats.records) == (s2, 10)
    # Spark through the server: batch (latest, pinned) and a stream, a micro-batch per Java commit
    assert by_id(spark_read(fp, server.uri, t).collect()) == by_id(java_rows(range(10)))
    assert spark_ids(spark_read(fp, server.uri, t, {"scan.snapshot-id": str(s1)})) == list(range(5))
    assert run_available_now(fp, server.uri, t, str(tmp_path / "ckpt"), **{
        "scan.mode": "earliest", "read.stream.maxSnapshotsPerTrigger": "1"}) == [list(range(5)), list(range(5, 10))]

    # a named producer writes on top of Java's commits (the server's group commit merges them)
    with client.paimon_sink(t, producer="p1") as sink:
        sink.write(batch(range(100, 103)))
    wait_for(lambda: sum(f.rows() for f in follows) >= 13, "13 rows from the follows", 120)
    assert sorted(r for f in follows for _, b in f.take() for r in b.column("id").to_pylist()) == \
        [*range(10), *range(100, 103)]
    for f in follows:
        f.cancel()
    _, full = read_all(client, command({"table": t}))
    assert ids(full) == [*range(10), *range(100, 103)]
    # Java commits again after the server, and reads it all
    java_paimon.write(t, java_rows(range(10, 12)))
    assert sorted(by_id(java_paimon.read(t))) == [*range(12), *range(100, 103)]
    with client.paimon_sink(t, producer="p1") as sink:
        assert sink.last_seq == 0
        sink.write(batch(range(103, 105)), seq=1)
    _, full = read_all(client, command({"table": t}))
    assert ids(full) == [*range(12), *range(100, 105)]

    # the server's maintenance over Java's manifests
    client.compact(t)
    assert client.expire_snapshots(t, retain_max=1, retain_min=1).expired > 0
    client.remove_orphan_files(t, older_than=0)
    assert sorted(by_id(java_paimon.read(t))) == [*range(12), *range(100, 105)]
    _, full = read_all(client, command({"table": t}))
    assert ids(full) == [*range(12), *range(100, 105)]


# -- dynamic buckets: Java's hash index ------------------------------------------------------


def test_a_dynamic_bucket_table_java_wrote_is_served_and_written_with_its_hash_index(java_paimon, client):  # noqa: F811
    """A primary-key table with bucket -1: Java assigns keys to buckets and writes the hash index
    (a few keys per bucket here, so there are several). The server serves what Java wrote (full,
    pinned, delta, follow), and its writes into the table put each key where the index has it
    (an update lands in the key's bucket, so it replaces the row; a new key is added to the
    index): both read every key once, also after Java writes again over the server's index."""
    t = "db.d"
    java_paimon.create(t, FIELDS, primary_keys=["id"], options={"bucket": "-1", "dynamic-bucket.target-row-num": "4"})
    s1 = java_paimon.write(t, java_rows(range(0, 10)))
    follows = [Follower(client, e, FOLLOW_S) for e in
               info(client, command({"table": t, "follow": True, "start": "earliest", **POLL})).endpoints]
    s2 = java_paimon.write(t, java_rows(range(5, 15), tag="k"))  # 5..9 updated, 10..14 new
    want = {**by_id(java_rows(range(0, 5))), **by_id(java_rows(range(5, 15), tag="k"))}

    _, full = read_all(client, command({"table": t}))
    assert (ids(full), by_id(full)) == (sorted(want), want)
    _, pinned = read_all(client, command({"table": t, "snapshot": s1}))
    assert by_id(pinned) == by_id(java_rows(range(10))) and len(pinned) == 10
    _, delta = read_all(client, command({"table": t, "from_snapshot": s1, "to_snapshot": s2}))
    assert (ids(delta), by_id(delta)) == (list(range(5, 15)), by_id(java_rows(range(5, 15), tag="k")))
    wait_for(lambda: sum(f.rows() for f in follows) >= 20, "20 rows from the follows", 120)
    for f in follows:
        f.cancel()
    assert sorted(r for f in follows for _, b in f.take() for r in b.column("id").to_pylist()) == \
        sorted([*range(10), *range(5, 15)])

    # the server writes: updates of Java's keys in several buckets, and new keys
    with client.paimon_sink(t, producer="p1") as sink:
        sink.write(batch([0, 4, 7, 12, 20, 21, 22], tag="s"))
    want.update(by_id(batch([0, 4, 7, 12, 20, 21, 22], tag="s").to_pylist()))
    for reader in (lambda: read_all(client, command({"table": t}))[1].to_pylist(), lambda: java_paimon.read(t)):
        got = reader()
        assert (sorted(r["id"] for r in got), by_id(got)) == (sorted(want), want)
    # Java writes again, its assigner reading the index the server's commit left, and again after
    # the server's maintenance (its compaction keeps each key's bucket; expiry and orphan removal
    # keep the index files the kept snapshots name)
    for tag, keys in (("m", [1, 20, 21, 30]), ("n", [2, 22, 30, 31])):
        java_paimon.write(t, java_rows(keys, tag=tag))
        want.update(by_id(java_rows(keys, tag=tag)))
        # and the server's table writer, made before Java added key 30 (31) to the index, writes it
        with client.paimon_sink(t, producer="p1") as sink:
            sink.write(batch([keys[-1], 4], tag=f"s{tag}"))
        want.update({keys[-1]: f"s{tag}{keys[-1]}", 4: f"s{tag}4"})
        for reader in (lambda: read_all(client, command({"table": t}))[1].to_pylist(), lambda: java_paimon.read(t)):
            got = reader()
            assert (sorted(r["id"] for r in got), by_id(got)) == (sorted(want), want)
        client.compact(t)
        client.expire_snapshots(t, retain_max=1, retain_min=1)
        client.remove_orphan_files(t, older_than=0)


# -- Java reads what the server wrote ---------------------------------------------------------

KIND_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("op", pa.string()), ("name", pa.string()),
                         ("p", pa.string())])


def kinds(ids_, ops, tag, p="a") -> pa.RecordBatch:
    return pa.record_batch([pa.array(ids_, pa.int64()), pa.array(ops), pa.array([f"{tag}{i}" for i in ids_]),
                            pa.array([p] * len(ids_))], schema=KIND_SCHEMA)


def state(rows) -> dict[tuple, str]:
    return {(r["p"], r["id"]): r["name"] for r in (rows.to_pylist() if isinstance(rows, pa.Table) else rows)}


def test_java_reads_a_primary_key_table_the_server_wrote_at_every_snapshot(java_paimon, client):  # noqa: F811
    """Producers' group commits and a staged (Spark df.write) job into a partitioned primary-key
    table with `rowkind.field`, never compacted (write-only): Java 0.9 reads each snapshot as the
    server reads it, updates and deletes applied."""
    t = "db.k"
    client.create_table(t, KIND_SCHEMA, primary_keys=["id", "p"], partition_keys=["p"],
                        options={"bucket": "2", "rowkind.field": "op", "write-only": "true"})
    snapshots = []
    with client.paimon_sink(t, producer="p1") as sink:
        sink.write(kinds(range(10), ["+I"] * 10, "v"))
        sink.write(kinds(range(5), ["+I"] * 5, "v", p="b"))
    snapshots.append(client.latest_snapshot(t).snapshot_id)
    with client.paimon_sink(t, producer="p1") as sink:
        sink.write(kinds([1, 2, 3], ["-U", "+U", "-D"], "u"), seq=2)  # a -U alone deletes its key too
        sink.write(kinds([4, 11], ["+U", "+I"], "w", p="b"), seq=3)
    snapshots.append(client.latest_snapshot(t).snapshot_id)
    stage = names.job_stage(int(time.time() * 1000), secrets.token_hex(8))
    client.stage(t, stage, "0-0", KIND_SCHEMA, [kinds([5, 6], ["-D", "+U"], "s")])
    client.stage(t, stage, "1-0", KIND_SCHEMA, [kinds([0, 12], ["+U", "+I"], "s", p="b")])
    snapshots.append(client.commit_staged(t, stage, ["0-0", "1-0"]).snapshot)

    expected = [
        {**{("a", i): f"v{i}" for i in range(10)}, **{("b", i): f"v{i}" for i in range(5)}},
    ]
    expected.append({k: v for k, v in {**expected[0], ("a", 2): "u2", ("b", 4): "w4", ("b", 11): "w11"}.items()
                     if k not in (("a", 1), ("a", 3))})
    expected.append({k: v for k, v in {**expected[1], ("a", 6): "s6", ("b", 0): "s0", ("b", 12): "s12"}.items()
                     if k != ("a", 5)})
    for snapshot, want in zip(snapshots, expected):
        _, served = read_all(client, command({"table": t, "snapshot": snapshot}))
        assert state(served) == want, f"the server at snapshot {snapshot}"
        assert state(java_paimon.read(t, snapshot)) == want, f"Java at snapshot {snapshot}"
    assert state(java_paimon.read(t)) == expected[-1]


# -- Java compacts what the server wrote --------------------------------------------------------

OP_SCHEMA = pa.schema([pa.field("id", pa.int64(), nullable=False), ("op", pa.string()), ("name", pa.string())])


def ops(ids_, op, tag) -> pa.RecordBatch:
    return pa.record_batch([pa.array(ids_, pa.int64()), pa.array([op] * len(ids_)),
                            pa.array([f"{tag}{i}" for i in ids_])], schema=OP_SCHEMA)


def test_java_compacts_a_primary_key_table_the_server_wrote(java_paimon, client, warehouse):  # noqa: F811
    """A primary-key table only the server wrote, never compacted (`write-only`: the server leaves
    compaction to Java, as docs/protocol.md says to let one compact): Java's streaming writer,
    compacting as a table without write-only does (Flink's dedicated compaction job sets it so),
    commits into it; its compaction rewrites the server's files, updates and deletes applied; no
    Java error, and Java and the server read the exact state."""
    t = "db.c"
    client.create_table(t, OP_SCHEMA, primary_keys=["id"], options={"bucket": "2", "rowkind.field": "op",
                                                                    "write-only": "true"})
    for seq, (ids_, op, tag) in enumerate([(range(20), "+I", "v"), (range(10), "+U", "u"), (range(10, 15), "-D", "x"),
                                           (range(20, 25), "+I", "w")]):
        with client.paimon_sink(t, producer="p1") as sink:  # a group commit each
            sink.write(ops(ids_, op, tag), seq=seq)
    server_files = {f.name for f in Path(warehouse, "db.db", "c").glob("bucket-*/*.parquet")}
    want = {**{i: f"u{i}" for i in range(10)}, **{i: f"v{i}" for i in range(15, 20)},
            **{i: f"w{i}" for i in range(20, 25)}}
    assert by_id(java_paimon.read(t)) == want

    # Java's four commits of 5 rows (ids 15..34: the server's 15..24 updated), its 5th sorted run
    # triggering compaction; the last commit waits for it
    commits = java_paimon.commits(t, 4, 5, "java", start=15, interval_ms=0, mode="compact").join()
    compacted = {name for c in commits for name in c["compacted"]}
    assert compacted & server_files, f"Java's compaction replaced none of the server's files: {commits}"
    want.update({i: f"java-{i}" for i in range(15, 35)})
    _, served = read_all(client, command({"table": t}))
    assert (ids(served), by_id(served)) == (sorted(want), want)
    assert by_id(java_paimon.read(t)) == want


def test_the_servers_writes_after_another_writers_commit_win(java_paimon, client):  # noqa: F811
    """A key the server wrote, then Java, then the server again: the server's last row is the
    key's row. Paimon orders a key's rows by their sequence numbers: the server's table writer,
    made before Java's commit, is made anew after it (compat's `_follow_other_writers`), so its
    rows number on from Java's."""
    t = "db.s"
    client.create_table(t, OP_SCHEMA, primary_keys=["id"], options={"bucket": "1", "rowkind.field": "op"})
    with client.paimon_sink(t, producer="p1") as sink:
        sink.write(ops([1, 2, 3], "+I", "a"), seq=0)
    java_paimon.write(t, [{"id": i, "op": "+I", "name": f"j{i}"} for i in (1, 2, 3)])
    with client.paimon_sink(t, producer="p1") as sink:
        sink.write(ops([1], "+U", "b"), seq=1)
        sink.write(ops([2], "-D", "b"), seq=2)
    want = {1: "b1", 3: "j3"}
    _, served = read_all(client, command({"table": t}))
    assert by_id(served) == want
    assert by_id(java_paimon.read(t)) == want


# -- side by side -----------------------------------------------------------------------------

JAVA_COMMITS = 40  # every 100 ms: some 4 s of Java committing into each table beside the producers


def test_java_commits_every_100_ms_beside_named_producers_and_every_row_lands_once(java_paimon, client):  # noqa: F811
    """Java 0.9 commits every ~100 ms into an append and a primary-key table while two named
    producers per table write through the server (its group commits and maintenance on): no error
    anywhere, every row of each writer once (append), the expected final state (primary key, the
    producers updating their keys), read alike by the server and Java, also after the server's
    compact, expire-snapshots and remove-orphan-files."""
    client.create_table("db.a", SCHEMA, options={"bucket": "-1"})
    client.create_table("db.k", SCHEMA, primary_keys=["id"], options={"bucket": "2"})
    javas = {t: java_paimon.commits(t, JAVA_COMMITS, 20, "java", start=1_000_000) for t in ("db.a", "db.k")}
    stop, errors = threading.Event(), []
    appended: dict[str, list[int]] = {}
    last: dict[int, str] = {}

    def produce(table: str, producer: str, base: int):
        sent = []
        try:
            with client.paimon_sink(table, producer=producer) as sink:
                i = 0
                while not stop.is_set() or i < 3:
                    ids_ = [base + (i * 10 + j) % 300 if table == "db.k" else base + i * 10 + j for j in range(10)]
                    sink.write(batch(ids_, tag=f"{producer}-{i}-"))
                    sent.append(ids_)
                    i += 1
                    stop.wait(0.05)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(f"{producer}: {e!r}")
        if table == "db.a":
            appended[producer] = [x for ids_ in sent for x in ids_]
        else:
            for i, ids_ in enumerate(sent):
                last.update({x: f"{producer}-{i}-{x}" for x in ids_})

    threads = [threading.Thread(target=produce, args=(t, f"{t[-1]}{n}", n * 100_000), daemon=True)
               for t in ("db.a", "db.k") for n in (1, 2)]
    for th in threads:
        th.start()
    try:
        for commits in javas.values():
            assert len(commits.join(timeout=1200)) == JAVA_COMMITS  # raises naming the table if Java failed
    finally:
        stop.set()
        for th in threads:
            th.join(120)
    assert not errors, errors
    java_ids = list(range(1_000_000, 1_000_000 + JAVA_COMMITS * 20))

    def check(when: str):
        want_a = sorted([*java_ids, *(x for ids_ in appended.values() for x in ids_)])
        _, served = read_all(client, command({"table": "db.a"}))
        assert ids(served) == want_a, f"the server's read of the append table {when}"
        assert sorted(r["id"] for r in java_paimon.read("db.a")) == want_a, f"Java's read of the append table {when}"
        want_k = {**last, **{x: f"java-{x}" for x in java_ids}}
        _, served = read_all(client, command({"table": "db.k"}))
        assert by_id(served) == want_k, f"the server's read of the primary-key table {when}"
        assert by_id(java_paimon.read("db.k")) == want_k, f"Java's read of the primary-key table {when}"

    check("after the run")
    for t in ("db.a", "db.k"):
        client.compact(t)
        client.expire_snapshots(t, retain_max=2, retain_min=1)
        client.remove_orphan_files(t, older_than=0)
    check("after compact, expire-snapshots and remove-orphan-files")
