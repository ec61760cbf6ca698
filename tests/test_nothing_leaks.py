"""Nothing leaks for ever (issue 35 item 6), on real servers, real pypaimon tables and a real
S3-compatible server: expiry deletes the index manifests, index files and statistics only expired
snapshots named (and keeps a tag's); orphan removal looks in statistics/; the files of a compaction
whose commit failed are counted until an orphan pass removes them; consumers expire on object
stores too."""

from __future__ import annotations

import json
import os
import time

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from producers import Client
from tests.conftest import RunningServer, wait_for
from tests.paimon_tables import Warehouse, commit_arrow, rows, sort_rows
from tests.test_metrics import scrape
from tests.test_s3_warehouse import BUCKET, s3  # noqa: F401  (moto's S3 server, a fixture)

pytestmark = pytest.mark.timeout(180)

DAY_AGO = time.time() - 2 * 86400


def in_region(data: pa.Table, region: str) -> pa.Table:
    return data.filter(pc.equal(data.column("region"), region))


def name_statistics(root: str, snapshot_id: int, name: str) -> None:
    """Make snapshot `snapshot_id` name the statistics file `name` (written if missing), as Java
    Paimon's ANALYZE (and every commit after it) does: pypaimon writes no statistics."""
    os.makedirs(os.path.join(root, "statistics"), exist_ok=True)
    stats = os.path.join(root, "statistics", name)
    if not os.path.exists(stats):
        with open(stats, "w") as f:
            f.write(f'{{"snapshotId": {snapshot_id}, "schemaId": 0, "mergedRecordCount": 0, "colStats": {{}}}}')
    path = os.path.join(root, "snapshot", f"snapshot-{snapshot_id}")
    with open(path) as f:
        snap = json.load(f)
    snap["statistics"] = name
    with open(path, "w") as f:
        json.dump(snap, f)


def files_in(root: str, folder: str) -> set[str]:
    path = os.path.join(root, folder)
    return set(os.listdir(path)) if os.path.isdir(path) else set()


def index_files_of(table, snapshot) -> set[str]:
    from pypaimon.manifest.index_manifest_file import IndexManifestFile

    return {e.index_file.file_name for e in IndexManifestFile(table).read(snapshot.index_manifest)}


def read_tag(table, tag: str) -> pa.Table:
    rb = table.copy({"scan.tag-name": tag}).new_read_builder()
    return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def test_expiry_deletes_the_index_manifests_index_files_and_statistics_only_expired_snapshots_named(client, warehouse):
    wh = Warehouse(warehouse)
    t = wh.create("dyn", buckets=-1, primary_keys=["id", "region"], partition_keys=["region"])  # a HASH index a commit
    root = os.path.join(warehouse, "db.db", "dyn")
    wh.commit(t, rows(0, 30))  # 1: an index file per partition
    name_statistics(root, 1, "stat-only-expired")
    wh.commit(t, in_region(rows(0, 60, tag="b"), "eu"))  # 2: eu's index file replaced
    name_statistics(root, 2, "stat-of-the-tag")
    table = wh.catalog.get_table(t)
    table.create_tag("kept", snapshot_id=2)
    wh.commit(t, in_region(rows(30, 30, tag="c"), "us"))  # 3: us's replaced
    name_statistics(root, 3, "stat-carried")
    wh.commit(t, in_region(rows(90, 30, tag="d"), "eu"))  # 4: eu's again
    name_statistics(root, 4, "stat-carried")  # as Java's commits carry the latest statistics on
    manager = table.snapshot_manager()
    snaps = {i: manager.get_snapshot_by_id(i) for i in range(1, 5)}
    assert all(s.index_manifest for s in snaps.values()), "a dynamic-bucket table's commits write index manifests"
    before, tagged_before = sort_rows(wh.read(t)), sort_rows(read_tag(table, "kept"))
    index_before, manifests_before = files_in(root, "index"), files_in(root, "manifest")
    kept_index = index_files_of(table, snaps[4]) | index_files_of(table, snaps[2])  # the latest's and the tag's
    assert index_files_of(table, snaps[1]) - kept_index, "snapshot 1's eu index file is named by no kept one"
    assert index_files_of(table, snaps[3]) <= kept_index
    assert index_files_of(table, snaps[2]) - index_files_of(table, snaps[4]), "us's first index file: the tag's only"

    result = client.expire_snapshots(t, retain_max=1, retain_min=1, older_than=int(time.time() * 1000) + 60_000)
    assert result.expired == 3 and result.first_kept == 4
    assert files_in(root, "index") == kept_index and kept_index < index_before
    assert {n for n in files_in(root, "manifest") if n.startswith("index-manifest-")} == \
        {snaps[4].index_manifest, snaps[2].index_manifest}
    assert {snaps[1].index_manifest, snaps[3].index_manifest} <= manifests_before
    assert files_in(root, "statistics") == {"stat-of-the-tag", "stat-carried"}
    assert sort_rows(wh.read(t)) == before and sort_rows(read_tag(table, "kept")) == tagged_before
    # The writer reads the hash index the latest snapshot names to assign buckets: an upsert works.
    upsert = in_region(rows(0, 120, tag="e"), "eu")
    wh.commit(t, upsert)
    after = wh.read(t)
    assert after.num_rows == len({r["id"] for r in before} | set(upsert.column("id").to_pylist()))
    assert set(in_region(after, "eu").column("name").to_pylist()) == set(upsert.column("name").to_pylist())


