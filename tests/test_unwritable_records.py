"""Producer records the warehouse refuses (issue 44, item 6): a read-only or full
`<table>/flight-paimon/producers/` directory is a clean, typed error that says what to fix and names
no server path; the table stays writable (acks rest on snapshots), expiry keeps every snapshot no
record covers and says why, and compaction goes on (real servers on loopback ports, real pypaimon
tables, real refusals by the kernel).

How the directory is refused, for real:
- read-only: `chmod 555` when the tests run as a user; as root (permissions do not bind root) the
  directory is made immutable (`chattr +i`), which the kernel enforces for root too (EPERM);
- full: a tmpfs of one page mounted on the directory and filled, so a record's write gets ENOSPC
  from the kernel (needs root's CAP_SYS_ADMIN; skipped without it).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess

import pytest

from flight_server.ingest.seqs import PROPERTY, RECORD_DIR
from flight_server.paimon import compat
from flight_server.wire.errors import StorageFailed, from_flight
from producers import Client
from tests.conftest import RunningServer, wait_for
from tests.paimon_tables import Warehouse
from tests.process import ServerProcess
from tests.test_exactly_once_at_any_age import (
    OPTIONS,
    expire_all_but_latest,
    ids_of,
    write_batches,
)

pytestmark = pytest.mark.timeout(180)

REASONS = {"read-only": "permission denied", "full": "no space left on device"}


def record_dir(warehouse: str) -> str:
    return os.path.join(warehouse, "db.db", "t", RECORD_DIR)


def records(warehouse: str) -> list[str]:
    path = record_dir(warehouse)
    return sorted(n for n in os.listdir(path) if n.endswith(".json")) if os.path.isdir(path) else []


@contextlib.contextmanager
def read_only(directory: str):
    if os.geteuid() != 0:
        os.chmod(directory, 0o555)
        try:
            yield
        finally:
            os.chmod(directory, 0o755)
        return
    if shutil.which("chattr") is None or subprocess.run(["chattr", "+i", directory], capture_output=True).returncode:
        pytest.skip("running as root without chattr +i: no way to make a directory read-only for root")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", directory], check=True)


@contextlib.contextmanager
def full(directory: str):
    """A one-page tmpfs on `directory` holding what it held, then filled to the last byte."""
    kept = {n: open(os.path.join(directory, n), "rb").read() for n in os.listdir(directory)}
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", directory], capture_output=True)
    if mounted.returncode:
        pytest.skip(f"cannot mount a tmpfs to fill ({mounted.stderr.decode().strip()}): no real full file system here")
    try:
        for name, body in kept.items():
            with open(os.path.join(directory, name), "wb") as f:
                f.write(body)
        with contextlib.suppress(OSError), open(os.path.join(directory, ".filler"), "wb", buffering=0) as f:
            while True:
                f.write(b"x" * 512)
        with pytest.raises(OSError):  # truly full
            with open(os.path.join(directory, ".probe"), "w") as f:
                f.write("{}")
        os.unlink(os.path.join(directory, ".probe"))
        yield
    finally:
        subprocess.run(["umount", directory], check=True)  # what it held before is there again beneath


REFUSALS = {"read-only": read_only, "full": full}


def refused_error(call) -> StorageFailed:
    with pytest.raises(Exception) as e:
        call()
    error = from_flight(e.value)
    assert isinstance(error, StorageFailed), repr(e.value)
    return error


def assert_clean(error, warehouse: str, reason: str) -> None:
    text = str(error)
    assert "the server cannot write its producer records" in text and reason in text, text
    assert "fix the warehouse's permissions or free space" in text, text
    assert warehouse not in text and "/tmp" not in text and ".tmp" not in text, text  # no server path


def carried_by(warehouse: str) -> list[int]:
    manager = Warehouse(warehouse).catalog.get_table("db.t").snapshot_manager()
    snaps = [compat.snapshot(manager, i) for i in range(1, manager.get_latest_snapshot().id + 1)]
    return [s.id for s in snaps if s is not None and PROPERTY in (s.properties or {})]


@pytest.mark.parametrize("how", REFUSALS)
def test_expire_snapshots_with_records_refused_is_a_clean_error_and_the_table_stays_writable(warehouse, how):
    server = RunningServer(warehouse)
    client = Client(server.uri, timeout=30)
    try:
        client.create_table("db.t", rows_schema(), options={**OPTIONS, "write-only": "true"})
        os.makedirs(record_dir(warehouse))
        with REFUSALS[how](record_dir(warehouse)):
            acks = write_batches(client, "db.t", "p", range(5))  # every commit acked: acks rest on snapshots
            assert [a.seq for a in acks] == list(range(5))
            assert client.producer_state("db.t", "p") == 4
            error = refused_error(lambda: expire_all_but_latest(client, "db.t"))
            assert_clean(error, warehouse, REASONS[how])
            assert "stopped at snapshot 1 (0 expired)" in str(error) and "then expire again" in str(error)
            assert carried_by(warehouse) == [1, 2, 3, 4, 5]  # no record covers them: none expired
            assert [a.seq for a in write_batches(client, "db.t", "p", [3, 4, 5])] == [3, 4, 5]  # resent, and new
            assert sorted(ids_of(client, "db.t")) == sorted(b * 1000 + i for b in range(6) for i in range(50))
        assert records(warehouse) == []  # nothing was written while refused
        done = expire_all_but_latest(client, "db.t")  # fixed: the record is written, expiry goes on
        assert done.expired == 5 and len(records(warehouse)) == 1
        assert client.producer_state("db.t", "p") == 5
    finally:
        client.close()
        server.stop()


def rows_schema():
    from tests.test_ingest import SCHEMA

    return SCHEMA


@pytest.mark.parametrize("how", REFUSALS)
def test_a_restart_with_records_refused_serves_producer_state_and_writes_and_logs_the_path(warehouse, tmp_path, how):
    """A map only in snapshots (the records refused since the table was made), loaded by a fresh
    server process whose record write fails: producer_state, resends and new writes all work, the
    log names the directory, and the client's errors do not."""
    first = RunningServer(warehouse)
    client = Client(first.uri, timeout=30)
    client.create_table("db.t", rows_schema(), options={**OPTIONS, "write-only": "true"})
    os.makedirs(record_dir(warehouse))
    log_path = tmp_path / "server.log"
    with REFUSALS[how](record_dir(warehouse)):
        write_batches(client, "db.t", "p", range(5))
        client.close()
        first.stop()  # its clean stop's record is refused too (logged)
        with open(log_path, "w") as log, ServerProcess(warehouse, stderr=log) as second:
            c2 = Client(second.uri, timeout=30)
            try:
                assert c2.producer_state("db.t", "p") == 4  # not INTERNAL: the load's record failure is logged
                assert [a.seq for a in write_batches(c2, "db.t", "p", range(7))] == list(range(7))
                assert sorted(ids_of(c2, "db.t")) == sorted(b * 1000 + i for b in range(7) for i in range(50))
                error = refused_error(lambda: expire_all_but_latest(c2, "db.t"))
                assert_clean(error, warehouse, REASONS[how])
            finally:
                c2.close()
        assert records(warehouse) == []
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    failed = [line for line in lines if line.get("event") == "producer_record_failed"]
    assert failed and all(line["dir"] == record_dir(warehouse) for line in failed), lines
    assert not [line for line in lines if line.get("event") == "unexpected_error"], lines


