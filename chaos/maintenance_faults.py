"""The server SIGKILLed at random moments while it compacts and expires a table it writes, then
restarted: no committed row lost or doubled, no kept snapshot naming a deleted file, and the next
maintenance (after commits, and by hand) finishes what the killed one left."""

from __future__ import annotations

import signal
import uuid

import psutil
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
        ctx.started(proc, "a producer")
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
        ctx.wait_for(lambda: not getattr(client.stats(table).maintenance.get(table), "due", True),
                     "the restarted server's maintenance", timeout=60)
        state = client.stats(table).maintenance[table]
        if state.last_error:
            raise wrong_error(f"maintenance after the restart failed: {state.last_error}")
        client.action("expire_snapshots", {"table": table})
    finally:
        client.close()
    found = kept_snapshots_read_whole(ctx.warehouse(), table)
    if found:
        raise wrong_error(f"after the restart: {found}")
    held, lost, duplicated = named_batches_held(ctx.warehouse(), table, PRODUCERS, BATCHES)
    return Run(detail=f"{len(held)} batches held; {state.compactions} compactions, "
                      f"{state.files_deleted} files deleted after the restart",
               lost=lost, duplicated=duplicated)


scenario("maintenance", "SIGKILL while compacting and expiring, restart",
         "durable named producers: exactly-once; every kept snapshot reads whole; maintenance resumes",
         short=1, full=20)(_killed_while_maintaining)


scenario("maintenance", "SIGKILL while merging a primary-key table and expiring, restart",
         "durable named producers into a merge tree: every row once; every kept snapshot reads; maintenance resumes",
         short=1, full=20)(lambda ctx: _killed_while_maintaining(ctx, keyed=True))


IDLE = {"bucket": "4", "bucket-key": "id", "compaction.min.file-num": "2", "snapshot.num-retained.min": "1",
        "snapshot.time-retained": "1 s"}  # the outside review's repro: short retention, several buckets


def carrying_snapshots(warehouse: str, table: str) -> list[int]:
    """The kept snapshots that carry a producer map (flight_server/ingest/seqs.py)."""
    from flight_server.ingest.seqs import PROPERTY
    from flight_server.paimon import compat

    manager = CatalogFactory.create({"warehouse": warehouse}).get_table(table).snapshot_manager()
    latest = manager.get_latest_snapshot()
    return [sid for sid in range(1, latest.id + 1)
            if (snap := compat.snapshot(manager, sid)) is not None and PROPERTY in (snap.properties or {})]


def _idle_past_retention(ctx: Context, outside: bool) -> Run:
    """A named producer's batches, then only commits that carry no producer map (the server's
    compactions, or pypaimon's own commits) until expiry has removed every snapshot that did; the
    server SIGKILLed or stopped at a random moment of that, restarted, and the producer resumes
    (it resends whatever producer_state says the table lacks)."""
    import pyarrow as pa

    from producers.examples import events
    from tests.paimon_tables import commit_arrow

    port = ctx.free_port()
    args = ("--commit-interval-ms", "20", "--maintenance-interval-ms", "100", "--shutdown-timeout", "2")
    server = ctx.own_server(*args, port=port)
    uri = server.uri
    client = Client(uri, timeout=30)
    table = f"db.i{uuid.uuid4().hex[:8]}"
    client.create_table(table, SCHEMA, options=IDLE)
    first = ctx.rnd.randint(5, BATCHES)
    proc = ctx.python("-m", "chaos.producer", uri, f"paimon:{table}", "--producer", "p0", "--batches", str(first),
                      "--rows", str(ROWS), "--rate", "80")
    if ctx.exited(proc, "the named producer", timeout=60) != 0:
        raise wrong_error(f"the named producer failed: {proc.stderr.read()[-300:]}")
    outside_batches = 0
    if outside:  # another writer: pypaimon itself, straight into the table
        t = CatalogFactory.create({"warehouse": ctx.warehouse()}).get_table(table)
        for k in range(ctx.rnd.randint(2, 5)):
            commit_arrow(t, pa.Table.from_batches([events.batch("outside", k, ROWS)]))
            outside_batches += 1
    else:
        client.compact(table)
    cut = ctx.rnd.random() < 0.5  # SIGKILL while expiry runs, else once every carrying snapshot is gone

    def expired_all() -> bool:
        client.expire_snapshots(table, retain_max=1, retain_min=1)
        return not carrying_snapshots(ctx.warehouse(), table)

    if cut:
        ctx.sleep_random(0.0, 1.5)
        ctx.kill(server.proc)
    else:
        ctx.wait_for(expired_all, "expiry to remove every snapshot that carried the producer map", timeout=60)
        if ctx.rnd.random() < 0.5:
            ctx.kill(server.proc)
        else:
            ctx.kill(server.proc, signal.SIGTERM)
    ctx.exited(server.proc, "the stopped server")
    client.close()
    found = kept_snapshots_read_whole(ctx.warehouse(), table)
    if found:
        raise wrong_error(f"after the stop: {found}")
    ctx.own_server(*args, port=port)
    client = Client(uri, timeout=30)
    try:
        ctx.wait_for(expired_all, "expiry after the restart", timeout=60)
    finally:
        client.close()
    again = ctx.python("-m", "chaos.producer", uri, f"paimon:{table}", "--producer", "p0", "--batches", str(BATCHES),
                       "--rows", str(ROWS))
    if ctx.exited(again, "the resumed producer", timeout=60) != 0:
        raise wrong_error(f"the resumed producer failed: {again.stderr.read()[-300:]}")
    held, lost, duplicated = named_batches_held(ctx.warehouse(), table, 1, BATCHES)
    lost += sum(ROWS for k in range(outside_batches) if held[("outside", k)] == 0)
    return Run(detail=f"{first} batches before, {'an outside writer' if outside else 'compaction'}, "
                      f"{'killed mid-expiry' if cut else 'stopped after expiry'}; {len(held)} batches held",
               lost=lost, duplicated=duplicated)


