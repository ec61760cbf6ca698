"""Start positions resolved once, on the driver: a tag, a commit time or "earliest" become the
snapshot id the read starts at, and incremental-between's tags the ids of its delta (the server's
`find_snapshot` and `latest_snapshot` actions).

A batch read and a stream read the same option differently, as in Paimon's connector: a batch
read of `scan.timestamp-millis` is the table as it was then (the last snapshot committed at or
before it); a stream starts with the first snapshot committed at or after it.
"""

from __future__ import annotations

from dataclasses import replace

from flight_server.wire import names
from spark_reader.flight_io import SourceError, call, connect
from spark_reader.options import OptionError, Options


def _found(opts: Options, timestamp_millis: int | None = None, tag: str | None = None):
    """The server's `find_snapshot` of the table (a `FoundSnapshot`)."""
    client = connect(opts)
    try:
        return call(opts, names.FIND_SNAPSHOT, client.find_snapshot, opts.table, timestamp_millis, tag)
    finally:
        client.close()


def _snapshots(opts: Options):
    """The server's `latest_snapshot` of the table (a `Snapshots`: latest and earliest ids)."""
    client = connect(opts)
    try:
        return call(opts, names.LATEST_SNAPSHOT, client.latest_snapshot, opts.table)
    finally:
        client.close()


def _tag(opts: Options) -> Options:
    if opts.tag_name is None:
        return opts
    return replace(opts, snapshot_id=_found(opts, tag=opts.tag_name).snapshot_id, tag_name=None)


def between_tags(opts: Options) -> Options:
    """incremental-between 'TAG1,TAG2' as the snapshot ids the tags name: checked at load() and
    resolved again when the read is planned (a DataFrame keeps what its first action found, as
    for scan.tag-name). An unknown tag or tags in the wrong order fail naming the option."""
    if opts.incremental_tags is None:
        return opts
    value = ",".join(opts.incremental_tags)
    ids = []
    for tag in opts.incremental_tags:
        try:
            ids.append(_found(opts, tag=tag).snapshot_id)
        except SourceError as e:
            raise OptionError(f"Option 'incremental-between' {value!r}: {e}") from None
    (start, end), (first, last) = ids, opts.incremental_tags
    if start > end:
        raise OptionError(
            f"Option 'incremental-between' {value!r}: tag {first!r} is snapshot {start}, after tag {last!r} (snapshot "
            f"{end}); name the earlier tag first: '{last},{first}'.")
    return replace(opts, incremental_between=(start, end), incremental_tags=None)


def for_batch(opts: Options) -> Options:
    """A batch read's options with its start as `snapshot_id` (a full scan pinned there), and an
    incremental-between of tags as snapshot ids."""
    if not opts.table:
        return opts
    opts = between_tags(_tag(opts))
    if opts.timestamp_millis is None:
        return opts
    found = _found(opts, timestamp_millis=opts.timestamp_millis)
    if found.at_or_before is None:
        raise SourceError(
            f"{opts.target} has no snapshot committed at or before scan.timestamp-millis "
            f"{opts.timestamp_millis} (the first kept one is snapshot {found.at_or_after}); "
            "pick a later time, or read without a start position.")
    return replace(opts, scan_mode="from-snapshot", snapshot_id=found.at_or_before, timestamp_millis=None)


def for_stream(opts: Options) -> Options:
    """A stream's options with its start as scan.mode from-snapshot(-full) at `snapshot_id`."""
    opts = _tag(opts)
    if opts.timestamp_millis is not None:
        start = _found(opts, timestamp_millis=opts.timestamp_millis).at_or_after
        if start is None:  # nothing committed since: start with the next snapshot to come
            start = (_snapshots(opts).snapshot_id or 0) + 1
        return replace(opts, scan_mode="from-snapshot", snapshot_id=start, timestamp_millis=None)
    if opts.scan_mode == "earliest":
        # As a follow's `start` means it: every commit from snapshot 1 while it is kept, else the
        # earliest kept snapshot in full and the deltas after it.
        earliest = _snapshots(opts).earliest_snapshot_id
        if earliest is None or earliest == 1:
            return replace(opts, scan_mode="from-snapshot", snapshot_id=1)
        return replace(opts, scan_mode="from-snapshot-full", snapshot_id=earliest)
    return opts