def test_a_maintenance_round_with_records_refused_compacts_keeps_what_no_record_covers_and_says_why(warehouse):
    """Automatic rounds: the table's records are refused, so expiry stops at the first snapshot no
    record covers and the round's error (stats' last_error) says why, while compaction goes on."""
    server = RunningServer(warehouse, commit_interval_ms=5)
    server.server.maintainer.round_s = 0.05
    client = Client(server.uri, timeout=30)
    try:
        client.create_table("db.t", rows_schema(), options={
            **OPTIONS, "snapshot.num-retained.min": "1", "snapshot.num-retained.max": "2",
            "compaction.min.file-num": "3"})
        os.makedirs(record_dir(warehouse))
        with read_only(record_dir(warehouse)):
            write_batches(client, "db.t", "p", range(6))

            def held():
                state = client.stats().maintenance.get("db.t")
                return state is not None and state.compactions > 0 and state.last_error and state
            state = wait_for(held, "a round that compacted and reported the refused records", timeout=60)
            assert "the server cannot write its producer records (permission denied" in state.last_error
            assert warehouse not in state.last_error
            carrying = carried_by(warehouse)  # the six commits' snapshots (compactions may come between)
            assert len(carrying) == 6 and carrying[0] == 1, carrying  # every snapshot with the map kept
        assert expire_all_but_latest(client, "db.t").expired > 0  # fixed: the record is written, expiry goes on
        assert len(records(warehouse)) == 1
        write_batches(client, "db.t", "p", [6])
        wait_for(lambda: client.stats().maintenance["db.t"].last_error is None, "a round without error", timeout=60)
        assert client.producer_state("db.t", "p") == 6
    finally:
        client.close()
        server.stop()
