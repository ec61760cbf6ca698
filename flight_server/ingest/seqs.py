"""Named producers' last committed sequence numbers, kept in the table's own snapshots.

Every group commit carries the whole map `{producer: last seq}` in the snapshot property
`flight-paimon.producer-seqs`, written atomically with the rows (Paimon's snapshot properties),
so the table itself says which batches it holds: a server restarted after a SIGKILL reads the
map back from the latest snapshot that carries it, and a producer that resends from
`last_seq + 1` duplicates nothing. Commits by other writers (a Spark job, another server)
carry no map or their own; `refresh` merges every snapshot committed since the last one read,
taking the highest seq per producer.
"""

from __future__ import annotations

import json
import threading

from flight_server.paimon import compat

PROPERTY = "flight-paimon.producer-seqs"


class ProducerSeqs:
    """The producer map of one table, as of the snapshot `seen` (None: the table has none)."""

    def __init__(self, table):
        self._table = table
        self._lock = threading.Lock()
        self._seqs: dict[str, int] = {}
        self._snapshot_of: dict[str, int] = {}  # the snapshot that holds each producer's last seq
        self.seen: int | None = None
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
        with self._lock:
            for producer, seq in updates.items():
                if seq > self._seqs.get(producer, -1):
                    self._seqs[producer] = seq
                    self._snapshot_of[producer] = snapshot
            if snapshot is not None:
                self.seen = max(snapshot, self.seen or 0)

    def refresh(self) -> None:
        """Merge the maps of snapshots committed since `seen` (by anyone)."""
        manager = self._table.snapshot_manager()
        latest = manager.get_latest_snapshot()
        if latest is None or (self.seen is not None and latest.id <= self.seen):
            return
        start = (self.seen or 0) + 1
        earliest = compat.earliest_snapshot_id(manager) or start
        for sid in range(max(start, earliest), latest.id + 1):
            snap = latest if sid == latest.id else compat.snapshot(manager, sid)
            if snap is not None:
                self._merge(snap)
        with self._lock:
            self.seen = latest.id

    def _load(self) -> None:
        """The map of the latest snapshot that carries one (walking back past other writers' commits)."""
        manager = self._table.snapshot_manager()
        latest = manager.get_latest_snapshot()
        if latest is None:
            return
        earliest = compat.earliest_snapshot_id(manager) or latest.id
        for sid in range(latest.id, earliest - 1, -1):
            snap = latest if sid == latest.id else compat.snapshot(manager, sid)
            if snap is not None and PROPERTY in (snap.properties or {}):
                self._merge(snap)
                break
        self.seen = latest.id
        with self._lock:  # everything the table holds is in it as of the latest snapshot
            self._snapshot_of = {p: latest.id for p in self._seqs}

    def _merge(self, snap) -> None:
        raw = (snap.properties or {}).get(PROPERTY)
        if raw is None:
            return
        try:
            seqs = json.loads(raw)
        except ValueError as e:
            raise ValueError(f"snapshot {snap.id} has a {PROPERTY} property that is not JSON: {e}") from e
        with self._lock:
            for producer, seq in seqs.items():
                if isinstance(seq, int) and seq > self._seqs.get(producer, -1):
                    self._seqs[producer] = seq
                    self._snapshot_of[producer] = snap.id
