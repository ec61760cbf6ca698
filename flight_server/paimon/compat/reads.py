"""Reads: splits pinned into tickets, one snapshot's delta planned on its own, and what a read
produces.

pypaimon's public API has no snapshot-id range read and no way to plan one snapshot's delta, and
its streaming scan owns an event loop and prefetch thread we cannot stop; the follow-up planner
of `AsyncStreamingTableScan` is what we borrow instead.
"""

from __future__ import annotations

import base64

import pyarrow as pa


def pin_splits(splits: list) -> list[str]:
    """Splits as text for a ticket: pypaimon's cross-language SplitSerializer v1 (what it hands
    the native reader), base64.

    Read from pypaimon 2.1.0: `pypaimon.read.split_serializer.serialize_split_v1(split, include_scores)`."""
    from pypaimon.read.split_serializer import serialize_split_v1

    return [base64.b64encode(serialize_split_v1(s, include_scores=False)).decode("ascii") for s in splits]


def unpin_splits(table, pinned: list[str]) -> list:
    """The splits `pin_splits` wrote, for this table (its partition and trimmed key fields).

    Read from pypaimon 2.1.0: `deserialize_split_v1(data, partition_fields, key_fields)`;
    `table.table_schema`, `table.trimmed_primary_keys_fields`."""
    from pypaimon.read.split_serializer import deserialize_split_v1

    schema = table.table_schema
    by_name = {f.name: f for f in schema.fields}
    partition_fields = [by_name[name] for name in schema.partition_keys]
    key_fields = table.trimmed_primary_keys_fields if table.primary_keys else None
    return [deserialize_split_v1(base64.b64decode(s), partition_fields, key_fields) for s in pinned]


def new_delta_planner(table, predicate, columns):
    """A streaming scan used only as a per-snapshot delta planner (no stream loop is started).

    Read from pypaimon 2.1.0: `new_stream_read_builder().new_streaming_scan()` makes an
    `AsyncStreamingTableScan`."""
    builder = table.new_stream_read_builder()
    if predicate is not None:
        builder = builder.with_filter(predicate)
    if columns is not None:
        builder = builder.with_projection(list(columns))
    return builder.new_streaming_scan()


def should_scan(planner, snapshot) -> bool:
    """Whether the snapshot carries data for this table's follow-up mode (APPEND, or changelog).

    Read from pypaimon 2.1.0: `AsyncStreamingTableScan.follow_up_scanner.should_scan(snapshot)`."""
    return planner.follow_up_scanner.should_scan(snapshot)


def delta_splits(planner, snapshot) -> list:
    """Splits of the data one snapshot committed (its delta, or its changelog).

    Read from pypaimon 2.1.0: the private `AsyncStreamingTableScan._create_follow_up_plan(snapshot)`."""
    return planner._create_follow_up_plan(snapshot).splits()


def close_planner(planner) -> None:
    """Stop the prefetch pool the streaming scan creates in its constructor.

    Read from pypaimon 2.1.0: the private `AsyncStreamingTableScan._prefetch_executor` (a
    ThreadPoolExecutor, or None with prefetch off)."""
    executor = getattr(planner, "_prefetch_executor", None)
    if executor is not None:
        executor.shutdown(wait=False, cancel_futures=True)


def output_schema(table_read) -> pa.Schema:
    """The exact schema a TableRead produces (projection, row kind, nullability included).

    Read from pypaimon 2.1.0: `TableRead.to_arrow_batch_reader([])` gives the schema without
    reading (a RecordBatchReader, closed when it has `close`)."""
    reader = table_read.to_arrow_batch_reader([])
    schema = reader.schema
    close = getattr(reader, "close", None)
    if close is not None:
        close()
    return schema


def merged_row_count(split) -> int | None:
    """Rows a split yields after merging, where pypaimon knows it (raw-convertible splits).

    Read from pypaimon 2.1.0: `DataSplit.merged_row_count()` (None where it cannot tell)."""
    fn = getattr(split, "merged_row_count", None)
    return fn() if fn is not None else None


def split_sort_key(split) -> tuple:
    """A stable order of splits, so servers re-planning one snapshot agree on split groups.

    Read from pypaimon 2.1.0: `DataSplit.partition` (a GenericRow with `values`, or None),
    `bucket`, `files` (DataFileMetas with `file_name`)."""
    partition = tuple(str(v) for v in (split.partition.values if split.partition is not None else ()))
    first = min((f.file_name for f in split.files), default="")
    return partition, split.bucket, first
