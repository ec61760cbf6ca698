"""A primary-key bucket's sorted runs merged into new files, as Paimon's MergeTreeCompactRewriter
does. The pypaimon it does that with (its file readers, IntervalPartition, merge functions and
key-value writer) is reached through flight_server/paimon/compat/merge_tree.py.

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

from flight_server.paimon import compat
from flight_server.paimon.compat import KEY_PREFIX, KIND, RETRACT_KINDS, SEQUENCE
from flight_server.wire.errors import InvalidRequest

IGNORE_DELETE = ("ignore-delete", "deduplicate.ignore-delete", "first-row.ignore-delete", "partial-update.ignore-delete")


def unsupported(table) -> str | None:
    """Why this server cannot compact `table`'s merge tree, or None."""
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
        compat.check_merge_supported(table)
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
    by_name = {f.name: f for f in files}
    return [[[by_name[m.file_name] for m in run] for run in section]
            for section in compat.sorted_runs([f.entry.file for f in files])]


class KvRewriter:
    """Merges sorted runs of one table's buckets."""

    def __init__(self, table, name: str):
        reason = unsupported(table)
        if reason is not None:
            raise InvalidRequest(f"Paimon table {name!r} is not compacted by this server: {reason}. "
                                 "Compact it with Paimon's own `compact` procedure (Spark or Flink).")
        self.table = table
        self.keeps_deletes = keeps_deletes(table)
        self.level0_unread = table.options.batch_scan_skip_level0()  # first-row: rows show once above level 0
        opts = table.options.options.to_map()
        # Retracting rows written before ignore-delete was set are skipped, as Java's merge functions do.
        self.ignore_delete = any(str(opts.get(k, "false")).lower() == "true" for k in IGNORE_DELETE)
        self._columnar = compat.deduplicates(table)
        self._merge_function = None if self._columnar else compat.merge_function(table)
        values = compat.arrow_schema(table)
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
        entries = [lf.entry for section in sections_ for run in section for lf in run]
        split = compat.data_split(entries, data_path, partition, bucket, total_buckets, raw_convertible=False)
        reader = compat.KeyValueFileReader(self.table, split)

        def fold(writer, data: pa.Table) -> pa.Table:  # the rows a flush writes
            if self.ignore_delete:
                data = _adds(data)
            folded = self.fold(writer, data)
            return _adds(folded) if drop_delete else folded

        writer = compat.MergedRunWriter(self.table, tuple(partition.values), bucket, level, self._merge_function, fold)
        try:
            for section in sections_:  # key-disjoint and in key order: flushing between them keeps files sorted
                writer.add(pa.concat_tables([self._read(reader, lf.entry.file) for run in section for lf in run]))
                if writer.pending_bytes >= self.target_file_size:
                    writer.flush()
            return writer.prepare_commit()
        except BaseException:
            writer.abort()
            raise

    def _read(self, reader, meta) -> pa.Table:
        batches = reader.batches(meta)
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


def _adds(data: pa.Table) -> pa.Table:
    """The rows of `data` that are not retractions."""
    return data.filter(pc.invert(pc.is_in(data.column(KIND), pa.array(RETRACT_KINDS, pa.int8()))))
