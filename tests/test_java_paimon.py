"""Tables shared with Java Paimon (0.9, tests/java_paimon.py): what Java commits the server serves
and keeps writing, and what the server writes Java reads, at every snapshot. Real server on
loopback, real tables, real JVMs; skipped with a reason where Java or the Paimon jar is missing."""

from __future__ import annotations

import secrets
import threading
import time

import pyarrow as pa
import pytest

from flight_server.wire import names
from tests.conftest import wait_for
from tests.java_paimon import java_paimon  # noqa: F401  (a fixture)
from tests.paimon_tables import Follower, command, info, read_all

pytestmark = pytest.mark.timeout(1800)  # JVMs: generous for a machine 10x slower

POLL = {"poll_interval_ms": 50}
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


@pytest.mark.parametrize("primary_key", [False, True], ids=["append", "primary-key"])
def test_the_server_serves_and_writes_a_table_java_committed(java_paimon, client, primary_key):  # noqa: F811
    t = "db.j"
    java_paimon.create(t, FIELDS, primary_keys=["id"] if primary_key else [], options={"bucket": "2"} if primary_key
                       else {"bucket": "-1"})
    s1 = java_paimon.write(t, java_rows(range(0, 5)))
    follows = [Follower(client, e) for e in
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


# -- side by side -----------------------------------------------------------------------------

JAVA_COMMITS = 100  # every 100 ms: some 20 s of Java committing beside the producers


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
        for t, proc in javas.items():
            out, err = proc.communicate(timeout=1200)
            assert proc.returncode == 0, f"Java's commits into {t} failed: {err.strip().splitlines()[-1:]}"
            assert len(out.split()) == JAVA_COMMITS
    finally:
        stop.set()
        for proc in javas.values():
            if proc.poll() is None:
                proc.kill()
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
