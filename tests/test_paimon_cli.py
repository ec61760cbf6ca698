"""`flight_cli tail DB.TABLE` prints a Paimon table's rows as commits land."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from producers import Client
from tests.conftest import ROOT, child_env
from tests.paimon_tables import Warehouse, rows


def tail(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "flight_cli", "tail", *args, "--format", "jsonl"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)


def test_tail_prints_rows_as_commits_land_and_resumes_by_consumer_id(warehouse, server_process):
    wh = Warehouse(warehouse)
    t = wh.create("orders", buckets=2)
    wh.commit(t, rows(0, 10))
    uri = server_process.uri
    first = tail(t, "--from", "earliest", "--consumer-id", "cli1", "--limit", "30", "--uri", uri)
    wh.commit(t, rows(10, 10))
    wh.commit(t, rows(20, 10))
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert sorted(json.loads(line)["id"] for line in out.splitlines()) == list(range(30))
    assert "30 rows" in err
    wh.commit(t, rows(30, 10))
    # The consumer resumes after what it read (repeating at most its last snapshot).
    second = tail(t, "--from", "earliest", "--consumer-id", "cli1", "--limit", "10", "--uri", uri)
    out, err = second.communicate(timeout=60)
    assert second.returncode == 0, err
    ids = [json.loads(line)["id"] for line in out.splitlines()]
    assert len(ids) == 10 and all(20 <= i < 40 for i in ids), ids  # never from the start again


def test_tail_starts_in_sparks_scan_mode_vocabulary(warehouse, server_process):
    wh = Warehouse(warehouse)
    t = wh.create("orders", buckets=1)
    for i in range(3):
        wh.commit(t, rows(i * 10, 10))
    uri = server_process.uri
    cases = [
        (["--from", "from-snapshot", "--snapshot-id", "2"], list(range(10, 30))),  # deltas of 2 and 3
        (["--from", "from-snapshot-full", "--snapshot-id", "2"], list(range(0, 30))),  # 2 in full, then 3
        (["--from", "snapshot:3"], list(range(20, 30))),  # the older spelling
        (["--from", "earliest"], list(range(0, 30))),
    ]
    for args, want in cases:
        proc = tail(t, *args, "--limit", str(len(want)), "--uri", uri)
        out, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, (args, err)
        assert sorted(json.loads(line)["id"] for line in out.splitlines()) == want, args
    # The form `flight_cli list` shows works too, and each row says which snapshot committed it.
    proc = tail("paimon:" + t, "--from", "earliest", "--limit", "30", "--uri", uri)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert {(r["id"] // 10 + 1, r["_snapshot"]) for r in map(json.loads, out.splitlines())} == {(1, 1), (2, 2), (3, 3)}
    bad = tail(t, "--from", "from-snapshot", "--uri", uri)
    _, err = bad.communicate(timeout=60)
    assert bad.returncode == 2 and "--from from-snapshot needs --snapshot-id N" in err, err


def test_tail_of_unknown_table_fails_clearly(server_process):
    proc = tail("db.ghost", "--uri", server_process.uri)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "'db.ghost' does not exist" in err


def test_tail_of_an_expired_snapshot_exits_non_zero_with_one_clear_line(warehouse, server_process):
    wh = Warehouse(warehouse)
    t = wh.create("orders", buckets=1)
    for i in range(3):
        wh.commit(t, rows(i * 10, 10))
    client = Client(server_process.uri)
    client.action("consumer_commit", {"table": t, "consumer_id": "late", "next_snapshot": 1})
    table = wh.catalog.get_table(t)
    snapshot_dir = Path(table.table_path) / "snapshot"
    (snapshot_dir / "snapshot-1").unlink()  # expired, as Paimon's expiry would have done
    (snapshot_dir / "EARLIEST").write_text("2")
    proc = tail(t, "--consumer-id", "late", "--uri", server_process.uri)
    _, err = proc.communicate(timeout=60)
    lines = [line for line in err.splitlines() if line.strip()]
    assert proc.returncode == 1, err
    assert "needs snapshot 1, which has expired (the earliest is 2)" in lines[0], err
    assert "Traceback" not in err and len(lines) == 2, err  # the error, then the row count
