"""A primary-key bucket's sorted runs merged into new files, as Paimon's MergeTreeCompactRewriter
does: every pypaimon internal the merge-tree compaction needs, in one place (pinned at pypaimon
2.1.0, as store.py is).

Rows are read in the files' own key-value layout (`_KEY_` columns, `_SEQUENCE_NUMBER`,
`_VALUE_KIND`, the value columns) by pypaimon's file readers, so a file of an older schema reads
as the current one; merged per key by the table's merge engine; and written by pypaimon's
key-value writer at the output level with each row's sequence number and kind as they were, so
files written later (by any writer) still win over the compacted rows, and a delete still hides
the older rows it deletes until it reaches a level with nothing older below it (`drop_delete`).
Deduplicate (the default engine) merges column-wise with Arrow; the other engines fold row by row
with pypaimon's own merge functions, the ones its writer and reader use.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
from pypaimon.write.writer.key_value_data_writer import KeyValueDataWriter

from flight_server.maintenance.store import COMPACT_SOURCE
from flight_server.paimon import compat
from flight_server.wire.errors import InvalidRequest

RETRACT_KINDS = (1, 3)  # -U, -D: Paimon's RowKind bytes that retract a key's row
IGNORE_DELETE = ("ignore-delete", "deduplicate.ignore-delete", "first-row.ignore-delete", "partial-update.ignore-delete")
SEQUENCE, KIND, KEY_PREFIX = "_SEQUENCE_NUMBER", "_VALUE_KIND", "_KEY_"


def unsupported(table) -> str | None:
    """Why this server cannot compact `table`'s merge tree, or None."""
    from pypaimon.read.merge_engine_support import check_supported

    opts = table.options.options.to_map()
    if str(opts.get("deletion-vectors.enabled", "false")).lower() == "true":
        return "it has deletion vectors (deletion-vectors.enabled), which this server does not maintain"
    producer = compat.compaction_changelog_producer(table)
    if producer is not None:
        return f"its changelog-producer {producer!r} needs compaction to write changelogs"
    if str(opts.get("sequence.snapshot-ordering", "false")).lower() == "true":
        return "it orders rows by snapshot (sequence.snapshot-ordering), which pypaimon's merge does not"
    if table.options.bucket() == -2:
        return "its bucket is -2 (postponed): Paimon's own compaction assigns its rows to buckets"
    try:
        check_supported(table)
    except (NotImplementedError, ValueError) as e:
        return f"pypaimon cannot merge its rows: {e}"
    return None


def keeps_deletes(table) -> bool:
    """Whether a retraction must stay even at the bottom of a bucket: with `sequence.field` a row
    written later can carry a lower sequence value than the delete, and only the delete, still
    there to merge with, keeps it hidden (Java Paimon drops it and brings the row back:
    apache/paimon#4767). Without it a later row always wins, so bottom-level deletes can go."""
    opts = table.options.options.to_map()
    return bool(str(opts.get("sequence.field", "")).strip())


def sections(files: list) -> list[list[list]]:
    """The files (LiveFiles of one bucket) in key-disjoint sections, each as its sorted runs (files
    whose key ranges do not overlap), in key order: Paimon's IntervalPartition."""
    from pypaimon.read.interval_partition import IntervalPartition

    by_name = {f.name: f for f in files}
    return [[[by_name[m.file_name] for m in run.files] for run in section]
            for section in IntervalPartition([f.entry.file for f in files]).partition()]


