"""Every use of pypaimon outside its documented API, so an upgrade touches this package only.

Nothing else in the project imports a pypaimon module, subclasses a pypaimon class, calls or
reads a pypaimon name that starts with `_`, or sets an attribute on a pypaimon object: the server,
ingest and maintenance use the tables, builders, scans, reads, writes, commits and snapshots that
pypaimon's documented API hands them (and read the fields of the data it returns: snapshots,
manifest entries, data file metas, commit messages), and everything else through here.
tests/test_pypaimon_contract.py fails, naming the thing, when the installed pypaimon is not the
pinned one or lacks a name, signature or attribute this package relies on.

Each function says which pypaimon version it was read from and what of it it relies on. By what
they wrap:

- `catalog`: the catalog, creating and naming tables, their columns as Arrow, their options;
- `columns`: a table's columns by schema version (field ids), and whether a newer one exists;
- `snapshots`: snapshots (read as Java reads them under a concurrent expiry), tags, consumers;
- `layout`: where a table's files are, and reading, writing, listing and deleting them by path
  (Paimon's files, the server's producer records, small files written whole), and the table's
  identity (its first schema's time): nothing outside compat touches a table's files by path;
- `reads`: splits pinned into tickets, one snapshot's delta planned on its own;
- `manifests`: where data and index files live, the files a snapshot reads, its manifests, and
  the manifest merge our commits do;
- `commit`: a compaction's split, its commit messages and its COMPACT commit, and a check run
  before each attempt of a commit;
- `merge_tree`: a primary-key bucket's files read, folded and written again;
- `options`: the table option names Paimon knows, and the one a misspelt name resembles;
- `audit`: Paimon's audit_log system table, which pypaimon lacks: merged reads that keep retractions;
- `errors`: what an error of pypaimon's (or the OS's) means, as a typed `Outcome`: nothing
  outside compat matches their text.

`from flight_server.paimon import compat; compat.NAME` reaches every name below.
"""

from __future__ import annotations

from flight_server.paimon.compat import (
    audit,
    catalog,
    columns,
    commit,
    errors,
    layout,
    manifests,
    merge_tree,
    reads,
    snapshots,
)
from flight_server.paimon.compat.audit import AUDIT_READ_OPTIONS, keep_retractions
from flight_server.paimon.compat.catalog import (
    ALREADY_EXISTS,
    COMPACTION_CHANGELOG,
    NOT_FOUND_ERRORS,
    arrow_schema,
    catalog_options,
    compaction_changelog_producer,
    create_catalog,
    create_table,
    drop_table,
    fixed_buckets,
    list_tables,
    native_write_table,
    refuses_retractions,
    row_kind_field,
    shares_buckets,
    stream_write_builder,
    unservable,
)
from flight_server.paimon.compat.columns import (
    Columns,
    columns_at,
    columns_of,
    newer_schema,
    retyped,
    table_at_schema,
)
from flight_server.paimon.compat.commit import (
    COMPACT_SOURCE,
    CompactCommit,
    GroupCommit,
    at_level,
    commit_message,
    data_split,
    guard_commits,
    makes_snapshot,
    mark_compacted,
)
from flight_server.paimon.compat.errors import Outcome, classify
from flight_server.paimon.compat.layout import (
    PRODUCER_RECORDS,
    TableFiles,
    list_names,
    orphan_candidate_dir,
    table_identity,
    write_whole,
)
from flight_server.paimon.compat.manifests import (
    MANIFEST_MERGE_MIN_COUNT,
    MERGED_MANIFEST_BYTES,
    data_file_path,
    index_file_path,
    index_manifest_entries,
    live_entries,
    manifest_list,
    manifest_reader,
    merge_manifests_on_commit,
    merged_entries,
    written_paths,
)
from flight_server.paimon.compat.merge_tree import (
    KEY_PREFIX,
    KIND,
    RETRACT_KINDS,
    SEQUENCE,
    KeyValueFileReader,
    MergedRunWriter,
    check_merge_supported,
    deduplicates,
    merge_function,
    sorted_runs,
)
from flight_server.paimon.compat.options import known_options, misspelt_option
from flight_server.paimon.compat.reads import (
    close_planner,
    delta_splits,
    merged_row_count,
    new_delta_planner,
    output_schema,
    pin_splits,
    should_scan,
    split_sort_key,
    unpin_splits,
)
from flight_server.paimon.compat.snapshots import (
    CONSUMER_PREFIX,
    RECENT_SNAPSHOTS,
    consumers,
    create_tag,
    delete_tag,
    earliest_snapshot_id,
    find_commit,
    is_data_commit,
    latest_snapshot_id,
    listed_snapshot_ids,
    read_consumer,
    recent_changelog,
    restore_consumer,
    snapshot,
    snapshots_around,
    tag_names,
    tag_snapshot,
    tagged_snapshots,
    write_consumer,
)

PYPAIMON_VERSION = "2.1.0"  # the version every function here was read from (pyproject.toml pins it)

__all__ = [
    "audit", "catalog", "columns", "commit", "errors", "layout", "manifests", "merge_tree", "reads", "snapshots", "PYPAIMON_VERSION",
    # audit_log
    "AUDIT_READ_OPTIONS", "keep_retractions",
    # errors
    "Outcome", "classify",
    # columns by schema version
    "Columns", "columns_at", "columns_of", "newer_schema", "retyped", "table_at_schema", "known_options", "misspelt_option",
    # catalog
    "ALREADY_EXISTS", "COMPACTION_CHANGELOG", "NOT_FOUND_ERRORS", "arrow_schema", "catalog_options",
    "compaction_changelog_producer", "create_catalog", "create_table", "drop_table", "fixed_buckets", "list_tables",
    "native_write_table", "refuses_retractions", "row_kind_field", "shares_buckets", "stream_write_builder", "unservable",
    # the table's files by path
    "PRODUCER_RECORDS", "TableFiles", "list_names", "orphan_candidate_dir", "table_identity", "write_whole",
    # snapshots, tags, consumers
    "CONSUMER_PREFIX", "RECENT_SNAPSHOTS", "consumers", "create_tag", "delete_tag", "earliest_snapshot_id",
    "find_commit", "is_data_commit", "latest_snapshot_id", "listed_snapshot_ids", "read_consumer",
    "recent_changelog", "restore_consumer", "snapshot", "snapshots_around", "tag_names", "tag_snapshot",
    "tagged_snapshots", "write_consumer",
    # reads
    "close_planner", "delta_splits", "merged_row_count", "new_delta_planner", "output_schema", "pin_splits",
    "should_scan", "split_sort_key", "unpin_splits",
    # files and manifests
    "MANIFEST_MERGE_MIN_COUNT", "MERGED_MANIFEST_BYTES", "data_file_path", "index_file_path",
    "index_manifest_entries", "live_entries", "manifest_list", "manifest_reader", "merge_manifests_on_commit",
    "merged_entries", "written_paths",
    # rewrite and commit
    "COMPACT_SOURCE", "CompactCommit", "GroupCommit", "at_level", "commit_message", "data_split", "guard_commits", "makes_snapshot",
    "mark_compacted",
    # the merge tree
    "KEY_PREFIX", "KIND", "RETRACT_KINDS", "SEQUENCE", "KeyValueFileReader", "MergedRunWriter",
    "check_merge_supported", "deduplicates", "merge_function", "sorted_runs",
]
