"""What flight_server.paimon.compat relies on in pypaimon, checked against the installed pypaimon:
the pinned version, every module and name compat imports, every private name it calls, reads or
overrides (with the signatures it was written against), the attributes it sets, and, on real
tables, that pypaimon still calls the hooks compat overrides and honours what compat sets. Each
failure names the thing that changed; a pypaimon upgrade starts here.

Also: no module of the server imports pypaimon but compat's (compat's package docstring says why).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import importlib.metadata
import inspect
import re
import tomllib
from pathlib import Path

import pyarrow as pa
import pytest

from flight_server.paimon import compat
from tests.paimon_tables import Warehouse, commit_arrow, rows

pytestmark = pytest.mark.timeout(120)

ROOT = Path(__file__).resolve().parent.parent
COMPAT = ROOT / "flight_server" / "paimon" / "compat"

# Private names compat uses, and where pypaimon defines them: (module, class or None for a
# module-level name, attribute). Instance attributes (set in a constructor) are checked on real
# objects below; these are the callables and class attributes.
PRIVATE_CALLABLES = {
    "_try_commit": ("pypaimon.write.file_store_commit", "FileStoreCommit"),
    "_with_commit_user": ("pypaimon.write.write_builder", "WriteBuilder"),
    "_try_commit_once": ("pypaimon.write.file_store_commit", "FileStoreCommit"),
    "_is_duplicate_commit": ("pypaimon.write.file_store_commit", "FileStoreCommit"),
    "_collect_manifest_entries": ("pypaimon.write.file_store_commit", "FileStoreCommit"),
    "_create_follow_up_plan": ("pypaimon.read.streaming_table_scan", "AsyncStreamingTableScan"),
    "_consumer_path": ("pypaimon.consumer.consumer_manager", "ConsumerManager"),
    "_to_file": ("pypaimon.filesystem.local_file_io", "LocalFileIO"),
    "_to_schema_path": ("pypaimon.schema.schema_manager", "SchemaManager"),
    "_get_final_read_data_fields": ("pypaimon.read.split_read", "MergeFileSplitRead"),
    "_build_pk_merge_function": ("pypaimon.write.file_store_write", "FileStoreWrite"),
    "_flush_all": ("pypaimon.write.writer.key_value_data_writer", "KeyValueDataWriter"),
    "_merge_pending_by_pk": ("pypaimon.write.writer.key_value_data_writer", "KeyValueDataWriter"),
    "_write_data_to_file": ("pypaimon.write.writer.key_value_data_writer", "KeyValueDataWriter"),
    "_create_data_file_meta": ("pypaimon.write.writer.key_value_data_writer", "KeyValueDataWriter"),
    "_process_data": ("pypaimon.write.writer.key_value_data_writer", "KeyValueDataWriter"),
    "_new_input_stream_with_known_size": ("pypaimon.filesystem.caching_file_io", "CachingFileIO"),
    "_build_split_read": ("pypaimon.read.table_read", "TableRead"),
    "_genarate_deletion_file_readers": ("pypaimon.read.split_read", "MergeFileSplitRead"),
    "_needs_blob_inline_convert": ("pypaimon.read.split_read", "MergeFileSplitRead"),
}
# Private instance attributes compat reads (checked on real objects in
# test_the_attributes_compat_reads_and_sets_are_there).
PRIVATE_ATTRIBUTES = {"_prefetch_executor", "_file_io", "_buffer", "_native_writer", "_python_writer"}

# Signatures compat calls with: (module, qualified name) -> (the leading parameters it passes by
# position, the ones it passes by name). Read from pypaimon 2.1.0.
SIGNATURES = {
    ("pypaimon.write.write_builder", "WriteBuilder._with_commit_user"): (["self", "commit_user"], []),
    ("pypaimon.table.file_store_table", "FileStoreTable.__init__"):
        (["self", "file_io", "identifier", "table_path", "table_schema", "catalog_environment"], []),
    ("pypaimon.write.file_store_commit", "FileStoreCommit._try_commit"):
        (["self"], ["commit_kind", "commit_identifier", "commit_entries_plan", "detect_conflicts"]),
    ("pypaimon.write.file_store_commit", "FileStoreCommit._collect_manifest_entries"): (["self", "commit_messages"], []),
    # compat.guard_commits wraps it and reads these of the keywords `_try_commit` passes it
    ("pypaimon.write.file_store_commit", "FileStoreCommit._try_commit_once"):
        (["self"], ["retry_result", "commit_kind", "commit_identifier", "latest_snapshot", "snapshot_properties"]),
    ("pypaimon.write.file_store_commit", "FileStoreCommit._is_duplicate_commit"):
        (["self", "retry_result", "latest_snapshot", "commit_identifier", "commit_kind"], []),
    ("pypaimon.read.streaming_table_scan", "AsyncStreamingTableScan._create_follow_up_plan"): (["self", "snapshot"], []),
    ("pypaimon.consumer.consumer_manager", "ConsumerManager._consumer_path"): (["self", "consumer_id"], []),
    ("pypaimon.filesystem.local_file_io", "LocalFileIO._to_file"): (["self", "path"], []),
    ("pypaimon.schema.schema_manager", "SchemaManager._to_schema_path"): (["self", "schema_id"], []),
    ("pypaimon.read.split_read", "MergeFileSplitRead.__init__"):
        (["self"], ["table", "predicate", "read_type", "split", "row_tracking_enabled"]),
    ("pypaimon.read.split_read", "MergeFileSplitRead._get_final_read_data_fields"): (["self"], []),
    ("pypaimon.read.split_read", "MergeFileSplitRead.file_reader_supplier"):
        (["self", "file", "for_merge_read", "read_fields", "row_tracking_enabled"], []),
    ("pypaimon.write.file_store_write", "FileStoreWrite.__init__"): (["self", "table", "commit_user"], []),
    ("pypaimon.write.file_store_write", "FileStoreWrite._build_pk_merge_function"): (["self"], []),
    ("pypaimon.write.writer.key_value_data_writer", "KeyValueDataWriter.__init__"):
        (["self", "table", "partition", "bucket", "max_seq_number"], ["options", "merge_function", "changelog_producer"]),
    ("pypaimon.manifest.manifest_file_manager", "ManifestFileManager.read"):
        (["self", "manifest_file_name"], ["drop_stats", "file_size"]),
    ("pypaimon.manifest.manifest_file_manager", "ManifestFileManager.rolling_write"):
        (["self", "entries", "suggested_file_size", "name_prefix"], []),
    ("pypaimon.manifest.manifest_list_manager", "ManifestListManager.read"):
        (["self", "manifest_list_name", "file_size"], []),
    ("pypaimon.manifest.manifest_list_manager", "ManifestListManager.write"):
        (["self", "file_name", "manifest_file_metas"], []),
    ("pypaimon.manifest.index_manifest_file", "IndexManifestFile.read"): (["self", "index_manifest_name"], []),
    ("pypaimon.manifest.schema.manifest_entry", "ManifestEntry.__init__"):
        (["self"], ["kind", "partition", "bucket", "total_buckets", "file"]),
    ("pypaimon.read.split", "DataSplit.__init__"):
        (["self", "files", "partition", "bucket"], ["raw_convertible", "total_buckets"]),
    ("pypaimon.write.commit_message", "CommitMessage.__init__"):
        (["self", "partition", "bucket", "new_files"], ["total_buckets"]),
    ("pypaimon.read.split_serializer", "serialize_split_v1"): (["split"], ["include_scores"]),
    ("pypaimon.read.split_serializer", "deserialize_split_v1"): (["data", "partition_fields", "key_fields"], []),
    ("pypaimon.utils.file_store_path_factory", "canonical_data_file_path"):
        (["table", "partition", "bucket", "file_name"], []),
    ("pypaimon.utils.file_store_path_factory", "FileStorePathFactory.bucket_index_path"):
        (["self", "partition", "bucket", "index_file", "file_io"], []),
    ("pypaimon.read.interval_partition", "IntervalPartition.__init__"): (["self", "input_files"], []),
    ("pypaimon.read.merge_engine_support", "check_supported"): (["table"], []),
    ("pypaimon.filesystem.caching_file_io", "CachingFileIO._new_input_stream_with_known_size"):
        (["self", "path", "file_size"], []),
    # compat.keep_retractions: the split reads TableRead builds, and what their merged reader is made of
    ("pypaimon.read.table_read", "TableRead._build_split_read"): (["self", "split"], []),
    ("pypaimon.read.split_read", "MergeFileSplitRead._genarate_deletion_file_readers"): (["self"], []),
    ("pypaimon.read.split_read", "MergeFileSplitRead._needs_blob_inline_convert"): (["self"], []),
    ("pypaimon.read.split_read", "MergeFileSplitRead.section_reader_supplier"): (["self", "section"], []),
    ("pypaimon.read.reader.key_value_unwrap_reader", "KeyValueUnwrapRecordReader.__init__"): (["self", "kv_reader"], []),
    ("pypaimon.read.reader.filter_record_reader", "FilterRecordReader.__init__"): (["self", "reader", "predicate"], []),
    ("pypaimon.read.reader.concat_record_reader", "ConcatRecordReader.__init__"): (["self", "reader_suppliers"], []),
}

# The hooks compat.MergedRunWriter overrides: their exact parameters in pypaimon 2.1.0.
HOOKS = {
    "_process_data": ["self", "data"],
    "_merge_pending_by_pk": ["self", "data"],
    "_write_data_to_file": ["self", "data"],
    "_create_data_file_meta": ["self", "file_name", "file_path", "row_count", "min_key", "max_key", "key_stats",
                               "value_stats", "min_sequence_number", "max_sequence_number", "extra_files",
                               "creation_time"],
}

# DataFileMeta fields compat sets (file_path, file_source, level, delete_row_count) or reads.
DATA_FILE_FIELDS = {"file_name", "file_path", "file_source", "level", "delete_row_count", "external_path",
                    "extra_files", "file_size"}


def _resolve(module: str, qualname: str):
    obj = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def _compat_sources() -> list[tuple[Path, ast.Module]]:
    return [(path, ast.parse(path.read_text(), str(path))) for path in sorted(COMPAT.glob("*.py"))]


# -- the version and the names --------------------------------------------------------------


def test_the_installed_pypaimon_is_the_pinned_one_compat_was_read_from():
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    server = pyproject["project"]["optional-dependencies"]["server"]  # the server's extra: the client has no pypaimon
    pins = [d for d in server if re.match(r"pypaimon\s*==", d)]
    assert len(pins) == 1, f"pyproject.toml's server extra pins pypaimon exactly once (==), not {pins}"
    pinned = pins[0].split("==", 1)[1].strip()
    installed = importlib.metadata.version("pypaimon")
    assert installed == pinned, (f"pypaimon {installed} is installed, pyproject.toml pins {pinned}: "
                                 "install the pinned one (scripts/setup)")
    assert compat.PYPAIMON_VERSION == pinned, (
        f"pyproject.toml pins pypaimon {pinned} but compat was read from {compat.PYPAIMON_VERSION}: read every "
        "function of flight_server/paimon/compat/ against the new version, run this test, then update "
        "compat.PYPAIMON_VERSION and the docstrings")


def test_every_compat_function_says_which_pypaimon_it_was_read_from():
    """Every function and class of compat's modules (a class's methods: its docstring says it)."""
    missing = []
    for path, tree in _compat_sources():
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                doc = ast.get_docstring(node) or ""
                if f"Read from pypaimon {compat.PYPAIMON_VERSION}" not in doc:
                    missing.append(f"{path.name}:{node.lineno} {node.name}")
    assert not missing, f"compat functions whose docstring does not say 'Read from pypaimon {compat.PYPAIMON_VERSION}': {missing}"


def test_every_module_and_name_compat_imports_from_pypaimon_exists():
    checked = 0
    for path, tree in _compat_sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "pypaimon":
                try:
                    module = importlib.import_module(node.module)
                except ImportError as e:
                    pytest.fail(f"{path.name}:{node.lineno} imports {node.module}, which pypaimon no longer has: {e}")
                for alias in node.names:
                    assert hasattr(module, alias.name), \
                        f"{path.name}:{node.lineno} imports {alias.name} from {node.module}, which no longer defines it"
                    checked += 1
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "pypaimon":
                        importlib.import_module(alias.name)
                        checked += 1
    assert checked >= 20, f"only {checked} pypaimon imports found in compat: is COMPAT the right directory?"


def _private_uses() -> dict[str, str]:
    """Every `_name` of pypaimon's compat reaches (an attribute, a getattr string, a method its
    subclass overrides), but the attributes its own classes set: name -> where."""
    found: dict[str, str] = {}
    own: set[str] = set()
    for path, tree in _compat_sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name.startswith("_") and not item.name.startswith("__"):
                        found.setdefault(item.name, f"{path.name}:{item.lineno}")  # an override of pypaimon's
                for sub in ast.walk(node):
                    if isinstance(sub, ast.Assign):
                        for target in sub.targets:
                            for t in (target.elts if isinstance(target, ast.Tuple) else [target]):
                                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                                    own.add(t.attr)
            if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__"):
                found.setdefault(node.attr, f"{path.name}:{node.lineno}")
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("getattr", "hasattr")
                    and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant)
                    and str(node.args[1].value).startswith("_")):
                found.setdefault(node.args[1].value, f"{path.name}:{node.lineno}")
    return {name: where for name, where in found.items() if name not in own}


def test_every_private_name_compat_uses_is_checked_here_and_exists():
    uses = _private_uses()
    unchecked = {n: w for n, w in uses.items() if n not in PRIVATE_CALLABLES and n not in PRIVATE_ATTRIBUTES}
    assert not unchecked, (f"compat uses pypaimon's private {unchecked}, which this test does not check: add each to "
                           "PRIVATE_CALLABLES (and SIGNATURES) or PRIVATE_ATTRIBUTES")
    for name, (module, owner) in PRIVATE_CALLABLES.items():
        cls = _resolve(module, owner)
        assert callable(getattr(cls, name, None)), f"pypaimon's {module}.{owner} no longer has {name} (compat calls it)"
    stale = set(PRIVATE_CALLABLES) | PRIVATE_ATTRIBUTES
    stale -= set(uses)
    assert not stale, f"compat no longer uses {sorted(stale)}: remove them from this test's lists"


@pytest.mark.parametrize("target", sorted(SIGNATURES), ids=lambda t: t[1])
def test_the_signatures_compat_calls_are_as_it_was_written_against(target):
    module, qualname = target
    positional, keywords = SIGNATURES[target]
    try:
        fn = _resolve(module, qualname)
    except (ImportError, AttributeError) as e:
        pytest.fail(f"pypaimon's {module}.{qualname} is gone (compat calls it): {e}")
    params = list(inspect.signature(fn).parameters)
    assert params[:len(positional)] == positional, \
        f"pypaimon's {module}.{qualname} takes {params}; compat passes {positional} by position"
    missing = [k for k in keywords if k not in params]
    assert not missing, f"pypaimon's {module}.{qualname} takes {params}; compat passes {missing} by name"


def test_the_hooks_compat_overrides_are_as_it_was_written_against_and_still_called():
    from pypaimon.write.writer import data_writer, key_value_data_writer
    from pypaimon.write.writer.key_value_data_writer import KeyValueDataWriter

    assert issubclass(compat.MergedRunWriter, KeyValueDataWriter)
    for name, expected in HOOKS.items():
        assert name in vars(compat.MergedRunWriter), f"compat.MergedRunWriter no longer overrides {name}: update HOOKS"
        params = list(inspect.signature(getattr(KeyValueDataWriter, name)).parameters)
        assert params == expected, (f"pypaimon's KeyValueDataWriter.{name} takes {params}, compat.MergedRunWriter "
                                    f"overrides it as {expected}")
    assert set(HOOKS) == {n for n, v in vars(compat.MergedRunWriter).items()
                          if n.startswith("_") and not n.startswith("__") and inspect.isfunction(v)}, \
        "compat.MergedRunWriter overrides a hook HOOKS does not list"

    def calls(module, function: str) -> list[ast.Call]:
        tree = ast.parse(inspect.getsource(module))
        fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function)
        return [c for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)]

    def called(module, function: str, hook: str) -> list[ast.Call]:
        return [c for c in calls(module, function) if c.func.attr == hook]

    # What a flush runs: sort, then the fold compat replaces, then files written through the hook
    # compat counts retractions in, whose metas the hook compat sets the level in makes.
    assert called(key_value_data_writer, "_flush_all", "_merge_pending_by_pk"), \
        "KeyValueDataWriter._flush_all no longer folds through _merge_pending_by_pk (compat's fold would not run)"
    assert called(key_value_data_writer, "_roll_write", "_write_data_to_file"), \
        "KeyValueDataWriter._roll_write no longer writes through _write_data_to_file"
    made = called(data_writer, "_write_data_to_file", "_create_data_file_meta")
    assert made, "DataWriter._write_data_to_file no longer makes its meta through _create_data_file_meta"
    assert all(not c.args for c in made), \
        "DataWriter calls _create_data_file_meta with positional arguments: compat's override takes keywords only"


def test_no_module_but_compat_imports_pypaimon():
    """The server, ingest, maintenance, the CLI and the clients reach pypaimon's internals only
    through compat; pypaimon itself (its documented API) is reached through compat too."""
    offenders = []
    for package in ("flight_server", "producers", "spark_reader", "flight_cli"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if COMPAT in path.parents:
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""] if isinstance(node, ast.ImportFrom) and not node.level else [])
                if any(n.split(".")[0] == "pypaimon" for n in names):
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"pypaimon imported outside flight_server/paimon/compat/: {offenders}"


# -- on real tables ---------------------------------------------------------------------------


@pytest.fixture
def wh(warehouse) -> Warehouse:
    return Warehouse(warehouse)


def test_the_attributes_compat_reads_and_sets_are_there(wh):
    from pypaimon.manifest.schema.data_file_meta import DataFileMeta

    fields = {f.name for f in dataclasses.fields(DataFileMeta)}
    assert DATA_FILE_FIELDS <= fields, f"pypaimon's DataFileMeta lacks {sorted(DATA_FILE_FIELDS - fields)}"

    name = wh.create("attrs", buckets=1, primary_keys=["id"])
    table = wh.catalog.get_table(name)
    commit_arrow(table, rows(0, 5))

    commit = table.new_batch_write_builder().new_commit()
    try:
        fsc = commit.file_store_commit
        for attr in ("commit_user", "manifest_list_manager", "manifest_file_manager", "manifest_target_size"):
            assert hasattr(fsc, attr), f"pypaimon's FileStoreCommit has no {attr} (compat sets or reads it)"
    finally:
        commit.close()

    scan = table.new_read_builder().new_scan()
    assert hasattr(scan.file_scanner, "skip_level0") and callable(scan.file_scanner.plan_files), \
        "pypaimon's TableScan.file_scanner has no skip_level0 or plan_files (compat.live_entries)"

    planner = compat.new_delta_planner(table, None, None)
    try:
        assert "_prefetch_executor" in vars(planner), "AsyncStreamingTableScan has no _prefetch_executor (compat.close_planner)"
        assert callable(planner.follow_up_scanner.should_scan)
    finally:
        compat.close_planner(planner)

    assert "_file_io" in vars(table.consumer_manager()), "pypaimon's ConsumerManager has no _file_io"
    factory = table.path_factory()
    assert callable(factory.bucket_index_path) and callable(factory.global_index_path_factory().to_path)

    writer = compat.MergedRunWriter(table, (), 0, 1, compat.merge_function(table), lambda w, data: data)
    try:
        assert callable(writer._buffer.append) and isinstance(writer._buffer.nbytes, int), \
            "KeyValueDataWriter._buffer has no append or nbytes (compat.MergedRunWriter)"
    finally:
        writer.abort()


def test_an_append_compaction_through_compat_lands_as_one_compact_snapshot(wh):
    """TableStore.rewrite and commit_compact: compat's split, file marks and COMPACT commit."""
    from flight_server.maintenance.store import TableStore

    name = wh.create("append", buckets=-1)
    for i in range(4):
        wh.commit(name, rows(i * 10, 10))
    table = wh.catalog.get_table(name)
    store = TableStore(table, name)
    files = [f for group in store.live_files(store.latest()).values() for f in group]
    assert len(files) == 4
    sid = store.commit_compact(store.rewrite(files), files)
    snap = store.snapshot(sid)
    assert snap.commit_kind == "COMPACT" and sid == 5
    live = [f for group in TableStore(table, name).live_files(snap).values() for f in group]
    assert len(live) == 1 and live[0].entry.file.file_source == compat.COMPACT_SOURCE
    assert len(compat.manifest_list(table, snap.base_manifest_list)) == 1, "the COMPACT commit merges its base list"
    assert sorted(wh.read(name).column("id").to_pylist()) == list(range(40))


