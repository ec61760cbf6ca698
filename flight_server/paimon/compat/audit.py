"""Paimon's audit_log system table, which pypaimon 2.1 does not have: a primary-key table's merged
read that keeps each key's retraction, as Java Paimon's `AuditLogTable` reads (`forceKeepDelete`)."""

from __future__ import annotations

from functools import partial

from pypaimon.read.interval_partition import IntervalPartition
from pypaimon.read.reader.concat_record_reader import ConcatRecordReader
from pypaimon.read.reader.filter_record_reader import FilterRecordReader
from pypaimon.read.reader.key_value_unwrap_reader import KeyValueUnwrapRecordReader
from pypaimon.read.split_read import MergeFileSplitRead

AUDIT_READ_OPTIONS = {"read.native.enabled": "false"}  # pypaimon-rust says +I for every merged row


def keep_retractions(table_read) -> None:
    """Make `table_read`'s merged reads of primary-key splits keep a key whose merge ends in a
    retraction (-U, -D), with that kind, as Java's audit_log does; pypaimon drops them. Only this
    object changes. Its table must read with AUDIT_READ_OPTIONS (pypaimon's Python reader, which
    keeps each merged row's kind: +U stays +U), and without a projection (a projected read wraps
    its reader in ways this does not rebuild: project the batches instead).

    Read from pypaimon 2.1.0: `TableRead._build_split_read(split, ...)` makes each split's reader,
    a `MergeFileSplitRead` for a primary-key split that is not raw-convertible; its non-streaming
    `create_reader` is `_genarate_deletion_file_readers()`, then `IntervalPartition(split.files)
    .partition()` sections read by `section_reader_supplier` in a `ConcatRecordReader`, wrapped in
    `DropDeleteRecordReader` (what this leaves out), `KeyValueUnwrapRecordReader`, and
    `FilterRecordReader` with `predicate_for_reader`; `limit`, `outer_extract_name_paths` and
    `_needs_blob_inline_convert()` add wrappers, and a split read that needs one keeps pypaimon's
    reader."""
    build = table_read._build_split_read

    def build_keeping(split, *args, **kwargs):
        split_read = build(split, *args, **kwargs)
        if (isinstance(split_read, MergeFileSplitRead) and not getattr(split, "is_streaming", False)
                and split_read.limit is None and not split_read.outer_extract_name_paths
                and not split_read._needs_blob_inline_convert()):
            split_read.create_reader = partial(_merged_keeping_retractions, split_read)
        return split_read

    table_read._build_split_read = build_keeping


def _merged_keeping_retractions(split_read):
    """`MergeFileSplitRead.create_reader` of a non-streaming split without its DropDeleteRecordReader.

    Read from pypaimon 2.1.0 (see `keep_retractions`)."""
    split_read._genarate_deletion_file_readers()
    sections = IntervalPartition(split_read.split.files).partition()
    merged = ConcatRecordReader([partial(split_read.section_reader_supplier, s) for s in sections])
    reader = KeyValueUnwrapRecordReader(merged)
    if split_read.predicate_for_reader:
        reader = FilterRecordReader(reader, split_read.predicate_for_reader)
    return reader
