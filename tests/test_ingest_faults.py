"""Durable ingest under faults: real server processes SIGKILLed and restarted, real producer
processes killed mid-stream, real pypaimon tables."""

from __future__ import annotations

import collections
import random
import signal
import socket
import subprocess
import sys
import threading

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from flight_server.cli.process import ROOT, ServerProcess, child_env
from producers import Client
from tests.conftest import wait_for
from producers.examples.events import SCHEMA, batch

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


@pytest.mark.timeout(300)
def test_four_named_producers_survive_20_server_sigkills_with_every_batch_exactly_once(warehouse):
    """The server is SIGKILLed at random points 20 times and restarted on the same port; each
    producer's sink reconnects, asks producer_state and resends only what the table lacks."""
    rng = random.Random(20261122)
    port = free_port()
    server = ServerProcess(warehouse, "--port", str(port), "--commit-interval-ms", "50")
    client = Client(server.uri, timeout=10)
    client.create_table("db.events", SCHEMA)
    per_producer = 100
    # Two batches in flight per producer: the pushing is paced by commits, so kills land mid-stream.
    sinks = [client.paimon_sink("db.events", producer=f"p{i}", reconnect_timeout=60, max_unacked=2)
             for i in range(4)]
    errors: list[BaseException] = []

    def produce(i: int) -> None:
        try:
            for seq in range(per_producer):
                sinks[i].write(batch(f"p{i}", seq, ROWS))
            sinks[i].close()
        except BaseException as e:  # noqa: BLE001 - reported by the test below
            errors.append(e)

    threads = [threading.Thread(target=produce, args=(i,), daemon=True) for i in range(4)]
    for t in threads:
        t.start()
    try:
        for kill in range(20):
            # A random point: after a random number of further acks (the producers are live).
            target = sum(s.acked for s in sinks) + rng.randint(1, 12)
            wait_for(lambda: sum(s.acked for s in sinks) >= target or errors, f"acks before kill {kill}", timeout=60)
            assert not errors, errors
            assert any(t.is_alive() for t in threads), f"the producers finished before kill {kill}"
            server.proc.send_signal(signal.SIGKILL)
            server.proc.wait(10)
            server = ServerProcess(warehouse, "--port", str(port), "--commit-interval-ms", "50")
        for t in threads:
            t.join(120)
        assert not errors, errors
        assert not any(t.is_alive() for t in threads)
        held = batches_held(table_rows(Client(server.uri, timeout=30), "db.events"))
        expected = {(f"p{i}", s): ROWS for i in range(4) for s in range(per_producer)}
        assert dict(held) == expected, (
            f"missing {sorted(set(expected) - set(held))[:5]}, "
            f"duplicated {[k for k, v in held.items() if v != ROWS][:5]}")
        assert [client_state(server.uri, f"p{i}") for i in range(4)] == [per_producer - 1] * 4
        assert sum(s.reconnects for s in sinks) >= 20, "the producers did not see the kills"
    finally:
        server.stop()


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
    held = batches_held(table_rows(client, "db.events"))
    assert all(("k1", s) in held for s in range(acked + 1)), "an acked batch is missing"
    assert set(held.values()) == {ROWS}, f"a partial batch: {[(k, v) for k, v in held.items() if v != ROWS][:3]}"
    last = client.producer_state("db.events", "k1")
    assert last >= acked and sorted(s for _, s in held) == list(range(last + 1))

    # Restarted, it resumes after last_seq: every batch once.
    argv[argv.index("--batches") + 1] = str(last + 4)  # four more than the table holds
    done = subprocess.run(argv, capture_output=True, text=True, env=child_env(), cwd=ROOT, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[0] == f"resume {last}"
    assert done.stdout.splitlines()[-1].startswith(f"done: the table holds batches 0..{last + 3} of k1")
    held = batches_held(table_rows(client, "db.events"))
    assert dict(held) == {("k1", s): ROWS for s in range(last + 4)}