def test_a_merge_tree_merge_through_compat_folds_keys_and_writes_at_its_level(wh):
    """kv_files over compat.MergedRunWriter and compat.KeyValueFileReader: pypaimon still calls
    the hooks (the level, the delete count, the file source are compat's)."""
    from flight_server.maintenance import kv_files
    from flight_server.maintenance.store import TableStore

    name = wh.create("keys", buckets=1, primary_keys=["id"])
    for tag in ("a", "b", "c"):
        wh.commit(name, rows(0, 10, tag))  # the same keys three times: the last wins
    table = wh.catalog.get_table(name)
    store = TableStore(table, name)
    files = [f for group in store.live_files(store.latest()).values() for f in group]
    assert len(files) == 3
    message = store.merge(kv_files.sections(files), 5, True, kv_files.KvRewriter(table, name))
    store.commit_compact([message], files)
    live = [f for group in TableStore(table, name).live_files(store.latest()).values() for f in group]
    assert [(f.level, f.rows, f.deletes, f.entry.file.file_source) for f in live] == [(5, 10, 0, compat.COMPACT_SOURCE)]
    assert sorted(wh.read(name).column("name").to_pylist()) == sorted(f"c{i}" for i in range(10))


def test_each_commit_merges_its_base_manifests_as_compat_sets_it_to(wh):
    """merge_manifests_on_commit: the base list pypaimon writes (manifest-list-<uuid>-0) goes
    through the commit's own ManifestListManager.write."""
    from pypaimon.manifest.manifest_list_manager import ManifestListManager

    name = wh.create("manifests", buckets=1, primary_keys=["id"])
    table = wh.catalog.get_table(name)
    for i in range(4):
        builder = table.new_batch_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        compat.merge_manifests_on_commit(commit, min_count=2)
        try:
            write.write_arrow(rows(i * 10, 10))
            commit.commit(write.prepare_commit())
        finally:
            write.close()
            commit.close()
    latest = table.snapshot_manager().get_latest_snapshot()
    assert len(ManifestListManager(table).read_all(latest)) == 2, "base merged into one manifest, plus the delta"
    assert sorted(wh.read(name).column("id").to_pylist()) == list(range(40))
    other = table.new_batch_write_builder().new_commit()
    try:
        assert "write" not in vars(other.file_store_commit.manifest_list_manager), "the merge reached another commit"
    finally:
        other.close()


