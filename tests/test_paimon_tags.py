"""Tags as Paimon users make and read them: `create_tag` / `delete_tag` (the action, `Client`,
`flight_cli create-tag` / `delete-tag`, Paimon's procedures' arguments) on a real server over real
pypaimon tables, read back with `scan.tag-name`; Spark's `incremental-between` over two tags."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.auth import AuthConfig
from flight_server.wire import names
from producers import Client
from tests.conftest import ROOT, RunningServer, child_env
from tests.paimon_tables import Warehouse, rows
from tests.test_spark_paimon import read

pytestmark = pytest.mark.timeout(180)


def cli(uri: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "flight_cli", *args, "--uri", uri],
                          capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=60)


def tagged_ids(paimon: Warehouse, table: str, tag: str) -> list[int]:
    """pypaimon's own read of the table with scan.tag-name: the tag is a Paimon tag."""
    t = paimon.catalog.get_table(table).copy({"scan.tag-name": tag})
    rb = t.new_read_builder()
    return sorted(rb.new_read().to_arrow(rb.new_scan().plan().splits()).column("id").to_pylist())


def tags_on_disk(warehouse: str, table: str) -> list[str]:
    db, name = table.split(".")
    folder = os.path.join(warehouse, f"{db}.db", name, "tag")
    return sorted(os.listdir(folder)) if os.path.isdir(folder) else []


def test_tags_made_and_deleted_by_action_and_cli_are_paimons_own(client, server, paimon, warehouse):
    table = paimon.create("orders", buckets=2)
    for i in range(3):
        paimon.commit(table, rows(i * 10, 10))
    # The action, with Paimon's create_tag arguments: (table, tag, snapshot?, time_retained?).
    assert client.action(names.CREATE_TAG, {"table": table, "tag": "first", "snapshot": 1}) == \
        {"tag": "first", "snapshot": 1}
    created = client.create_tag(table, "week", 2, time_retained="7 d")
    assert (created.tag, created.snapshot) == ("week", 2)
    # The CLI, taking the table as `list` prints it; without --snapshot, the latest.
    done = cli(server.uri, "create-tag", f"paimon:{table}", "latest")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"tag": "latest", "snapshot": 3}
    done = cli(server.uri, "create-tag", table, "second", "--snapshot", "2")
    assert done.returncode == 0, done.stderr
    assert tags_on_disk(warehouse, table) == ["tag-first", "tag-latest", "tag-second", "tag-week"]
    # Paimon reads them (scan.tag-name), and the retention is in the tag as Paimon writes it.
    assert tagged_ids(paimon, table, "first") == list(range(10))
    assert tagged_ids(paimon, table, "second") == tagged_ids(paimon, table, "week") == list(range(20))
    assert tagged_ids(paimon, table, "latest") == list(range(30))
    week = paimon.catalog.get_table(table).tag_manager().get("week")
    assert week.tag_time_retained.total_seconds() == 7 * 86400 and week.tag_create_time is not None
    assert client.find_snapshot(table, tag="second").snapshot_id == 2
    # More commits do not move a tag.
    paimon.commit(table, rows(30, 10))
    assert tagged_ids(paimon, table, "latest") == list(range(30))
    # delete_tag: one by the action, two comma-separated by the CLI (Paimon's delete_tag takes a list so).
    assert client.delete_tag(table, "first") == ["first"]
    done = cli(server.uri, "delete-tag", table, "second,week")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"deleted": ["second", "week"]}
    assert tags_on_disk(warehouse, table) == ["tag-latest"]
    with pytest.raises(pa.ArrowKeyError, match="has no tag 'first'; its tags are: latest"):
        client.find_snapshot(table, tag="first")
    assert sorted(paimon.read(table).column("id").to_pylist()) == list(range(40))


