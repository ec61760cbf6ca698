"""The server SIGKILLed at random moments while it compacts and expires a table it writes, then
restarted: no committed row lost or doubled, no kept snapshot naming a deleted file, and the next
maintenance (after commits, and by hand) finishes what the killed one left."""

from __future__ import annotations

import uuid

from pypaimon import CatalogFactory

from chaos.harness import Context, Run, scenario, wrong_error
from chaos.ingest_faults import ROWS, named_batches_held
from producers import Client
from producers.examples.events import SCHEMA

PRODUCERS, BATCHES = 2, 60
OPTIONS = {"bucket": "2", "bucket-key": "id", "compaction.min.file-num": "3", "snapshot.num-retained.min": "2",
           "snapshot.num-retained.max": "6"}


KEYED = {"bucket": "2", "num-sorted-run.compaction-trigger": "3", "snapshot.num-retained.min": "2",
         "snapshot.num-retained.max": "6"}  # primary key (producer, id): merge-tree compaction


def kept_snapshots_read_whole(warehouse: str, table: str) -> str | None:
    """A sentence naming the first kept snapshot that cannot be read in full, else None (a
    primary-key snapshot's record count counts every version of a key: those are only read)."""
    t = CatalogFactory.create({"warehouse": warehouse}).get_table(table)
    manager = t.snapshot_manager()
    latest = manager.get_latest_snapshot()
    sid = latest.id
    while sid >= 1 and manager.get_snapshot_by_id(sid) is not None:
        snap = manager.get_snapshot_by_id(sid)
        rb = t.copy({"scan.snapshot-id": str(sid)}).new_read_builder()
        try:
            rows = rb.new_read().to_arrow(rb.new_scan().plan().splits()).num_rows
        except Exception as e:  # noqa: BLE001 - the finding this check reports
            return f"kept snapshot {sid} cannot be read: {str(e).splitlines()[0][:200]}"
        if rows != snap.total_record_count and not t.primary_keys:
            return f"kept snapshot {sid} reads {rows} rows, its record count is {snap.total_record_count}"
        sid -= 1
    return None


def _killed_while_maintaining(ctx: Context, keyed: bool = False) -> Run:
    port = ctx.free_port()
    args = ("--commit-interval-ms", "20", "--maintenance-interval-ms", "100", "--shutdown-timeout", "2")
    server = ctx.own_server(*args, port=port)
    uri = server.uri
    client = Client(uri, timeout=10)
    table = f"db.m{uuid.uuid4().hex[:8]}"
    if keyed:
        client.create_table(table, SCHEMA, primary_keys=["producer", "id"], options=KEYED)
    else:
        client.create_table(table, SCHEMA, options=OPTIONS)
    client.close()
    named = [ctx.python("-m", "chaos.producer", uri, f"paimon:{table}", "--producer", f"p{i}", "--batches",
                        str(BATCHES), "--rows", str(ROWS), "--rate", "40") for i in range(PRODUCERS)]
    for proc in named:
        if not proc.stdout.readline().startswith("sent"):
            raise wrong_error(f"a producer did not start: {proc.stderr.read()[-300:]}")
    ctx.sleep_random(0.3, 1.5)
    ctx.kill(server.proc)
    ctx.exited(server.proc, "the killed server")
    found = kept_snapshots_read_whole(ctx.warehouse(), table)  # what the kill left, before anything repairs it
    if found:
        raise wrong_error(f"after the kill: {found}")
    ctx.own_server(*args, port=port)
    for i, proc in enumerate(named):
        if ctx.exited(proc, f"named producer p{i} after the restart", timeout=60) != 0:
            raise wrong_error(f"named producer p{i} failed after the restart: {proc.stderr.read()[-300:]}")
    client = Client(uri, timeout=30)
    try:
        ctx.wait_for(lambda: not client.stats(table)["maintenance"].get(table, {"due": True})["due"],
                     "the restarted server's maintenance", timeout=60)
        state = client.stats(table)["maintenance"][table]
        if state["last_error"]:
            raise wrong_error(f"maintenance after the restart failed: {state['last_error']}")
        client.action("expire_snapshots", {"table": table})
    finally:
        client.close()
    found = kept_snapshots_read_whole(ctx.warehouse(), table)
    if found:
        raise wrong_error(f"after the restart: {found}")
    held, lost, duplicated = named_batches_held(ctx.warehouse(), table, PRODUCERS, BATCHES)
    return Run(detail=f"{len(held)} batches held; {state['compactions']} compactions, "
                      f"{state['files_deleted']} files deleted after the restart",
               lost=lost, duplicated=duplicated)


scenario("maintenance", "SIGKILL while compacting and expiring, restart",
         "durable named producers: exactly-once; every kept snapshot reads whole; maintenance resumes",
         short=2, full=20)(_killed_while_maintaining)


scenario("maintenance", "SIGKILL while merging a primary-key table and expiring, restart",
         "durable named producers into a merge tree: every row once; every kept snapshot reads; maintenance resumes",
         short=1, full=20)(lambda ctx: _killed_while_maintaining(ctx, keyed=True))