def test_a_commit_reads_the_manifest_lists_it_wrote_from_memory(wh):
    """merge_manifests_on_commit: a commit object used for commit after commit (as a table's
    group committer uses it) reads the previous snapshot's lists, its own, without reading them
    from storage; what it commits reads back whole."""
    name = wh.create("lists", buckets=1, primary_keys=["id"])
    table = wh.catalog.get_table(name)
    builder = table.new_stream_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    compat.merge_manifests_on_commit(commit, min_count=3)
    lists = commit.file_store_commit.manifest_list_manager
    from_storage = []
    read_from_storage = lists._read_from_storage
    lists._read_from_storage = lambda *a, **kw: from_storage.append(a[0]) or read_from_storage(*a, **kw)
    try:
        for i in range(8):
            write.write_arrow(rows(i * 10, 10))
            commit.commit(write.prepare_commit(i), i)
    finally:
        write.close()
        commit.close()
    assert from_storage == [], f"read back from storage: {from_storage}"
    assert table.snapshot_manager().get_latest_snapshot().id == 8
    assert sorted(wh.read(name).column("id").to_pylist()) == list(range(80))


def test_the_read_and_consumer_helpers_work_on_a_real_table(wh):
    name = wh.create("reads", buckets=2, primary_keys=["id"])
    for i in range(2):
        wh.commit(name, rows(i * 10, 10))
    table = wh.catalog.get_table(name)
    planner = compat.new_delta_planner(table, None, None)
    try:
        second = compat.snapshot(table.snapshot_manager(), 2)
        assert compat.should_scan(planner, second)
        splits = compat.delta_splits(planner, second)
    finally:
        compat.close_planner(planner)
    read = table.new_read_builder().new_read()
    assert sorted(read.to_arrow(splits).column("id").to_pylist()) == list(range(10, 20))
    planned = table.new_read_builder().new_scan().plan().splits()
    again = compat.unpin_splits(table, compat.pin_splits(planned))
    assert sorted(read.to_arrow(again).column("id").to_pylist()) == list(range(20))
    assert compat.table_identity(table) is not None and compat.earliest_snapshot_id(table.snapshot_manager()) == 1

    assert compat.read_consumer(table, "c1") is None
    compat.write_consumer(table, "c1", 2)
    assert compat.read_consumer(table, "c1") == 2 and compat.consumers(table.file_io, str(table.table_path)) == {"c1": 2}
    compat.restore_consumer(table, "c1", None)
    assert compat.read_consumer(table, "c1") is None
    assert isinstance(compat.output_schema(read), pa.Schema)