def test_tag_mistakes_are_one_sentence_naming_what_there_is(client, server, paimon):
    table = paimon.create("orders", buckets=1)
    empty = paimon.create("empty", buckets=1)
    for i in range(3):
        paimon.commit(table, rows(i * 10, 10))
    client.create_tag(table, "v1", 1)
    refusals = [
        ({"tag": "v1"}, pa.ArrowInvalid, "already has tag 'v1' \\(on snapshot 1\\); delete it first"),
        ({"tag": "v9", "snapshot": 9}, pa.ArrowKeyError, "has no snapshot 9 to tag \\(its snapshots are 1 to 3\\)"),
        ({"tag": "123"}, pa.ArrowInvalid, "all digits, which Paimon refuses"),
        ({"tag": "../x"}, pa.ArrowInvalid, "'tag' must be a tag name"),
        ({"tag": "v2", "snapshot": 0}, pa.ArrowInvalid, "'snapshot' must be a snapshot id"),
        ({"tag": "v2", "time_retained": "2 mins"}, pa.ArrowInvalid, "'time_retained' '2 mins' is not a duration"),
        ({"tag": "v2", "snapshot_id": 1}, pa.ArrowInvalid, "takes no key 'snapshot_id'"),
    ]
    for body, error, message in refusals:
        with pytest.raises(error, match=message):
            client.action(names.CREATE_TAG, {"table": table, **body})
    with pytest.raises(pa.ArrowKeyError, match="'db.empty' has no snapshot to tag yet; commit to it first"):
        client.create_tag(empty, "v1")
    with pytest.raises(pa.ArrowKeyError, match="'db.ghost' does not exist"):
        client.create_tag("db.ghost", "v1")
    # An unknown tag among several: nothing is deleted.
    with pytest.raises(pa.ArrowKeyError, match="has no tag 'nope' \\(its tags are: v1\\); nothing was deleted"):
        client.delete_tag(table, "v1,nope")
    assert client.find_snapshot(table, tag="v1").snapshot_id == 1
    # The CLI: the same sentences, exit codes (2 a mistake, 3 not found) and no traceback.
    for args, code, message in [
        (("create-tag", table, "v1"), 2, "already has tag 'v1'"),
        (("create-tag", table, "v2", "--snapshot", "9"), 3, "has no snapshot 9 to tag"),  # 3: not found
        (("delete-tag", table, "nope"), 3, "has no tag 'nope'"),
        (("create-tag", "push:orders", "v2"), 2, "name a Paimon table DB.TABLE"),
    ]:
        done = cli(server.uri, *args)
        assert done.returncode == code and message in done.stderr, (args, done.returncode, done.stderr)
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert paimon.catalog.get_table(table).list_tags() == ["v1"]


def test_deleting_a_tag_deletes_no_data_file_and_the_next_expiry_does(client, paimon, warehouse):
    from tests.test_maintenance import data_files_on_disk

    table = paimon.create("logs", buckets=1)
    for i in range(4):
        paimon.commit(table, rows(i * 10, 10))
    client.create_tag(table, "kept", 2)
    assert client.compact(table).files_in == 4  # snapshot 5 removes the four files
    client.expire_snapshots(table, retain_max=1, retain_min=1, older_than=int(time.time() * 1000) + 60_000)
    files = data_files_on_disk(warehouse, table)
    assert len(files) == 3, "the compacted file and the two of snapshot 2, which the tag keeps"
    assert tagged_ids(paimon, table, "kept") == list(range(20))
    client.delete_tag(table, "kept")
    assert data_files_on_disk(warehouse, table) == files, "delete_tag deletes its tag file only"
    assert sorted(paimon.read(table).column("id").to_pylist()) == list(range(40))
    # Expiry decides: nothing keeps the two files now, and the next expiry deletes them.
    paimon.commit(table, rows(40, 10))
    client.expire_snapshots(table, retain_max=1, retain_min=1, older_than=int(time.time() * 1000) + 60_000)
    assert len(data_files_on_disk(warehouse, table)) == 2, "the compacted file and the last commit's"
    assert sorted(paimon.read(table).column("id").to_pylist()) == list(range(50))


