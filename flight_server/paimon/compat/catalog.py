"""The catalog and its tables: creating, listing and naming them, their columns as Arrow, their
identity, and the options this server reads them or writes them with."""

from __future__ import annotations

import pyarrow as pa
from pypaimon import CatalogFactory
from pypaimon.catalog.catalog_exception import (
    DatabaseNotExistException, TableAlreadyExistException, TableNotExistException,
)

NOT_FOUND_ERRORS = (TableNotExistException, DatabaseNotExistException)
ALREADY_EXISTS = TableAlreadyExistException


# S3 credentials under the names pypaimon's Python FileIO reads and the ones its native (Rust)
# reader reads: whichever the user gave, both get it.
_S3_ALIASES = (("fs.s3.accessKeyId", "s3.access-key"), ("fs.s3.accessKeySecret", "s3.secret-key"),
               ("fs.s3.endpoint", "s3.endpoint"), ("fs.s3.region", "s3.region"),
               ("fs.s3.path-style-access", "s3.path-style-access"))


def catalog_options(warehouse: str, options: dict[str, str] | None = None) -> dict[str, str]:
    """The catalog's options: the warehouse, the user's filesystem options, and their S3 aliases.

    Read from pypaimon 2.1.0: its Python FileIO reads `fs.s3.*`, its native reader `s3.*`."""
    out = {**(options or {}), "warehouse": warehouse}
    for a, b in _S3_ALIASES:
        if a in out and b not in out:
            out[b] = out[a]
        elif b in out and a not in out:
            out[a] = out[b]
    return out


def create_catalog(warehouse: str, options: dict[str, str] | None = None):
    """Read from pypaimon 2.1.0: `CatalogFactory.create` (public)."""
    return CatalogFactory.create(catalog_options(warehouse, options))


def list_tables(catalog) -> list[str]:
    """Every `DB.TABLE` of the catalog, sorted. Read from pypaimon 2.1.0: `list_databases`,
    `list_tables` (public)."""
    names = []
    for db in catalog.list_databases():
        names += [f"{db}.{t}" for t in catalog.list_tables(db)]
    return sorted(names)


def create_table(catalog, name: str, schema: pa.Schema, primary_keys, partition_keys, options) -> None:
    """Create the table (and its database when missing); raises ALREADY_EXISTS if it exists.

    Read from pypaimon 2.1.0: `Schema.from_pyarrow_schema`, `create_database`, `create_table`
    (public); the exception classes of `pypaimon.catalog.catalog_exception`."""
    from pypaimon import Schema

    catalog.create_database(name.split(".", 1)[0], True)
    paimon_schema = Schema.from_pyarrow_schema(schema, partition_keys=partition_keys or None,
                                               primary_keys=primary_keys or None, options=options)
    catalog.create_table(name, paimon_schema, False)


def fixed_buckets(table) -> int | None:
    """The bucket count of a fixed-bucket table; None for bucket=-1 (unaware or dynamic) or -2.

    Read from pypaimon 2.1.0: `table.options.bucket()` (CoreOptions)."""
    n = table.options.bucket()
    return n if n and n > 0 else None


def row_kind_field(table) -> str | None:
    """The column a primary-key table takes each row's kind from (`rowkind.field`), else None
    (an append table's writer ignores the option).

    Read from pypaimon 2.1.0: `table.options.options.to_map()` (CoreOptions over Options) and
    `table.primary_keys`; pypaimon.write.row_kind reads the option the same way."""
    if not table.primary_keys:
        return None
    return table.options.options.to_map().get("rowkind.field") or None


COMPACTION_CHANGELOG = ("lookup", "full-compaction")  # changelog-producers whose changelog compaction writes


def compaction_changelog_producer(table) -> str | None:
    """The table's changelog-producer when its changelog is written only by compaction, else None.

    Read from pypaimon 2.1.0: `table.options.changelog_producer()`, an enum whose `value` is the
    option's text."""
    producer = table.options.changelog_producer()
    value = getattr(producer, "value", producer)
    return value if value in COMPACTION_CHANGELOG else None


def native_write_table(table):
    """The table with pypaimon's native (Rust) writer switched on: 15-40x faster than its Python
    writer for fixed buckets and primary keys (docs/benchmarks.md); pypaimon falls back to Python
    by itself for what the native writer does not support.

    Read from pypaimon 2.1.0: the `write.native.enabled` option, `table.copy(options)`."""
    return table.copy({"write.native.enabled": "true"})


def shares_buckets(table) -> bool:
    """Whether several writers may write the table at once, each its own files (an append table
    with bucket -1, as Spark's tasks write it). A table that routes rows to buckets (primary keys,
    fixed or dynamic buckets) is written one bucket per writer, and only pypaimon-rust's writer
    knows a row's bucket: such a table gets one writer.

    Read from pypaimon 2.1.0: `table.bucket_mode()` and `pypaimon.table.bucket_mode.BucketMode`."""
    from pypaimon.table.bucket_mode import BucketMode

    return not table.primary_keys and table.bucket_mode() == BucketMode.BUCKET_UNAWARE


def table_identity(table) -> str | None:
    """When the table was created (its first schema's time), read afresh; None once it is gone.

    Tells a table from a later one created under the same name: a reader planned on the first
    must never read the second's snapshots.

    Read from pypaimon 2.1.0: `pypaimon.schema.schema_manager.SchemaManager(file_io, path)`, its
    `get_schema(0)` (which wraps a file that vanished mid-read in a RuntimeError) and its private
    `_to_schema_path`."""
    from pypaimon.schema.schema_manager import SchemaManager

    manager = SchemaManager(table.file_io, table.table_path)
    try:
        schema = manager.get_schema(0)
    except (FileNotFoundError, RuntimeError):  # pypaimon wraps a file that vanished mid-read
        if table.file_io.exists(manager._to_schema_path(0)):
            raise
        return None  # dropped between the existence check and the read
    return None if schema is None else str(schema.time_millis)


def arrow_schema(table) -> pa.Schema:
    """The table's columns as Arrow types (nullability included).

    Read from pypaimon 2.1.0: `pypaimon.schema.data_types.PyarrowFieldParser.from_paimon_schema`."""
    from pypaimon.schema.data_types import PyarrowFieldParser

    return PyarrowFieldParser.from_paimon_schema(table.fields)