def test_each_commit_attempt_is_made_with_the_keywords_compats_guard_reads():
    """compat.guard_commits wraps FileStoreCommit._try_commit_once and reads the latest snapshot
    and the properties from its keywords: `_try_commit` must pass them by name."""
    from pypaimon.write import file_store_commit

    tree = ast.parse(inspect.getsource(file_store_commit))
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "_try_commit")
    made = [c for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
            and c.func.attr == "_try_commit_once"]
    assert made, "FileStoreCommit._try_commit no longer commits through _try_commit_once: compat's guard would not run"
    for call in made:
        assert not call.args, "_try_commit passes _try_commit_once arguments by position: compat's guard reads keywords"
        names = {k.arg for k in call.keywords}
        wanted = {"retry_result", "commit_kind", "commit_identifier", "latest_snapshot", "snapshot_properties"}
        assert wanted <= names, f"_try_commit no longer passes {sorted(wanted - names)} to _try_commit_once by name"


# -- tables other Paimon versions share ------------------------------------------------------

# The DataFileMeta fields Java Paimon 0.9's manifests have (its DataFileMeta.SCHEMA); pypaimon 2.1
# has the later ones too and indexes `_VALUE_STATS_COLS`.
PAIMON_09_FILE_FIELDS = ["_FILE_NAME", "_FILE_SIZE", "_ROW_COUNT", "_MIN_KEY", "_MAX_KEY", "_KEY_STATS",
                         "_VALUE_STATS", "_MIN_SEQUENCE_NUMBER", "_MAX_SEQUENCE_NUMBER", "_SCHEMA_ID", "_LEVEL",
                         "_EXTRA_FILES", "_CREATION_TIME", "_DELETE_ROW_COUNT", "_EMBEDDED_FILE_INDEX",
                         "_FILE_SOURCE"]