class KvRewriter:
    """Merges sorted runs of one table's buckets."""

    def __init__(self, table, name: str):
        reason = unsupported(table)
        if reason is not None:
            raise InvalidRequest(f"Paimon table {name!r} is not compacted by this server: {reason}. "
                                 "Compact it with Paimon's own `compact` procedure (Spark or Flink).")
        from pypaimon.common.options.core_options import MergeEngine
        from pypaimon.schema.data_types import PyarrowFieldParser
        from pypaimon.write.file_store_write import FileStoreWrite

        self.table = table
        self.keeps_deletes = keeps_deletes(table)
        self.level0_unread = table.options.batch_scan_skip_level0()  # first-row: rows show once above level 0
        opts = table.options.options.to_map()
        # Retracting rows written before ignore-delete was set are skipped, as Java's merge functions do.
        self.ignore_delete = any(str(opts.get(k, "false")).lower() == "true" for k in IGNORE_DELETE)
        self._columnar = table.options.merge_engine() == MergeEngine.DEDUPLICATE
        self._merge_function = None if self._columnar else FileStoreWrite(table, "compaction")._build_pk_merge_function()
        values = PyarrowFieldParser.from_paimon_schema(table.fields)
        self._schema = pa.schema(
            [pa.field(f"{KEY_PREFIX}{k}", values.field(k).type, values.field(k).nullable)
             for k in table.trimmed_primary_keys]
            + [pa.field(SEQUENCE, pa.int64(), nullable=False), pa.field(KIND, pa.int8(), nullable=False)]
            + list(values))
        self.target_file_size = table.options.target_file_size(True)

    def rewrite(self, data_path, partition, bucket: int, total_buckets, sections_: list[list[list]], level: int,
                drop_delete: bool) -> list:
        """The rows of `sections_` (LiveFiles, see `sections`) merged and written at `level`: the new
        files' DataFileMetas, not yet committed. `data_path(entry)` is where a file lives."""
        from pypaimon.read.split import DataSplit
        from pypaimon.read.split_read import MergeFileSplitRead

        metas = []
        for section in sections_:
            for run in section:
                for lf in run:
                    lf.entry.file.file_path = data_path(lf.entry)
                    metas.append(lf.entry.file)
        split = DataSplit(metas, partition, bucket, raw_convertible=False, total_buckets=total_buckets)
        reader = MergeFileSplitRead(table=self.table, predicate=None, read_type=self.table.fields, split=split,
                                    row_tracking_enabled=False)
        fields = reader._get_final_read_data_fields()
        writer = _MergedRunWriter(self, tuple(partition.values), bucket, level, drop_delete)
        try:
            for section in sections_:  # key-disjoint and in key order: flushing between them keeps files sorted
                writer.add(pa.concat_tables([self._read(reader, lf.entry.file, fields) for run in section for lf in run]))
                if writer.pending_bytes >= self.target_file_size:
                    writer.flush()
            return writer.prepare_commit()
        except BaseException:
            writer.abort()
            raise

    def _read(self, reader, meta, fields) -> pa.Table:
        batches = []
        file_reader = reader.file_reader_supplier(meta, True, fields, False)
        try:
            while (batch := file_reader.read_arrow_batch()) is not None:
                batches.append(batch)
        finally:
            file_reader.close()
        data = pa.Table.from_batches(batches) if batches else pa.table({})
        return data.select(self._schema.names).cast(self._schema) if batches else self._schema.empty_table()

    def fold(self, writer, data: pa.Table) -> pa.Table:
        """One row per key of `data` (sorted by key, sequence field, sequence number): the merge
        engine's result, with its sequence number and kind."""
        if not self._columnar:
            return writer.fold_rows(data)
        if data.num_rows < 2:
            return data
        last = None
        for k in self.table.trimmed_primary_keys:
            column = data.column(k).combine_chunks()
            a, b = column.slice(0, len(column) - 1), column.slice(1)
            differs = pc.or_(pc.fill_null(pc.not_equal(a, b), False), pc.xor(pc.is_null(a), pc.is_null(b)))
            last = differs if last is None else pc.or_(last, differs)
        return data.filter(pa.concat_arrays([last, pa.array([True])]))  # the newest row of each key


class _MergedRunWriter(KeyValueDataWriter):
    """pypaimon's key-value writer fed rows that already carry their key, sequence number and kind:
    it sorts and folds them at each flush and writes files at one level."""

    def __init__(self, rewriter: KvRewriter, partition: tuple, bucket: int, level: int, drop_delete: bool):
        from pypaimon.common.options.core_options import ChangelogProducer

        super().__init__(rewriter.table, partition, bucket, 0, options=rewriter.table.options,
                         merge_function=rewriter._merge_function, changelog_producer=ChangelogProducer.NONE)
        self._rewriter, self._level, self._drop_delete = rewriter, level, drop_delete
        self._retracts = 0

    @property
    def pending_bytes(self) -> int:
        return self._buffer.nbytes

    def add(self, data: pa.Table) -> None:
        self._buffer.append(data)

    def flush(self) -> None:
        self._flush_all()

    def fold_rows(self, data: pa.Table) -> pa.Table:
        return super()._merge_pending_by_pk(data)

    # -- KeyValueDataWriter's hooks ---------------------------------------------------------

    def _process_data(self, data):
        raise TypeError("a merged-run writer takes rows through add()")

    def _merge_pending_by_pk(self, data: pa.Table) -> pa.Table:
        if self._rewriter.ignore_delete:
            data = _adds(data)
        folded = self._rewriter.fold(self, data)
        return _adds(folded) if self._drop_delete else folded

    def _write_data_to_file(self, data):
        self._retracts = pc.sum(pc.is_in(data.column(KIND), pa.array(RETRACT_KINDS, pa.int8())).cast(pa.int64())).as_py() or 0
        super()._write_data_to_file(data)

    def _create_data_file_meta(self, **kwargs):
        meta = super()._create_data_file_meta(**kwargs)
        meta.level = self._level
        meta.delete_row_count = self._retracts
        meta.file_source = COMPACT_SOURCE
        return meta


def _adds(data: pa.Table) -> pa.Table:
    """The rows of `data` that are not retractions."""
    return data.filter(pc.invert(pc.is_in(data.column(KIND), pa.array(RETRACT_KINDS, pa.int8()))))