def test_tags_need_the_admin_grant(warehouse, paimon):
    table = paimon.create("orders", buckets=1)
    paimon.commit(table, rows(0, 10))
    tokens = {"ops": "o" * 24, "etl": "e" * 24}
    auth = AuthConfig.parse({"principals": [
        {"name": "ops", "token": tokens["ops"], "grants": [{"tables": "*", "allow": ["read", "write", "admin"]}]},
        {"name": "etl", "token": tokens["etl"], "grants": [{"tables": "db.*", "allow": ["read", "write"]}]}]})
    running = RunningServer(warehouse, auth=auth)
    ops, etl = (Client(running.uri, timeout=10, token=tokens[who]) for who in ("ops", "etl"))
    try:
        for call in (lambda c: c.create_tag(table, "t1"), lambda c: c.delete_tag(table, "t1")):
            with pytest.raises(flight.FlightUnauthorizedError, match="'etl'.*'admin'"):
                call(etl)
            call(ops)
    finally:
        ops.close()
        etl.close()
        running.stop()


# -- Spark: incremental-between over tags ------------------------------------------------------

def ids_of(df) -> list[int]:
    return sorted(r.id for r in df.select("id").collect())


@pytest.mark.timeout(300)
def test_incremental_between_tags_equals_the_same_between_snapshot_ids(fp, server, client, paimon):
    table = paimon.create("events", buckets=2)
    for i in range(5):
        paimon.commit(table, rows(i * 100, 100))
    client.create_tag(table, "2026-11-01", 1)
    client.create_tag(table, "2026-11-04", 4)
    by_tags = read(fp, server.uri, table, {"incremental-between": "2026-11-01,2026-11-04"})
    by_ids = read(fp, server.uri, table, {"incremental-between": "1,4"})
    assert ids_of(by_tags) == ids_of(by_ids) == list(range(100, 400))
    assert sorted(by_tags.collect()) == sorted(by_ids.collect())
    # A new read takes the tags as they are then (a tag deleted and made again elsewhere).
    client.delete_tag(table, "2026-11-04")
    client.create_tag(table, "2026-11-04", 5)
    assert ids_of(read(fp, server.uri, table, {"incremental-between": "2026-11-01,2026-11-04"})) == \
        list(range(100, 500))
    # Equal tags: an empty delta, as Paimon's.
    assert read(fp, server.uri, table, {"incremental-between": "2026-11-01,2026-11-01"}).count() == 0


@pytest.mark.timeout(300)
@pytest.mark.parametrize("value, message", [
    ("2026-11-01,nope", "Option 'incremental-between' '2026-11-01,nope'.*has no tag 'nope'; its tags are: "
                        "2026-11-01, 2026-11-03"),
    ("2026-11-03,2026-11-01", "Option 'incremental-between' '2026-11-03,2026-11-01': tag '2026-11-03' is snapshot "
                              "3, after tag '2026-11-01' \\(snapshot 1\\); name the earlier tag first"),
    ("1,2026-11-03", "two snapshot ids 'START,END' \\(e.g. '3,7'\\) or two tags"),
    ("3,1", "Option 'incremental-between' '3,1' needs START <= END"),
])
def test_a_bad_incremental_between_fails_at_load_naming_the_option(fp, server, client, paimon, value, message):
    table = paimon.create("bad", buckets=1)
    for i in range(3):
        paimon.commit(table, rows(i * 10, 10))
    client.create_tag(table, "2026-11-01", 1)
    client.create_tag(table, "2026-11-03", 3)
    reader = fp.read.format("flight-paimon").option("uri", server.uri).option("table", table) \
        .option("incremental-between", value)
    with pytest.raises(Exception, match=message):
        reader.load()  # not at the first action