def _as_paimon_09(manifest: Path) -> None:
    """Rewrite a manifest as Java Paimon 0.9 writes it: its `_FILE` record without the fields
    Paimon added after 0.9."""
    import json

    import fastavro

    with manifest.open("rb") as f:
        reader = fastavro.reader(f)
        schema = json.loads(reader.metadata["avro.schema"])
        records = list(reader)
    file_type = next(fld["type"] for fld in schema["fields"] if fld["name"] == "_FILE")
    file_type["fields"] = [fld for fld in file_type["fields"] if fld["name"] in PAIMON_09_FILE_FIELDS]
    for r in records:
        r["_FILE"] = {k: v for k, v in r["_FILE"].items() if k in PAIMON_09_FILE_FIELDS}
    with manifest.open("wb") as f:
        fastavro.writer(f, schema, records, codec="deflate")


def test_manifests_an_older_paimon_wrote_read_with_their_absent_fields_defaulted(wh, warehouse):
    """read_older_manifests (every catalog compat creates): a table whose manifests lack the
    fields Paimon added after 0.9 reads, plans, merges and commits through compat's catalog,
    value stats included; a plain pypaimon catalog still fails on them (when it stops, pypaimon
    reads them itself and the wrap can go)."""
    from pypaimon.manifest.schema.data_file_meta import DATA_FILE_META_SCHEMA

    later = [f for f in DATA_FILE_META_SCHEMA["fields"] if f["name"] not in PAIMON_09_FILE_FIELDS]
    assert later and all("default" in f for f in later), \
        f"pypaimon's DATA_FILE_META_SCHEMA has fields after Paimon 0.9's without a default: {later}"
    name = wh.create("older", buckets=2, primary_keys=["id"])
    native = compat.native_write_table(wh.catalog.get_table(name))  # its files have every column's stats
    commit_arrow(native, rows(0, 10))
    commit_arrow(native, rows(5, 10, tag="w"))
    manifests = [p for p in (Path(warehouse) / "db.db" / "older" / "manifest").glob("manifest-*")
                 if not p.name.startswith("manifest-list-")]
    assert len(manifests) == 2
    for m in manifests:
        _as_paimon_09(m)
    with pytest.raises(KeyError, match="_VALUE_STATS_COLS"):
        wh.read(name)

    table = compat.create_catalog(warehouse).get_table(name)
    rb = table.new_read_builder()
    got = rb.new_read().to_arrow(rb.new_scan().plan().splits())
    assert sorted(zip(got.column("id").to_pylist(), got.column("name").to_pylist())) == \
        [(i, f"v{i}") for i in range(5)] + [(i, f"w{i}") for i in range(5, 15)]
    entries = [e for m in manifests for e in compat.manifest_reader(table)(m.name, drop_stats=False)]
    for e in entries:  # value stats of every column, as Paimon 1.x reads a null _VALUE_STATS_COLS
        low, high = e.file.value_stats.min_values, e.file.value_stats.max_values
        assert 0 <= low.get_field(0) <= high.get_field(0) < 15 and low.get_field(1)[0] in "vw", e.file
    assert all(e.file.value_stats_cols is None and e.file.external_path is None for e in entries)
    commit_arrow(table, rows(15, 5))  # a commit reads the older manifests to detect conflicts
    compat.merge_manifests_on_commit(commit := table.new_batch_write_builder().new_commit(), min_count=2)
    write = table.new_batch_write_builder().new_write()
    try:
        write.write_arrow(rows(20, 5))
        commit.commit(write.prepare_commit())  # merges the older manifests into one of this version
    finally:
        write.close()
        commit.close()
    got = rb.new_read().to_arrow(table.new_read_builder().new_scan().plan().splits())
    assert sorted(got.column("id").to_pylist()) == list(range(25))


