"""The merge tree: a primary-key bucket's files read in their key-value layout, cut into sorted
runs, folded by the table's merge engine and written again at a level (maintenance/kv_files.py
decides what is merged and how rows fold; this is the pypaimon it does that with).

pypaimon 2.1 has no merge-tree compaction; its split reader's per-file readers, its
IntervalPartition, its writer's merge functions and its key-value writer are what we borrow.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pypaimon.common.options.core_options import ChangelogProducer
from pypaimon.write.writer.key_value_data_writer import KeyValueDataWriter

from flight_server.paimon.compat.commit import COMPACT_SOURCE

# A key-value data file's layout (pypaimon's KeyValueDataWriter._add_system_fields, Java's
# KeyValue): the key columns prefixed, the sequence number, the row kind, then the value columns.
SEQUENCE, KIND, KEY_PREFIX = "_SEQUENCE_NUMBER", "_VALUE_KIND", "_KEY_"
RETRACT_KINDS = (1, 3)  # -U, -D: Paimon's RowKind bytes that retract a key's row


def check_merge_supported(table) -> None:
    """Raises NotImplementedError (or ValueError) when pypaimon's merge functions cannot merge
    the table's rows (its merge engine and options).

    Read from pypaimon 2.1.0: `pypaimon.read.merge_engine_support.check_supported(table)`."""
    from pypaimon.read.merge_engine_support import check_supported

    check_supported(table)


def sorted_runs(metas: list) -> list[list[list]]:
    """The files (DataFileMetas of one bucket) in key-disjoint sections, each as its sorted runs
    (files whose key ranges do not overlap), in key order: Paimon's IntervalPartition.

    Read from pypaimon 2.1.0: `pypaimon.read.interval_partition.IntervalPartition(files).partition()`
    gives sections of SortedRuns with `files`."""
    from pypaimon.read.interval_partition import IntervalPartition

    return [[list(run.files) for run in section] for section in IntervalPartition(metas).partition()]


def deduplicates(table) -> bool:
    """Whether the table's merge engine is deduplicate (the newest row of a key wins).

    Read from pypaimon 2.1.0: `table.options.merge_engine()` and `MergeEngine.DEDUPLICATE`."""
    from pypaimon.common.options.core_options import MergeEngine

    return table.options.merge_engine() == MergeEngine.DEDUPLICATE


def merge_function(table):
    """The merge function pypaimon's writer folds a key's rows with, for the table's engine.

    Read from pypaimon 2.1.0: `pypaimon.write.file_store_write.FileStoreWrite(table, commit_user)`
    and its private `_build_pk_merge_function()`."""
    from pypaimon.write.file_store_write import FileStoreWrite

    return FileStoreWrite(table, "compaction")._build_pk_merge_function()


class KeyValueFileReader:
    """Reads the files of `split` (see compat.data_split) one at a time in their key-value layout
    (the KEY_PREFIX columns, SEQUENCE, KIND, the values), a file of an older schema as the
    current one.

    Read from pypaimon 2.1.0: `pypaimon.read.split_read.MergeFileSplitRead(table, predicate,
    read_type, split, row_tracking_enabled)`, its private `_get_final_read_data_fields()` and its
    `file_reader_supplier(file, for_merge_read, read_fields, row_tracking_enabled)`, whose reader
    has `read_arrow_batch()` (None at the end) and `close()`."""

    def __init__(self, table, split):
        from pypaimon.read.split_read import MergeFileSplitRead

        self._reader = MergeFileSplitRead(table=table, predicate=None, read_type=table.fields, split=split,
                                          row_tracking_enabled=False)
        self._fields = self._reader._get_final_read_data_fields()

    def batches(self, meta) -> list[pa.RecordBatch]:
        """The batches of the file `meta` (one of the split's)."""
        batches = []
        file_reader = self._reader.file_reader_supplier(meta, True, self._fields, False)
        try:
            while (batch := file_reader.read_arrow_batch()) is not None:
                batches.append(batch)
        finally:
            file_reader.close()
        return batches


class MergedRunWriter(KeyValueDataWriter):
    """pypaimon's key-value writer fed rows that already carry their key, sequence number and kind:
    it sorts them at each flush, folds them with `fold(writer, rows)` (rows sorted by key,
    sequence field, sequence number) and writes files at `level`, marked as a compaction's output
    with their retracting rows counted.

    Read from pypaimon 2.1.0: `KeyValueDataWriter(table, partition, bucket, max_seq_number,
    options=, merge_function=, changelog_producer=)`; its `_buffer` (a WriteBuffer: `append`,
    `nbytes`), `_flush_all()` (sort, `_merge_pending_by_pk`, roll-write through
    `_write_data_to_file(data)`, whose file's meta `_create_data_file_meta(**kwargs)` makes),
    `_process_data` (the path of `write()`), `prepare_commit()` and `abort()`. Those four private
    hooks are overridden here, and `DataFileMeta.level`, `delete_row_count` and `file_source` set."""

    def __init__(self, table, partition: tuple, bucket: int, level: int, merge_function, fold):
        super().__init__(table, partition, bucket, 0, options=table.options, merge_function=merge_function,
                         changelog_producer=ChangelogProducer.NONE)
        self._fold, self._level = fold, level
        self._retracts = 0

    @property
    def pending_bytes(self) -> int:
        return self._buffer.nbytes

    def add(self, data: pa.Table) -> None:
        self._buffer.append(data)

    def flush(self) -> None:
        self._flush_all()

    def fold_rows(self, data: pa.Table) -> pa.Table:
        """`data` folded by pypaimon's own merge function (row by row)."""
        return super()._merge_pending_by_pk(data)

    # -- KeyValueDataWriter's hooks ---------------------------------------------------------

    def _process_data(self, data):
        raise TypeError("a merged-run writer takes rows through add()")

    def _merge_pending_by_pk(self, data: pa.Table) -> pa.Table:
        return self._fold(self, data)

    def _write_data_to_file(self, data):
        self._retracts = pc.sum(pc.is_in(data.column(KIND), pa.array(RETRACT_KINDS, pa.int8())).cast(pa.int64())).as_py() or 0
        super()._write_data_to_file(data)

    def _create_data_file_meta(self, **kwargs):
        meta = super()._create_data_file_meta(**kwargs)
        meta.level = self._level
        meta.delete_row_count = self._retracts
        meta.file_source = COMPACT_SOURCE
        return meta


# Java Paimon's SpecialFields.KEY_FIELD_ID_START: a key column's field id is this plus its field's.
KEY_FIELD_ID_START = (2**31 - 1) // 2


def add_key_columns(table, messages: list) -> None:
    """Give the primary-key data files that uncommitted commit messages name the key columns
    (`_KEY_<pk>`, first, as Paimon's key-value layout has them) where they lack them, in place,
    and their new sizes to their metas.

    pypaimon-rust's native writer writes a primary-key table's files without the key columns
    (Paimon 1.0's `data-file.thin-mode`, which the table does not declare and Paimon 0.9 does
    not know): Java Paimon 0.9 then fails "Required column is missing in data file. Col:
    [_KEY_id]". A file is read back and written again (same compression, one row group per
    original one) before anything names it; files that have them (pypaimon's Python writer's,
    other formats) are left alone.

    Read from pypaimon 2.1.0: `CommitMessage.new_files`, `changelog_files`, `compact_after`,
    `compact_changelog_files`, `partition`, `bucket`; `DataFileMeta.file_name`, `file_size` (set
    here); `table.primary_keys`, `table.file_io` (`new_input_stream`, `new_output_stream`)."""
    import io

    import pyarrow.parquet as pq

    from flight_server.paimon.compat.manifests import data_file_path

    keys = list(table.primary_keys or [])
    if not keys:
        return
    ids = {f.name: f.id for f in table.table_schema.fields}
    file_io = table.file_io
    for message in messages:
        for meta in [*message.new_files, *message.changelog_files, *getattr(message, "compact_after", []),
                     *getattr(message, "compact_changelog_files", [])]:
            if not meta.file_name.endswith(".parquet"):
                continue
            path = data_file_path(table, tuple(message.partition), message.bucket, meta)
            with file_io.new_input_stream(path) as stream:
                data = stream.read()
            parquet = pq.ParquetFile(io.BytesIO(data))
            schema = parquet.schema_arrow
            if any(name.startswith(KEY_PREFIX) for name in schema.names):
                continue
            rows = parquet.read()
            metadata = parquet.metadata
            compression = metadata.row_group(0).column(0).compression if metadata.num_row_groups else "ZSTD"
            group_rows = max([metadata.row_group(i).num_rows for i in range(metadata.num_row_groups)] or [1])
            for i, key in enumerate(keys):
                field = schema.field(key)
                rows = rows.add_column(i, pa.field(f"{KEY_PREFIX}{key}", field.type, nullable=False, metadata={
                    b"PARQUET:field_id": str(KEY_FIELD_ID_START + ids[key]).encode()}), rows.column(key))
            out = io.BytesIO()
            pq.write_table(rows, out, compression=compression, row_group_size=group_rows)
            written = out.getvalue()
            with file_io.new_output_stream(path) as stream:
                stream.write(written)
            meta.file_size = len(written)
