"""A table's columns by schema version: their Arrow types with Paimon's field ids (which a rename
keeps and a drop retires, so a batch of one version maps onto another), and whether a newer
schema exists (an ALTER by anyone)."""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa


@dataclass(frozen=True)
class Columns:
    """One schema version of a table: its id, its columns as Arrow, each column's field id.

    Read from pypaimon 2.1.0: see `columns_of`."""

    schema_id: int
    arrow: pa.Schema
    field_ids: tuple[int, ...]


def columns_of(table) -> Columns:
    """The columns of the schema the pypaimon table object was loaded with.

    Read from pypaimon 2.1.0: `table.table_schema` (TableSchema: `id`, `fields` of DataField with
    `id`, `name`, `type`); `PyarrowFieldParser.from_paimon_schema(fields)`."""
    from pypaimon.schema.data_types import PyarrowFieldParser

    schema = table.table_schema
    return Columns(schema.id, PyarrowFieldParser.from_paimon_schema(schema.fields),
                   tuple(f.id for f in schema.fields))


def newer_schema(table, schema_id: int) -> bool:
    """Whether the table has a schema after `schema_id` (one existence check: schema ids are
    consecutive, each written once, atomically).

    Read from pypaimon 2.1.0: `SchemaManager(file_io, table_path)` and its private
    `_to_schema_path(schema_id)`; `SchemaManager.commit` writes schema-<latest + 1> with
    `try_to_write_atomic`."""
    from pypaimon.schema.schema_manager import SchemaManager

    return table.file_io.exists(SchemaManager(table.file_io, table.table_path)._to_schema_path(schema_id + 1))


def columns_at(table, schema_id: int) -> Columns | None:
    """The columns of the table's schema `schema_id` (None when there is no such schema).

    Read from pypaimon 2.1.0: `SchemaManager(file_io, table_path).get_schema(schema_id)` (a
    TableSchema, or None); `PyarrowFieldParser.from_paimon_schema(fields)`."""
    from pypaimon.schema.data_types import PyarrowFieldParser
    from pypaimon.schema.schema_manager import SchemaManager

    schema = SchemaManager(table.file_io, table.table_path).get_schema(schema_id)
    if schema is None:
        return None
    return Columns(schema.id, PyarrowFieldParser.from_paimon_schema(schema.fields), tuple(f.id for f in schema.fields))


def retyped(source: Columns, target: Columns) -> list[str]:
    """The columns of `source` whose type `target` changed (matched by field id): read with
    `source`'s types, their new values may not fit (a widened integer read narrow).

    Read from pypaimon 2.1.0: nothing beyond `Columns`."""
    types = dict(zip(target.field_ids, target.arrow.types))
    return [f.name for f, fid in zip(source.arrow, source.field_ids) if fid in types and not types[fid].equals(f.type)]


def table_at_schema(table, schema_id: int):
    """The table as written with its schema `schema_id` (the table itself when it has that
    schema): a process that writes for another (a commit worker) writes the schema its batches
    were conformed to, not whichever is latest there.

    Read from pypaimon 2.1.0: `FileStoreTable(file_io, identifier, table_path, table_schema,
    catalog_environment)`; `SchemaManager(file_io, table_path).get_schema(schema_id)`."""
    from pypaimon.schema.schema_manager import SchemaManager
    from pypaimon.table.file_store_table import FileStoreTable

    if table.table_schema.id == schema_id:
        return table
    schema = SchemaManager(table.file_io, table.table_path).get_schema(schema_id)
    if schema is None:
        raise LookupError(f"Paimon table {table.identifier} has no schema {schema_id}")
    return FileStoreTable(table.file_io, table.identifier, table.table_path, schema, table.catalog_environment)