def test_a_native_writer_numbers_on_from_its_restore_and_compats_writers_follow_other_writers(wh):
    """pypaimon-rust's stream writer numbers a bucket's rows on from what it restored when it first
    wrote it: after another writer's commit its rows sort before that commit's, and its update is
    lost. compat.native_write_table's writers are made anew under it at their next write after
    such a commit (its NativeTableWrite has `_native_writer` and `_python_writer` None). When the
    native writer follows other commits itself, `_follow_other_writers` has nothing left to do."""
    name = wh.create("follow", buckets=1, primary_keys=["id"])
    table = wh.catalog.get_table(name)

    def names() -> dict[int, str]:
        got = wh.read(name)
        return dict(zip(got.column("id").to_pylist(), got.column("name").to_pylist()))

    for native, expected in ((table.copy({"write.native.enabled": "true"}), "b"), (compat.native_write_table(table), "c")):
        builder = native.new_stream_write_builder()
        write, commit = builder.new_write(), builder.new_commit()
        try:
            assert write._python_writer is None and write._native_writer is not None
            write.write_arrow(rows(0, 2, tag="a"))
            commit.commit(write.prepare_commit(0), 0)
            inner = write._native_writer
            write.write_arrow(rows(1, 1, tag="a"))  # after its own commit only: the same writer
            assert write._native_writer is inner
            commit.commit(write.prepare_commit(1), 1)
            commit_arrow(table, rows(2, 4, tag="x"))  # another writer (pypaimon's own) numbers on past
            commit_arrow(table, rows(0, 2, tag="b"))  # this writer's next numbers, and updates its keys
            write.write_arrow(rows(0, 1, tag="c"))
            assert (write._native_writer is inner) == (expected == "b")
            commit.commit(write.prepare_commit(2), 2)
        finally:
            write.close()
            commit.close()
        assert names()[0] == f"{expected}0", f"with {'compat' if expected == 'c' else 'the native writer alone'}"


