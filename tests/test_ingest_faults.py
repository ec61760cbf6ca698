"""Durable ingest under faults: real server processes SIGKILLed and restarted, real producer
processes killed mid-stream, real pypaimon tables. (Named producers through repeated server
SIGKILLs: chaos/ingest_faults.py, 5 kills in tests/test_chaos.py and 20 in scripts/chaos.py.)"""

from __future__ import annotations

import collections
import signal
import socket
import subprocess
import sys
import threading

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from producers import Client
from producers.examples.events import SCHEMA, batch
from tests.conftest import wait_for
from tests.process import ROOT, ServerProcess, child_env

ROWS = 200


def table_rows(client: Client, table: str) -> pa.Table:
    info = client.flight.get_flight_info(flight.FlightDescriptor.for_path("paimon", table))
    return pa.concat_tables([client.flight.do_get(e.ticket).read_all() for e in info.endpoints])


def batches_held(table: pa.Table) -> collections.Counter:
    """(producer, seq) -> rows the table holds of that batch."""
    return collections.Counter(zip(table.column("producer").to_pylist(), table.column("seq").to_pylist()))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client_state(uri: str, producer: str) -> int | None:
    return Client(uri, timeout=10).producer_state("db.events", producer)


@pytest.mark.timeout(120)
def test_a_producer_killed_mid_stream_leaves_its_acked_batches_and_no_partial_one(server_process):
    client = Client(server_process.uri, timeout=10)
    client.create_table("db.events", SCHEMA, options={"bucket": "2", "bucket-key": "id"})
    argv = [sys.executable, "-m", "producers.examples.events", "db.events", "--uri", server_process.uri,
            "--producer", "k1", "--batches", "100000", "--rows", str(ROWS)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=child_env(), cwd=ROOT)
    acked = None
    try:
        assert proc.stdout.readline().strip() == "resume None"
        while acked is None or acked < 5:
            line = proc.stdout.readline()
            assert line.startswith("acked "), line
            acked = int(line.split()[1])
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait(10)
    # The killed stream is released once the server has read what its socket held: only then is
    # every batch it will commit taken, and producer_state (which waits for those) final.
    wait_for(lambda: "k1" not in client.stats("db.events").paimon_writes["db.events"].named_producers_writing,
             "the killed producer's stream to be released", timeout=60)
    last = client.producer_state("db.events", "k1")  # once what the server wrote of the stream has landed
    held = batches_held(table_rows(client, "db.events"))
    assert all(("k1", s) in held for s in range(acked + 1)), "an acked batch is missing"
    assert set(held.values()) == {ROWS}, f"a partial batch: {[(k, v) for k, v in held.items() if v != ROWS][:3]}"
    assert last >= acked and sorted(s for _, s in held) == list(range(last + 1))

    # Restarted, it resumes after last_seq: every batch once.
    argv[argv.index("--batches") + 1] = str(last + 4)  # four more than the table holds
    done = subprocess.run(argv, capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0] == f"resume {last}"
    assert done.stdout.splitlines()[-1].startswith(f"done: the table holds batches 0..{last + 3} of k1")
    held = batches_held(table_rows(client, "db.events"))
    assert dict(held) == {("k1", s): ROWS for s in range(last + 4)}


@pytest.mark.timeout(180)
def test_a_producer_reconnecting_prints_only_its_own_lines_on_stdout(warehouse):
    """The client library logs through the standard library, so a producer whose stdout is data
    (`resume`, `acked`) keeps it clean through a server kill, its retried calls and its reconnect:
    nothing unconfigured lands on stdout."""
    port = free_port()
    server = ServerProcess(warehouse, "--port", str(port))
    Client(server.uri, timeout=10).create_table("db.events", SCHEMA)
    argv = [sys.executable, "-m", "producers.examples.events", "db.events", "--uri", server.uri,
            "--producer", "q1", "--batches", "100000", "--rows", str(ROWS), "--rate", "20"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=child_env(), cwd=ROOT)
    try:
        lines = [proc.stdout.readline()]
        while not lines[-1].startswith("acked "):
            assert lines[-1], f"the producer ended before an ack: {proc.stderr.read()[-2000:]}"
            lines.append(proc.stdout.readline())
        server.proc.send_signal(signal.SIGKILL)
        server.proc.wait(10)
        server = ServerProcess(warehouse, "--port", str(port))
        before = client_state(server.uri, "q1")
        # New batches land only once the producer has retried, reconnected and resent.
        wait_for(lambda: client_state(server.uri, "q1") >= before + 3, "batches written after the restart",
                 timeout=120)
        proc.kill()
        lines += proc.stdout.readlines()  # (not communicate(): it would skip what readline buffered)
    finally:
        proc.kill()
        proc.wait(30)
        server.stop()
    foreign = [line for line in lines if not line.startswith(("resume ", "acked "))]
    assert foreign == [], f"stdout holds lines that are not the producer's: {foreign[:3]}"


@pytest.fixture
def small_disk(tmp_path):
    """A 64 MiB tmpfs (root only): a warehouse whose disk can be filled."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", "-l", str(mount)], check=True)


@pytest.mark.timeout(120)
def test_full_disk_fails_every_waiting_producer_within_seconds_and_they_resume_once_freed(small_disk):
    """Producers that keep many small batches unacked wait for acks, not to send: when the disk
    fills, each learns from its acks that its stream failed (a stream the server can only fail
    from its ack side), acked rows stay readable, and the same producers resume once space is freed."""
    warehouse = small_disk / "warehouse"
    warehouse.mkdir()
    server = ServerProcess(str(warehouse))
    client = Client(server.uri, timeout=10)
    try:
        client.create_table("db.events", SCHEMA)
        filler = small_disk / "filler"
        with open(filler, "wb") as f:  # leave about 256 KiB: a few commits' files
            f.write(b"\0" * ((64 << 20) - 256 * 1024 - sum(p.stat().st_size for p in warehouse.rglob("*"))))
        failed: dict[str, str] = {}

        def produce(name: str) -> None:
            with pytest.raises(Exception) as caught:  # noqa: PT011 - the message is checked below
                with client.paimon_sink("db.events", producer=name, max_unacked=64) as sink:
                    for seq in range(100_000):
                        sink.write(batch(name, seq, 100))
            failed[name] = str(caught.value)

        producers = [threading.Thread(target=produce, args=(f"p{i}",), daemon=True) for i in range(3)]
        for t in producers:
            t.start()
        wait_for(lambda: len(failed) == 3, "every producer's error", timeout=60)
        for name, message in failed.items():
            assert "No space left on device" in message, (name, message)
        held = batches_held(table_rows(client, "db.events"))
        assert held, "nothing acked before the disk filled is readable"
        target = {}
        for i in range(3):  # what the table holds of each producer: seqs 0..k, each batch whole, once
            seqs = sorted(seq for (p, seq) in held if p == f"p{i}")
            assert seqs == list(range(len(seqs))) and all(held[(f"p{i}", s)] == 100 for s in seqs)
            target[f"p{i}"] = len(seqs) + 20
        filler.unlink()
        for name, end in target.items():
            with client.paimon_sink("db.events", producer=name) as sink:
                for seq in range((sink.last_seq if sink.last_seq is not None else -1) + 1, end):
                    sink.write(batch(name, seq, 100))
        held = batches_held(table_rows(client, "db.events"))
        assert held == {(name, seq): 100 for name, end in target.items() for seq in range(end)}
    finally:
        client.close()
        server.stop()
