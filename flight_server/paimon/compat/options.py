"""Table option names Paimon knows, so a misspelt one is refused with the name it resembles.

Paimon keeps any option it is given, so `snapshot.num-retaind.max` would be stored and silently do
nothing. The names known here: pypaimon's `CoreOptions` (read from pypaimon 2.1.0: its
`ConfigOption` class attributes, `.key()`), Java Paimon 0.9's `CoreOptions` (the keys of the jar
tests/java_paimon.py runs; Java writers share the tables, so their options pass), and the
server's own (its maintenance reads Paimon's names, and `compaction.small-file-ratio`). A name
under a prefix Paimon hands on (`fields.NAME.`, a file system's `s3.` or `fs.`, a format's
`parquet.`...) passes; so does a name close to none (a newer Paimon's option): only a near miss of
a known name is taken for a typo.
"""

from __future__ import annotations

import difflib
import functools

JAVA_PAIMON_0_9 = (
    "async-file-write", "auto-create", "branch", "bucket", "bucket-key", "cache-page-size", "changelog-producer",
    "changelog-producer.lookup-wait", "changelog-producer.row-deduplicate", "changelog.num-retained.max",
    "changelog.num-retained.min", "changelog.time-retained", "commit.callbacks", "commit.force-compact",
    "commit.force-create-snapshot", "commit.user-prefix", "compaction.early-max.file-num",
    "compaction.max-size-amplification-percent", "compaction.max.file-num", "compaction.min.file-num",
    "compaction.optimization-interval", "compaction.size-ratio", "consumer-id", "consumer.expiration-time",
    "consumer.ignore-progress", "consumer.mode", "continuous.discovery-interval",
    "cross-partition-upsert.bootstrap-parallelism", "cross-partition-upsert.index-ttl", "deduplicate.ignore-delete",
    "default-aggregate-function", "delete-file.thread-num", "delete.force-produce-changelog",
    "deletion-vector.index-file.target-size", "deletion-vectors.enabled", "dynamic-bucket.assigner-parallelism",
    "dynamic-bucket.initial-buckets", "dynamic-bucket.target-row-num", "dynamic-partition-overwrite",
    "end-input.check-partition-expire", "fields.default-aggregate-function", "file-index.in-manifest-threshold",
    "file-index.read.enabled", "file-reader-async-threshold", "file.block-size", "file.compression",
    "file.compression.per.level", "file.compression.zstd-level", "file.format", "file.format.per.level",
    "first-row.ignore-delete", "force-lookup", "full-compaction.delta-commits", "ignore-delete", "ignore-retract",
    "incremental-between", "incremental-between-scan-mode", "incremental-between-timestamp", "list-agg-delimiter",
    "local-merge-buffer-size", "local-sort.max-num-file-handles", "log.changelog-mode", "log.consistency",
    "log.format", "log.key.format", "log.scan", "log.scan.timestamp-millis", "lookup-wait",
    "lookup.cache-file-retention", "lookup.cache-max-disk-size", "lookup.cache-max-memory-size",
    "lookup.cache-spill-compression", "lookup.cache.bloom.filter.enabled", "lookup.cache.bloom.filter.fpp",
    "lookup.hash-load-factor", "lookup.local-file-type", "manifest.compression", "manifest.format",
    "manifest.full-compaction-threshold-size", "manifest.merge-min-count", "manifest.target-file-size",
    "merge-engine", "metadata.iceberg-compatible", "metadata.stats-mode", "metastore.partitioned-table",
    "metastore.tag-to-partition", "metastore.tag-to-partition.preview", "num-levels",
    "num-sorted-run.compaction-trigger", "num-sorted-run.stop-trigger", "page-size", "parquet.enable.dictionary",
    "partial-update.ignore-delete", "partial-update.remove-record-on-delete", "partition.default-name",
    "partition.expiration-check-interval", "partition.expiration-strategy", "partition.expiration-time",
    "partition.mark-done-action", "partition.timestamp-formatter", "partition.timestamp-pattern", "path",
    "read.batch-size", "record-level.expire-time", "record-level.time-field", "record-level.time-field-type",
    "rowkind.field", "scan.bounded.watermark", "scan.fallback-branch", "scan.file-creation-time-millis",
    "scan.manifest.parallelism", "scan.max-splits-per-task", "scan.mode", "scan.plan-sort-partition",
    "scan.snapshot-id", "scan.tag-name", "scan.timestamp", "scan.timestamp-millis", "scan.version", "scan.watermark",
    "sequence.field", "sink.watermark-time-zone", "snapshot.clean-empty-directories",
    "snapshot.expire.clean-empty-directories", "snapshot.expire.execution-mode", "snapshot.expire.limit",
    "snapshot.num-retained.max", "snapshot.num-retained.min", "snapshot.time-retained",
    "snapshot.watermark-idle-timeout", "sort-compaction.local-sample.magnification",
    "sort-compaction.range-strategy", "sort-engine", "sort-spill-buffer-size", "sort-spill-threshold",
    "source.split.open-file-cost", "source.split.target-size", "spill-compression", "spill-compression.zstd-level",
    "stats-mode", "stream-scan-mode", "streaming-read-mode", "streaming-read-overwrite",
    "streaming.read.snapshot.delay", "success-file", "tag.automatic-completion", "tag.automatic-creation",
    "tag.callbacks", "tag.creation-delay", "tag.creation-period", "tag.default-time-retained",
    "tag.num-retained-max", "tag.period-formatter", "target-file-size", "write-buffer-for-append",
    "write-buffer-size", "write-buffer-spill.max-disk-size", "write-buffer-spillable", "write-manifest-cache",
    "write-max-writers-to-spill", "write-only", "write.compaction-skip", "zorder.var-length-contribution",
)

# Read by the server's maintenance (flight_server/maintenance/options.py) and not a Paimon 0.9 name.
SERVER = ("compaction.small-file-ratio", "alter-column-null-to-not-null.disabled")

# Options Paimon passes on to what reads them: per column (fields.NAME.aggregate-function ...),
# file systems, file formats, file indexes, format tables, the server's own snapshot properties.
FREE_PREFIXES = ("fields.", "s3.", "fs.", "oss.", "hadoop.", "dfs.", "gs.", "azure.", "orc.", "parquet.", "avro.",
                 "csv.", "json.", "file-index.", "format-table.", "flight-paimon")

CUTOFF = 0.9  # difflib's ratio: one or two letters off in a name of 20


@functools.cache
def known_options() -> frozenset[str]:
    """Every option name a table may carry: pypaimon's, Java Paimon 0.9's and the server's own.

    Read from pypaimon 2.1.0: `CoreOptions`' class attributes that are `ConfigOption`s, each with
    `key()`."""
    from pypaimon.common.options.config_option import ConfigOption
    from pypaimon.common.options.core_options import CoreOptions

    pypaimon = {value.key() for value in vars(CoreOptions).values() if isinstance(value, ConfigOption)}
    return frozenset(pypaimon | set(JAVA_PAIMON_0_9) | set(SERVER))


def misspelt_option(key: str) -> str | None:
    """The known option `key` is a near miss of, or None: a known name, one under a free prefix, or
    one close to no known name.

    Read from pypaimon 2.1.0: see `known_options`."""
    known = known_options()
    if key in known or key.startswith(FREE_PREFIXES):
        return None
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=CUTOFF)
    return close[0] if close else None