def test_a_table_at_its_older_schema_writes_that_schema_as_the_given_commit_user(wh):
    """What a commit worker writes with (compat.table_at_schema, compat.stream_write_builder): the
    batches of schema 0, after another tool added a column, land as the serving process's commit
    user and read with the new column null."""
    from pypaimon.schema.data_types import AtomicType
    from pypaimon.schema.schema_change import SchemaChange

    name = wh.create("old", buckets=-1)
    wh.catalog.alter_table(name, [SchemaChange.add_column("extra", AtomicType("STRING"))])
    latest = wh.catalog.get_table(name)
    assert compat.table_at_schema(latest, 1) is latest
    old = compat.table_at_schema(latest, 0)
    assert compat.columns_of(old) == compat.columns_at(latest, 0) != compat.columns_of(latest)
    write = compat.stream_write_builder(compat.native_write_table(old), "user-1").new_write()
    try:
        write.write_arrow(rows(0, 3))
        messages = write.prepare_commit(1)
    finally:
        write.close()
    group = compat.GroupCommit(compat.native_write_table(latest), "user-1", lambda latest, properties: None)
    try:
        assert group.commit(messages, 1, {}) == 1
    finally:
        group.close()
    assert latest.snapshot_manager().get_latest_snapshot().commit_user == "user-1"
    got = wh.read(name)
    assert got.column("id").to_pylist() == [0, 1, 2] and got.column("extra").to_pylist() == [None] * 3
    with pytest.raises(LookupError, match="no schema 5"):
        compat.table_at_schema(latest, 5)


def test_the_native_writer_leaves_out_the_key_columns_and_compats_writers_add_them(wh):
    """pypaimon-rust writes a primary-key table's files without `_KEY_<pk>` (which Paimon 0.9
    requires); compat.native_write_table's writers (stream and batch) add them, and pypaimon reads
    the files as before. When the native writer writes them itself, add_key_columns has nothing
    left to do (and can go)."""
    import pyarrow.parquet as pq

    name = wh.create("keys", buckets=1, primary_keys=["id"])
    table = wh.catalog.get_table(name)
    bucket = Path(table.table_path) / "bucket-0"
    commit_arrow(table.copy({"write.native.enabled": "true"}), rows(0, 10))
    thin = [pq.read_schema(p).names for p in bucket.glob("*.parquet")]
    assert thin and all(not any(n.startswith(compat.KEY_PREFIX) for n in names) for names in thin), \
        f"pypaimon-rust now writes the key columns itself: {thin}"
    before = set(bucket.glob("*.parquet"))
    commit_arrow(compat.native_write_table(table), rows(10, 10))  # the batch builder
    native = compat.native_write_table(table)
    builder = native.new_stream_write_builder()
    write, commit = builder.new_write(), builder.new_commit()
    try:
        write.write_arrow(rows(20, 10, tag="s"))
        commit.commit(write.prepare_commit(0), 0)
    finally:
        write.close()
        commit.close()
    written = set(bucket.glob("*.parquet")) - before
    assert len(written) == 2
    for p in written:
        assert pq.read_schema(p).names[:3] == ["_KEY_id", compat.SEQUENCE, compat.KIND], pq.read_schema(p).names
    metas = {e.file.file_name: e.file.file_size for e in compat.live_entries(table, 3)}
    assert all(metas[p.name] == p.stat().st_size for p in written), "the metas carry the rewritten sizes"
    assert sorted(wh.read(name).column("id").to_pylist()) == list(range(30))