scenario("maintenance", "idle named producer past retention through compactions, stop, restart, resume",
         "the resumed producer writes nothing twice and loses nothing, whatever expired",
         short=1, full=20)(lambda ctx: _idle_past_retention(ctx, outside=False))


scenario("maintenance", "idle named producer past retention through an outside writer's commits, stop, restart",
         "the resumed producer writes nothing twice and loses nothing; the outside rows are all there once",
         short=1, full=20)(lambda ctx: _idle_past_retention(ctx, outside=True))


def _compaction_worker(server_pid: int):
    """The server's compaction worker process (spawned: its command line runs spawn_main), or None."""
    for child in psutil.Process(server_pid).children(recursive=True):
        try:
            if "spawn_main" in " ".join(child.cmdline()):
                return child
        except psutil.NoSuchProcess:
            continue
    return None


def _gone(process) -> bool:
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:  # reaped between the two calls
        return True


def _worker_killed(ctx: Context) -> Run:
    """SIGKILL the server's compaction worker at random moments (up to 3 times) while producers
    write and maintenance compacts: each kill fails a round; the next round starts another worker."""
    args = ("--commit-interval-ms", "20", "--maintenance-interval-ms", "100")
    server = ctx.own_server(*args)
    uri = server.uri
    client = Client(uri, timeout=30)
    table = f"db.w{uuid.uuid4().hex[:8]}"
    client.create_table(table, SCHEMA, options=OPTIONS)
    named = [ctx.python("-m", "chaos.producer", uri, f"paimon:{table}", "--producer", f"p{i}", "--batches",
                        str(BATCHES), "--rows", str(ROWS), "--rate", "40") for i in range(PRODUCERS)]
    for proc in named:
        ctx.started(proc, "a producer")
    kills = 0
    try:
        for _ in range(3):
            ctx.wait_for(lambda: _compaction_worker(server.proc.pid) is not None or all(
                p.poll() is not None for p in named), "a compaction worker", timeout=60)
            worker = _compaction_worker(server.proc.pid)
            if worker is None:
                break
            ctx.sleep_random(0.0, 1.0)
            try:
                worker.send_signal(signal.SIGKILL)
                kills += 1
            except psutil.NoSuchProcess:  # it ended by itself meanwhile: not a kill
                continue
            ctx.wait_for(lambda w=worker: _gone(w), "the killed worker")
        for i, proc in enumerate(named):
            if ctx.exited(proc, f"named producer p{i}", timeout=120) != 0:
                raise wrong_error(f"named producer p{i} failed: {proc.stderr.read()[-300:]}")
        client.action("compact", {"table": table})  # by hand, in a worker again: what the kills left
        ctx.wait_for(lambda: not getattr(client.stats(table).maintenance.get(table), "due", True),
                     "maintenance after the last commit", timeout=120)
        state = client.stats(table).maintenance[table]
        if state.last_error:
            raise wrong_error(f"maintenance after the kills failed: {state.last_error}")
    finally:
        client.close()
    found = kept_snapshots_read_whole(ctx.warehouse(), table)
    if found:
        raise wrong_error(found)
    held, lost, duplicated = named_batches_held(ctx.warehouse(), table, PRODUCERS, BATCHES)
    return Run(detail=f"{len(held)} batches held; worker killed {kills}x; {state.compactions} compactions",
               lost=lost, duplicated=duplicated)


scenario("maintenance", "compaction worker SIGKILLed mid-rewrite, up to 3 times",
         "durable named producers: exactly-once; every kept snapshot reads whole; the next round starts "
         "another worker", short=1, full=20)(_worker_killed)
