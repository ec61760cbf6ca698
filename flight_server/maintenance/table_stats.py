"""What a Paimon table holds, read from the table itself (the `stats` action of one table): the
same after a restart, and on any server over the warehouse."""

from __future__ import annotations

from flight_server.maintenance.store import TableStore
from flight_server.paimon import compat
from flight_server.wire.actions import PaimonTableStats


def table_stats(table, name: str) -> PaimonTableStats:
    """Snapshots kept (ids, the latest's time, kind and row count), the live data files and bytes
    per the latest snapshot, partitions and buckets, tags and consumers."""
    store = TableStore(table, name)
    latest, earliest = store.latest(), store.earliest_id()
    groups = store.live_files(latest)
    files = [f for group in groups.values() for f in group]
    return PaimonTableStats(
        table=name,
        primary_keys=list(table.primary_keys or []),
        partition_keys=list(table.partition_keys or []),
        snapshots=0 if latest is None or earliest is None else latest.id - earliest + 1,
        earliest_snapshot=earliest,
        latest_snapshot=None if latest is None else latest.id,
        latest_commit_ms=None if latest is None else latest.time_millis,
        latest_commit_kind=None if latest is None else str(latest.commit_kind),
        records=None if latest is None else latest.total_record_count,
        data_files=len(files),
        data_bytes=sum(f.size for f in files),
        partitions=len({values for values, _ in groups}),
        buckets=len(groups),
        tags={tag: compat.tag_snapshot(table, tag) for tag in compat.tag_names(table)},
        consumers=store.consumers(),
    )