def test_remove_orphan_files_looks_in_statistics(client, warehouse):
    wh = Warehouse(warehouse)
    t = wh.create("stats", buckets=1)
    root = os.path.join(warehouse, "db.db", "stats")
    for i in range(3):
        wh.commit(t, rows(i * 10, 10))
    name_statistics(root, 3, "stat-named")
    for name in ("stat-orphan-old", "stat-orphan-young"):
        with open(os.path.join(root, "statistics", name), "w") as f:
            f.write("{}")
    for name in ("stat-named", "stat-orphan-old"):
        os.utime(os.path.join(root, "statistics", name), (DAY_AGO, DAY_AGO))
    result = client.remove_orphan_files(t)
    assert result.deleted == 1
    assert files_in(root, "statistics") == {"stat-named", "stat-orphan-young"}
    assert sorted(wh.read(t).column("id").to_pylist()) == list(range(30))


class Racer:
    """Stands in for a table's committer on server A: before A's compaction commit runs, server B
    compacts the same files (and commits first), so A's commit conflicts, as two servers racing do."""

    is_open = False

    def __init__(self, other: Client):
        self.other, self.competing = other, []

    def between_commits(self, fn, _timeout):
        self.competing.append(self.other.compact("db.keyed"))
        return fn()


def test_a_compaction_whose_commit_failed_counts_the_files_it_wrote_until_orphan_removal_takes_them(warehouse):
    wh = Warehouse(warehouse)
    t = wh.create("keyed", buckets=1, primary_keys=["id"], options={"target-file-size": "1 kb"})
    wh.commit(t, rows(0, 100))  # a file a second one overlaps: merged
    wh.commit(t, rows(0, 10, tag="w"))
    wh.commit(t, rows(500, 100))  # overlapping nothing and large: moved to the top level, not rewritten
    # (a compaction's commit messages name the moved files too: they must not be counted)
    root = os.path.join(warehouse, "db.db", "keyed", "bucket-0")
    expected = sort_rows(wh.read(t))
    a, b = RunningServer(warehouse, metrics=True), RunningServer(warehouse)
    client_a, client_b = Client(a.uri, timeout=60), Client(b.uri, timeout=60)
    try:
        _, url = a.server.metrics.serve_http("127.0.0.1", 0)
        racer = Racer(client_b)
        a.server.maintainer._committers = lambda name: racer
        before = files_in(root, "")
        with pytest.raises(Exception, match="(?i)conflict|commit failed"):
            client_a.compact(t)
        assert racer.competing and racer.competing[0].upgraded >= 1, racer.competing
        table = wh.catalog.get_table(t)
        named = {e.file.file_name for e in table.new_read_builder().new_scan().file_scanner.plan_files()}
        # B's files are named; A's are not, and nothing but A's compaction wrote them
        written_by_a = files_in(root, "") - before - named
        assert written_by_a, "A's compaction wrote files before its commit failed"
        assert {f for f in before if f in named}, "B moved the non-overlapping files without rewriting them"
        state = client_a.stats(t).maintenance[t]
        size = sum(os.path.getsize(os.path.join(root, f)) for f in written_by_a)
        assert (state.uncommitted_files, state.uncommitted_bytes) == (len(written_by_a), size), state
        label = (("table", t),)
        got = scrape(url)
        assert got[("flight_paimon_table_maintenance_uncommitted_files", label)] == len(written_by_a)
        assert got[("flight_paimon_table_maintenance_uncommitted_bytes", label)] == size
        assert sort_rows(wh.read(t)) == expected

        assert client_a.remove_orphan_files(t).deleted == 0  # younger than a day: still there, still counted
        assert client_a.stats(t).maintenance[t].uncommitted_files == len(written_by_a)
        for f in written_by_a:
            os.utime(os.path.join(root, f), (DAY_AGO, DAY_AGO))
        assert client_a.remove_orphan_files(t).deleted == len(written_by_a)
        state = client_a.stats(t).maintenance[t]
        assert (state.uncommitted_files, state.uncommitted_bytes) == (0, 0)
        assert scrape(url)[("flight_paimon_table_maintenance_uncommitted_files", label)] == 0
        assert files_in(root, "") == before | named  # only A's files went
        assert sort_rows(wh.read(t)) == expected
    finally:
        client_a.close()
        client_b.close()
        a.stop()
        b.stop()


