"""Compactions rewrite files in a worker process, off the serving interpreter: the server's own
process never runs a rewrite, a killed worker fails one round and the next starts another, and
readers see every row exactly once throughout."""

from __future__ import annotations

import os
import signal

import psutil
import pyarrow.flight as flight
import pytest

from flight_server.maintenance import store as store_module
from flight_server.wire import names
from producers import Client
from tests.conftest import RunningServer, wait_for
from tests.paimon_tables import command, read_all
from tests.test_ingest import SCHEMA as INGEST_SCHEMA
from tests.test_ingest import put_raw
from tests.test_ingest import rows as ingest_rows
from tests.test_maintenance import ingest, maintenance, settled

pytestmark = pytest.mark.timeout(240)


@pytest.fixture
def with_worker(warehouse, monkeypatch):
    """A fast-maintaining server whose compactions rewrite in a worker process; a rewrite or merge
    in this process fails the test."""
    def not_here(*_args, **_kwargs):
        raise AssertionError("a compaction rewrote files in the serving process")

    monkeypatch.setattr(store_module.TableStore, "rewrite", not_here)
    monkeypatch.setattr(store_module.TableStore, "merge", not_here)
    running = RunningServer(warehouse, commit_interval_ms=5, maintenance_workers=1)
    running.server.maintainer.round_s = 0.05
    running.server.maintainer.settle_s = 0.2
    client = Client(running.uri, timeout=60)
    yield running, client
    client.close()
    running.stop()


def expected(batches) -> list[int]:
    return sorted(i for b in batches for i in ingest_rows(b, 20).column("id").to_pylist())


def test_compactions_of_append_and_primary_key_tables_run_in_a_worker_process(with_worker):
    running, client = with_worker
    client.create_table("db.a", INGEST_SCHEMA, options={"bucket": "1", "bucket-key": "id"})
    client.create_table("db.k", INGEST_SCHEMA, primary_keys=["id"], options={"bucket": "1"})
    for table in ("db.a", "db.k"):
        ingest(client, table, range(12))
    for table in ("db.a", "db.k"):
        wait_for(lambda: settled(client, table) and maintenance(client, table).compactions >= 1,
                 f"a compaction of {table}", timeout=120)
        state = maintenance(client, table)
        assert state.last_error is None and state.data_files == 1, state
        _, whole = read_all(client, command({"table": table}))
        assert sorted(whole.column("id").to_pylist()) == expected(range(12))
    worker = running.server.maintainer.worker
    assert worker.started == 1 and worker.pid not in (None, os.getpid())


def test_a_worker_killed_mid_rewrite_fails_one_round_and_the_next_starts_another(with_worker):
    running, client = with_worker
    worker = running.server.maintainer.worker
    running.server.maintainer.settle_s = 3600  # only the tier rule: five large files, one rewrite of seconds
    # files of a few MB, below a 16th of the target: tiny, and they add up to that 16th
    client.create_table("db.t", INGEST_SCHEMA, options={"bucket": "1", "bucket-key": "id", "target-file-size": "64 mb"})
    descriptor = flight.FlightDescriptor.for_path(*names.paimon_path("db.t"))
    big = [ingest_rows(b, 600_000) for b in range(5)]
    for batch in big:
        put_raw(client, descriptor, [batch])
    wait_for(lambda: worker.pid is not None, "the compaction worker", 120)
    process = psutil.Process(worker.pid)
    started = process.cpu_times().user  # it has started up (pypaimon imported) before it says ready
    wait_for(lambda: process.cpu_times().user > started + 0.3, "the worker rewriting", 120)
    os.kill(process.pid, signal.SIGKILL)
    wait_for(lambda: "compaction worker process ended" in (maintenance(client, "db.t").last_error or ""),
             lambda: f"the round's error naming the worker: {maintenance(client, 'db.t')}", 120)
    assert maintenance(client, "db.t").compactions == 0
    running.server.maintainer.settle_s = 0.2
    put_raw(client, descriptor, [ingest_rows(5, 20)])  # a commit asks for the next round
    wait_for(lambda: worker.started == 2 and settled(client, "db.t") and maintenance(client, "db.t").compactions == 1
             and maintenance(client, "db.t").last_error is None,
             lambda: f"a round in a new worker: {maintenance(client, 'db.t')}", 180)
    _, whole = read_all(client, command({"table": "db.t"}))
    assert sorted(whole.column("id").to_pylist()) == sorted(
        i for b in [*big, ingest_rows(5, 20)] for i in b.column("id").to_pylist())


def test_the_workers_rewrites_keep_no_footers_of_the_files_they_read(paimon, warehouse):
    """pypaimon keeps every data file it reads (its Parquet footer, as a pyarrow Dataset) in a
    process-wide cache of up to 4,096 files; a rewrite reads each file once before it is
    replaced, so in the worker that cache only grew (~40 KiB of RSS a file): its catalog turns it off."""
    from pypaimon.read.reader import format_pyarrow_reader as footers

    from flight_server.maintenance import workers
    from flight_server.paimon import compat
    from tests.paimon_tables import rows

    name = paimon.create("t", buckets=-1)
    for i in range(5):
        paimon.commit(name, rows(i * 10, 10))

    def rewrite(catalog) -> set[str]:
        table = catalog.get_table(name)
        store = store_module.TableStore(table, name)
        files = [f for group in store.live_files(store.latest()).values() for f in group]
        assert len(files) == 5
        workers._rewrite(catalog, name, table.table_schema.id, files)
        return {f.name for f in files}

    def cached() -> set[str]:
        cache = footers._FILE_FORMAT_DATASET_CACHE
        return set() if cache is None else {key[2].rsplit("/", 1)[-1] for key in list(cache._entries)}

    read = rewrite(compat.create_catalog(warehouse))  # pypaimon's default, as the serving process reads
    assert read <= cached()
    read = rewrite(workers.worker_catalog(warehouse, {}))
    assert not read & cached()