# -- errors: what compat.classify makes of real pypaimon and OS errors --------------------------


def test_a_real_commit_conflict_is_classified_a_conflict(wh):
    """Two compactions of the same file: the second commit's deletion conflicts (pypaimon's
    "File deletion conflicts detected!"), and compat.classify calls it CONFLICT; a full disk and a
    missing file are told apart from it."""
    name = wh.create("raced", buckets=1)
    table = wh.catalog.get_table(name)
    sid = commit_arrow(table, rows(0, 10))
    replaced = list(compat.live_entries(table, sid))
    assert len(replaced) == 1
    first = compat.CompactCommit(table, "first", [], replaced)
    try:
        first.run(1, [])
    finally:
        first.close()
    second = compat.CompactCommit(table, "second", [], replaced)
    try:
        with pytest.raises(Exception) as raised:  # noqa: PT011 - whatever pypaimon raises, classified below
            second.run(1, [])
    finally:
        second.close()
    assert compat.classify(raised.value) is compat.Outcome.CONFLICT, repr(raised.value)


@pytest.mark.parametrize("native", [False, True], ids=["pypaimon", "pypaimon-rust"])
def test_a_real_read_of_a_deleted_data_file_is_classified_a_missing_file(wh, native):
    """A planned split whose data file is deleted before the read (what expiry does under a slow
    reader): pypaimon's and pypaimon-rust's read errors are MISSING_FILE."""
    name = wh.create("gone", buckets=1)
    table = wh.catalog.get_table(name)
    commit_arrow(table, rows(0, 10))
    if native:
        table = table.copy({"read.native.enabled": "true"})
    rb = table.new_read_builder()
    splits = rb.new_scan().plan().splits()
    files = list(Path(table.table_path).glob("bucket-0/*.parquet"))
    assert splits and len(files) == 1
    files[0].unlink()
    with pytest.raises(Exception) as raised:  # noqa: PT011 - whatever the reader raises, classified below
        rb.new_read().to_arrow(splits)
    assert compat.classify(raised.value) is compat.Outcome.MISSING_FILE, repr(raised.value)


def test_a_real_full_disk_and_other_errors_are_classified(wh, tmp_path):
    """The OS's ENOSPC (/dev/full refuses every write) is DISK_FULL, through pypaimon's file IO as
    well; a bad option pypaimon refuses is OTHER."""
    if not Path("/dev/full").exists():
        pytest.skip("this machine has no /dev/full to fill")
    with pytest.raises(OSError) as raised:
        with open("/dev/full", "w") as f:
            f.write("x")
    assert compat.classify(raised.value) is compat.Outcome.DISK_FULL, repr(raised.value)
    file_io = wh.catalog.get_table(wh.create("full", buckets=1)).file_io
    with pytest.raises(OSError) as raised:
        file_io.write_file("/dev/full", "x" * 100_000, overwrite=True)
    assert compat.classify(raised.value) is compat.Outcome.DISK_FULL, repr(raised.value)
    from pypaimon import CatalogFactory

    with pytest.raises(ValueError) as raised:
        CatalogFactory.create({"warehouse": str(tmp_path), "metastore": "no-such-metastore"})
    assert compat.classify(raised.value) is compat.Outcome.OTHER, repr(raised.value)


def test_a_jdbc_catalogs_tables_read_their_latest_snapshot_from_their_files(tmp_path):
    """compat.create_catalog's JDBC tables have no snapshot loader (pypaimon's makes a new catalog,
    a database connection, at every latest-snapshot read, only to fail over to the files: the
    JDBC catalog cannot load snapshots); what they read is the same. When pypaimon's JDBC catalog
    loads snapshots itself, or its tables stop making a catalog per read, the wrap can go."""
    from pypaimon import CatalogFactory

    options = {"metastore": "jdbc", "uri": f"jdbc:sqlite:{tmp_path / 'catalog.db'}"}
    catalog = compat.create_catalog(str(tmp_path / "wh"), options)
    compat.create_table(catalog, "db.t", pa.schema([("id", pa.int64())]), [], [], {"bucket": "-1"})
    ours = catalog.get_table("db.t")
    commit_arrow(ours, pa.table({"id": [1, 2]}))
    plain = CatalogFactory.create({**options, "warehouse": str(tmp_path / "wh")})
    theirs = plain.get_table("db.t")
    assert theirs.snapshot_manager().snapshot_loader is not None, "pypaimon's JDBC tables no longer have a loader"
    with pytest.raises(NotImplementedError):
        plain.load_snapshot(theirs.identifier)
    assert ours.snapshot_manager().snapshot_loader is None
    assert ours.copy({"read.batch-size": "10"}).snapshot_manager().snapshot_loader is None
    assert ours.snapshot_manager().get_latest_snapshot().id == theirs.snapshot_manager().get_latest_snapshot().id == 1