def test_a_consumer_expires_on_an_object_store(s3, tmp_path):  # noqa: F811 - the fixture imported above
    import boto3
    from pypaimon import CatalogFactory

    from flight_server.paimon.compat import catalog_options
    from tests.process import ServerProcess

    uri = f"s3://{BUCKET}/consumers-{tmp_path.name}"
    catalog = CatalogFactory.create(catalog_options(uri, s3))
    catalog.create_database("db", True)
    options = [a for k, v in s3.items() for a in ("--warehouse-option", f"{k}={v}")]
    with ServerProcess(uri, *options) as server:
        client = Client(server.uri, timeout=60)
        client.create_table("db.c", rows(0, 0).schema, options={"bucket": "1", "bucket-key": "id",
                                                                "consumer.expiration-time": "3 s"})
        commit_arrow(catalog.get_table("db.c"), rows(0, 10))
        client.consumer_commit("db.c", "gone", 1)
        objects = boto3.client("s3", endpoint_url=s3["s3.endpoint"], aws_access_key_id=s3["s3.access-key"],
                               aws_secret_access_key=s3["s3.secret-key"], region_name=s3["s3.region"])
        key = f"consumers-{tmp_path.name}/db.db/c/consumer/consumer-gone"
        written = objects.head_object(Bucket=BUCKET, Key=key)["LastModified"].timestamp()
        wait_for(lambda: time.time() > written + 4, "the consumer's file to be older than consumer.expiration-time")
        client.consumer_commit("db.c", "fresh", 2)
        result = client.expire_snapshots("db.c")
        assert result.consumers_removed == ["gone"], result
        listed = objects.list_objects_v2(Bucket=BUCKET, Prefix=key.rsplit("/", 1)[0] + "/").get("Contents", [])
        assert [o["Key"].rsplit("/", 1)[1] for o in listed if not o["Key"].endswith("/")] == ["consumer-fresh"]
        client.close()
