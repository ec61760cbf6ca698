"""Named producers' last committed sequence numbers: in the table's snapshots, and in a record beside
them that outlives every snapshot.

Every group commit carries the whole map `{producer: last seq}` in the snapshot property
`flight-paimon.producer-seqs`, written atomically with the rows (Paimon's snapshot properties). A
snapshot does not live for ever: compaction, other writers (pypaimon, Spark, Java Paimon) and the
server's own maintenance commit snapshots that carry no map, and expiry then removes the ones that
did. So the map is also kept in a *record*: a small immutable JSON file under the table's
`flight-paimon/producers/` directory (a directory Paimon's own procedures never touch) saying
"every snapshot up to S holds at most these seqs". The record is brought up to date at each
maintenance round after commits (when the map changed), whenever expiry is about to remove a
snapshot it does not yet cover (expiry is bounded by it: `covered_through`), at a clean stop and
at a start that found the map beyond it. What the table holds of a producer is then always the
records merged with the maps of the snapshots after them, whatever expired.

Records are immutable and named by the snapshot they cover, so servers sharing a table never
overwrite each other's: each deletes only records it has read or written and a newer record of its
own subsumes. `seen` is the snapshot through which every snapshot's map is merged (a commit of
another writer that landed between our refresh and our own commit is read at the next refresh).
"""

from __future__ import annotations

import json
import threading
import uuid

import structlog

from flight_server.paimon import compat
from flight_server.wire.errors import StorageFailed

log = structlog.get_logger(__name__)

PROPERTY = "flight-paimon.producer-seqs"
RECORD_DIR = compat.PRODUCER_RECORDS  # under the table's directory
RECORD_PREFIX = "seqs-"
READ_ATTEMPTS = 20  # a record listed then deleted (subsumed by a newer one): list again


class RecordsUnwritable(StorageFailed):
    """The warehouse refused a producer record (permission denied, no space left). The acks rest
    on the snapshots, so writes go on; only expiry waits: `covered` is the snapshot through which
    the records already on disk give the whole map (what expiry may still remove)."""

    def __init__(self, message: str, covered: int, **detail):
        super().__init__(message, **detail)
        self.covered = covered


