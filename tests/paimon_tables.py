"""Test helpers: real Paimon tables written with pypaimon, and Flight reads of them with timeouts."""

from __future__ import annotations

import json
import queue
import threading

import pyarrow as pa
import pyarrow.flight as flight
from pypaimon import CatalogFactory, Schema

from flight_server.wire import messages
from tests.conftest import wait_for

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()), ("region", pa.string())])
REGIONS = ["eu", "us", "apac"]


def commit_arrow(table, data: pa.Table) -> int:
    """Write `data` to the pypaimon `table` in one commit; return the snapshot id it made."""
    builder = table.new_batch_write_builder()
    writer, committer = builder.new_write(), builder.new_commit()
    try:
        writer.write_arrow(data)
        committer.commit(writer.prepare_commit())
    finally:
        writer.close()
        committer.close()
    return table.snapshot_manager().get_latest_snapshot().id


class Warehouse:
    """A pypaimon catalog over the test's warehouse directory."""

    def __init__(self, path: str):
        self.catalog = CatalogFactory.create({"warehouse": path})
        self.catalog.create_database("db", True)

    def create(self, name: str, buckets: int = 4, primary_keys=None, partition_keys=None, options=None) -> str:
        opts = {"bucket": str(buckets), **(options or {})}
        if buckets > 0 and not primary_keys:
            opts["bucket-key"] = "id"
        schema = Schema.from_pyarrow_schema(SCHEMA, primary_keys=primary_keys, partition_keys=partition_keys, options=opts)
        self.catalog.create_table(f"db.{name}", schema, False)
        return f"db.{name}"

    def commit(self, table: str, data: pa.Table) -> int:
        """Write one commit; return the snapshot it made."""
        return commit_arrow(self.catalog.get_table(table), data)

    def read(self, table: str, snapshot: int | None = None) -> pa.Table:
        """pypaimon's own full read: the reference the Flight reads must match."""
        t = self.catalog.get_table(table)
        if snapshot is not None:
            t = t.copy({"scan.snapshot-id": str(snapshot)})
        rb = t.new_read_builder()
        return rb.new_read().to_arrow(rb.new_scan().plan().splits())


def rows(start: int, count: int, tag: str = "v") -> pa.Table:
    ids = list(range(start, start + count))
    return pa.table({
        "id": pa.array(ids, pa.int64()),
        "name": [f"{tag}{i}" for i in ids],
        "amount": pa.array([i * 0.5 for i in ids], pa.float64()),
        "region": [REGIONS[i % 3] for i in ids],
    }, schema=SCHEMA)


def sort_rows(table: pa.Table, keys=("id", "name")) -> list[dict]:
    keys = [k for k in keys if k in table.column_names] or table.column_names[:1]
    return table.sort_by([(k, "ascending") for k in keys]).to_pylist()


def command(cmd: dict) -> flight.FlightDescriptor:
    return flight.FlightDescriptor.for_command(json.dumps(cmd))


def info(client, descriptor) -> flight.FlightInfo:
    return client.flight.get_flight_info(descriptor, options=client.options())


def read_all(client, descriptor, timeout: float = 30) -> tuple[flight.FlightInfo, pa.Table]:
    """Every endpoint of the descriptor, read in turn and concatenated."""
    fi = info(client, descriptor)
    batches = []
    for ep in fi.endpoints:
        reader = client.flight.do_get(ep.ticket, options=client.options(timeout))
        batches += [c.data for c in reader]
    return fi, pa.Table.from_batches(batches, schema=fi.schema)


class Follower:
    """Reads one follow endpoint in a thread: (snapshot, rows) in arrival order until cancelled.

    `done` is the last `{"done": N}` progress mark the endpoint sent (0 before the first).
    """

    def __init__(self, client, endpoint, timeout: float = 60):
        self.reader = client.flight.do_get(endpoint.ticket, options=client.options(timeout))
        self.items: queue.Queue = queue.Queue()
        self.received: list[tuple[int, pa.RecordBatch]] = []
        self.error: BaseException | None = None
        self.done = 0
        self.thread = threading.Thread(target=self._run, daemon=True, name="test-follower")
        self.thread.start()

    def _run(self):
        try:
            while True:
                chunk = self.reader.read_chunk()
                mark = messages.read_mark(chunk.app_metadata)
                if mark.done is not None:
                    assert chunk.data.num_rows == 0, "a done mark rides on a zero-row batch"
                    self.done = mark.done
                    continue
                self.items.put((mark.snapshot, chunk.data))
        except StopIteration:
            pass
        except BaseException as e:  # noqa: BLE001 - cancelled by the test, or a real failure to report
            self.error = e

    def take(self) -> list[tuple[int, pa.RecordBatch]]:
        """`received`, with everything that has arrived by now added (waits for nothing)."""
        while True:
            try:
                self.received.append(self.items.get_nowait())
            except queue.Empty:
                return self.received

    def wait_rows(self, n: int, timeout: float = 30) -> list[tuple[int, pa.RecordBatch]]:
        """Block until `n` rows in total have arrived (or fail the test, at once if the follow failed)."""

        def arrived() -> bool:
            error = self.error  # read first: the reader thread queues every batch before it sets it
            if self.rows() >= n:
                return True
            assert error is None, f"the follow failed after {self.rows()} of {n} rows: {error!r}"
            return False

        wait_for(arrived, lambda: f"{n} rows from the follow (got {self.rows()})", timeout)
        return self.received

    def drain_until_done(self, snapshot: int, timeout: float = 30) -> list[tuple[int, pa.RecordBatch]]:
        """Everything up to the endpoint's `{"done": N}` mark for N >= `snapshot` (its rows came before
        it): the positive proof that nothing more of snapshots <= N is on its way."""

        def done() -> bool:
            assert self.error is None, f"the follow failed: {self.error!r}"
            return self.done >= snapshot

        wait_for(done, lambda: f"the follow's done mark to reach {snapshot} (it is at {self.done})", timeout)
        return self.take()

    def rows(self) -> int:
        return sum(b.num_rows for _, b in self.take())

    def cancel(self):
        self.reader.cancel()
        self.thread.join(10)