class ProducerSeqs:
    """The producer map of one table, as of the snapshot `seen` (None: the table has none)."""

    def __init__(self, table):
        self._table = table
        self._files = compat.TableFiles(table)
        self._dir = self._files.path(RECORD_DIR)  # for the log and errors
        self._lock = threading.Lock()  # the map
        self._walk = threading.RLock()  # refreshes, commits and records, one at a time
        self._seqs: dict[str, int] = {}
        self._snapshot_of: dict[str, int] = {}  # the snapshot that holds each producer's last seq
        self._recorded: dict[str, int] = {}  # what the records on disk hold
        self._record_files: set[str] = set()  # records read or written here: subsumed by our next one
        self._covered = 0  # the snapshot through which the records on disk give the whole map
        self._failing: str | None = None  # why the last record could not be written (logged once)
        self.seen: int | None = None
        self._seen_time: int | None = None  # the commit time of snapshot `seen` (None: not read yet)
        self.latest: int | None = None  # the newest snapshot known here (committed here, or read)
        self._load()

    def last_seq(self, producer: str) -> int | None:
        with self._lock:
            return self._seqs.get(producer)

    def snapshot_of(self, producer: str) -> int | None:
        """The snapshot as of which the table holds every batch up to the producer's last seq."""
        with self._lock:
            return self._snapshot_of.get(producer)

    def properties(self, updates: dict[str, int]) -> dict[str, str]:
        """The snapshot properties of a commit that holds `updates` (producer -> its highest seq in it)."""
        with self._lock:
            merged = dict(self._seqs)
        for producer, seq in updates.items():
            merged[producer] = max(seq, merged.get(producer, seq))
        return {PROPERTY: json.dumps(merged, sort_keys=True, separators=(",", ":"))}

    def committed(self, updates: dict[str, int], snapshot: int | None) -> None:
        """`updates` are in the table as of `snapshot` (None: zero-row batches on an empty table)."""
        with self._walk:
            with self._lock:
                for producer, seq in updates.items():
                    if seq > self._seqs.get(producer, -1):
                        self._seqs[producer] = seq
                        self._snapshot_of[producer] = snapshot
            if snapshot is not None and snapshot == (self.seen or 0) + 1:
                self.seen, self._seen_time = snapshot, None  # else another writer committed before ours: the next refresh reads it
            if snapshot is not None:
                self.latest = max(snapshot, self.latest or 0)

    def refresh(self, latest=None) -> bool:
        """Merge the maps of snapshots committed since `seen` (by anyone); where some of those
        expired meanwhile, the records (which expiry never runs ahead of) too. A table rolled back
        below `seen` (by another tool: Paimon's `rollback_to`), or rolled back and committed to
        again (snapshot `seen` has another commit time), is read anew: the snapshots it lost no
        longer count. `latest`: the table's latest snapshot, when the caller has just read it.
        False when the table has no snapshot."""
        with self._walk:
            manager = self._table.snapshot_manager()
            latest = latest if latest is not None else manager.get_latest_snapshot()
            if latest is None:
                if self.seen is not None:
                    self._reset()  # every snapshot is gone: nothing is held
                return False
            if self._rolled_back(latest, manager):
                log.warning("producer_map_reloaded", table=str(self._table.table_path), seen=self.seen,
                            latest=latest.id, reason="the table was rolled back below what this server saw")
                self._reset()
                self._load()
                return True
            if self.seen is not None and latest.id <= self.seen:
                return True
            start = (self.seen or 0) + 1
            earliest = compat.earliest_snapshot_id(manager) or start
            gone = earliest > start
            for sid in range(max(start, earliest), latest.id + 1):
                snap = latest if sid == latest.id else compat.snapshot(manager, sid)
                if snap is not None:
                    self._merge(snap)
                else:
                    gone = True  # expired while we walked
            if gone:  # expiry never runs ahead of the records: they hold what those snapshots said
                self._merge_records(self._read_records())
            self.seen, self._seen_time = latest.id, latest.time_millis
            self.latest = max(latest.id, self.latest or 0)
            return True

    def _rolled_back(self, latest, manager) -> bool:
        """Whether the snapshots up to `seen` are no longer the ones this map merged."""
        if self.seen is None:
            return False
        if latest.id < self.seen:
            return True
        snap = latest if latest.id == self.seen else compat.snapshot(manager, self.seen)
        if snap is None:  # expired: a rollback cannot go below the earliest snapshot kept
            return False
        if self._seen_time is None:  # committed here: its time is read once
            self._seen_time = snap.time_millis
            return False
        return snap.time_millis != self._seen_time

    def _reset(self) -> None:
        """Forget the map (the records read or written here stay ours to replace)."""
        with self._lock:
            self._seqs.clear()
            self._snapshot_of.clear()
            self._recorded.clear()
        self.seen = self._seen_time = self.latest = None

    def checkpoint(self) -> int:
        """Bring the record up to date with every snapshot to the latest (written only when the
        map holds more than the records do); returns the snapshot through which the records now
        give the whole map: expiry may remove snapshots up to it and lose nothing.
        RecordsUnwritable when the warehouse refuses the record (its `covered` still says how far
        the records on disk go); the map itself is unharmed."""
        with self._walk:
            if not self.refresh():
                return self.seen or 0  # no snapshot (dropped meanwhile): nothing to keep, no directory to make
            with self._lock:
                changed = self._seqs != self._recorded
            if changed:
                self._write_record()
            return self.seen or 0

    @property
    def name(self) -> str:
        return compat.snapshots.table_name(self._table)

    def _load(self) -> None:
        """The records, then the maps of the snapshots after them (without records, as before
        there were any: the latest snapshot that carries a map, walking back past other writers'
        commits)."""
        self._covered = 0  # until a valid record is merged (after a rollback the old ones are not)
        records = self._read_records()  # before the latest snapshot: none can cover one after it
        manager = self._table.snapshot_manager()
        latest = manager.get_latest_snapshot()
        if latest is None:
            return
        covered = self._valid_cover(records, latest, manager)
        earliest = compat.earliest_snapshot_id(manager) or latest.id
        if covered is not None:
            self._merge_records(records)
            gone = False
            for sid in range(max(covered + 1, earliest), latest.id + 1):
                snap = latest if sid == latest.id else compat.snapshot(manager, sid)
                if snap is not None:
                    self._merge(snap)
                else:
                    gone = True
            if gone:  # expired while we walked: by another server, after its newer record
                self._merge_records(self._read_records())
        else:
            self._record_files.update(r["name"] for r in records)  # replaced by the next record
            for sid in range(latest.id, earliest - 1, -1):
                snap = latest if sid == latest.id else compat.snapshot(manager, sid)
                if snap is not None and PROPERTY in (snap.properties or {}):
                    self._merge(snap)
                    break
        self.seen, self._seen_time, self.latest = latest.id, latest.time_millis, latest.id
        with self._lock:  # everything the table holds is in it as of the latest snapshot
            self._snapshot_of = {p: latest.id for p in self._seqs}
            beyond = self._seqs != self._recorded
        if beyond:  # the map lives only in snapshots: record it before anything can expire them
            try:
                self._write_record()
            except RecordsUnwritable:  # logged; the snapshots hold the map, and expiry waits for a record
                pass

    def _valid_cover(self, records: list[dict], latest, manager) -> int | None:
        """The snapshot the newest record covers, or None when there is none or the table's history
        changed under it (rolled back, or created again in place): then the records are ignored."""
        if not records:
            return None
        newest = max(records, key=lambda r: r["snapshot"])
        snap = compat.snapshot(manager, newest["snapshot"]) if newest["snapshot"] <= latest.id else None
        moved = snap is not None and newest["snapshot_time_ms"] and snap.time_millis != newest["snapshot_time_ms"]
        if newest["snapshot"] > latest.id or moved:
            log.warning("producer_records_ignored", table=str(self._table.table_path), record=newest["name"],
                        record_snapshot=newest["snapshot"], latest=latest.id,
                        reason="the table's snapshots changed under the record (rolled back or created again)")
            return None
        return newest["snapshot"]

    def _merge(self, snap) -> None:
        raw = (snap.properties or {}).get(PROPERTY)
        if raw is None:
            return
        try:
            seqs = json.loads(raw)
        except ValueError as e:
            raise ValueError(f"snapshot {snap.id} has a {PROPERTY} property that is not JSON: {e}") from e
        self._merge_seqs(seqs, snap.id)

    def _merge_seqs(self, seqs: dict, snapshot: int) -> None:
        with self._lock:
            for producer, seq in seqs.items():
                if isinstance(seq, int) and seq > self._seqs.get(producer, -1):
                    self._seqs[producer] = seq
                    self._snapshot_of[producer] = snapshot

    def _merge_records(self, records: list[dict]) -> None:
        for record in records:
            self._merge_seqs(record["seqs"], record["snapshot"])
            self._record_files.add(record["name"])
            self._covered = max(self._covered, record["snapshot"])
            for producer, seq in record["seqs"].items():
                if seq > self._recorded.get(producer, -1):
                    self._recorded[producer] = seq

    def _read_records(self) -> list[dict]:
        """Every record file, parsed. One listed and then deleted (a newer record subsumed it) is
        looked for again: the newer one is listed then."""
        for _ in range(READ_ATTEMPTS):
            try:
                return [self._read_record(name) for name in self._files.names(RECORD_DIR)
                        if name.startswith(RECORD_PREFIX) and name.endswith(".json")]
            except FileNotFoundError:
                continue
        raise RuntimeError(f"the producer records under {self._dir} kept changing while read "
                           f"({READ_ATTEMPTS} attempts); retry")

    def _read_record(self, name: str) -> dict:
        path = f"{self._dir}/{name}"
        text = self._files.read_text(RECORD_DIR, name)
        try:
            record = json.loads(text)
            seqs = {str(p): int(s) for p, s in record["seqs"].items()}
            return {"name": name, "snapshot": int(record["snapshot"]),
                    "snapshot_time_ms": int(record["snapshot_time_ms"]), "seqs": seqs}
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"the producer record {path} is not a valid record ({e}); it was written whole or "
                             "not at all, so something else wrote it: move it away and restart") from e

    def _write_record(self) -> None:
        """A new record of the map as of `seen`, then the records it subsumes deleted."""
        manager = self._table.snapshot_manager()
        sid = self.seen or 0
        snap = compat.snapshot(manager, sid) if sid else None
        if snap is None:  # expired already: the latest one is covered too (refresh merges it)
            if not self.refresh():
                return  # no snapshot (dropped meanwhile): no directory to make
            sid = self.seen or 0
            snap = compat.snapshot(manager, sid)
        with self._lock:  # after any refresh: what the record claims is what was merged
            seqs = dict(self._seqs)
        name = f"{RECORD_PREFIX}{sid:020d}-{uuid.uuid4().hex[:12]}.json"
        body = {"snapshot": sid, "snapshot_time_ms": snap.time_millis if snap is not None else 0, "seqs": seqs}
        try:
            self._files.write_whole(RECORD_DIR, name, json.dumps(body, sort_keys=True))
        except OSError as e:
            raise self._unwritable(e, sid) from e
        if self._failing is not None:
            log.info("producer_record_written_again", table=self.name, dir=self._dir, snapshot=sid)
            self._failing = None
        kept = set()
        for old in self._record_files:
            try:
                self._files.delete(self._files.path(RECORD_DIR, old))  # False: another server's newer record subsumed it first
            except OSError as e:  # subsumed all the same (a merge takes the highest seq): deleted next time
                kept.add(old)
                log.warning("producer_record_not_deleted", table=self.name, path=f"{self._dir}/{old}", error=str(e))
        self._record_files = {name} | kept
        self._recorded = dict(seqs)
        self._covered = max(self._covered, sid)
        log.debug("producer_record_written", dir=self._dir, snapshot=sid, producers=len(seqs))

    def _unwritable(self, e: OSError, sid: int) -> RecordsUnwritable:
        """The client's error for a record the warehouse refused (no path in it); the log has the
        path and the OS's words, once per failure (and again when the reason changes)."""
        reason = compat.snapshots.storage_failure(e) or "an I/O error"
        if reason != self._failing:
            log.warning("producer_record_failed", table=self.name, dir=self._dir, snapshot=sid, error=str(e),
                        covered=self._covered, effect="writes go on; expiry keeps every snapshot after the "
                        "records on disk until a record is written")
            self._failing = reason
        kept = f"every snapshot after {self._covered}" if self._covered else "every snapshot"
        return RecordsUnwritable(
            f"Paimon table {self.name!r}: the server cannot write its producer records ({reason}); fix the "
            "warehouse's permissions or free space (the server log names the directory). Writes go on; "
            f"snapshot expiry keeps {kept} until a record is written.",
            covered=self._covered, table=self.name, reason=reason)
