"""A table's schema as Paimon keeps it, and Paimon's schema changes (ALTER TABLE) applied to it."""

from __future__ import annotations

import pyarrow as pa

from flight_server.wire import names
from flight_server.wire.actions import SchemaChange


class AlterRefused(Exception):
    """pypaimon refused a schema change; the message is its reason, as it gave it.

    Read from pypaimon 2.1.0: what `alter_table` below catches and turns into this."""


def schema_id(table) -> int:
    """The id of the schema the table was loaded with (0 at creation, +1 each change).

    Read from pypaimon 2.1.0: `table.table_schema.id` (FileStoreTable, TableSchema)."""
    return table.table_schema.id


def schema_options(table) -> dict[str, str]:
    """The options written in the table's schema (not Paimon's defaults).

    Read from pypaimon 2.1.0: `table.table_schema.options` (a dict)."""
    return dict(table.table_schema.options)


def column_comments(table) -> dict[str, str]:
    """The comment of each column that has one.

    Read from pypaimon 2.1.0: `table.fields`, each a DataField with `name` and `description`."""
    return {f.name: f.description for f in table.fields if f.description}


def paimon_type(field: pa.Field) -> str:
    """The Paimon type an Arrow column is kept as (`BIGINT`, `DECIMAL(10, 2) NOT NULL`); ValueError
    for an Arrow type Paimon has none for (unsigned integers, durations, ...).

    Read from pypaimon 2.1.0: `PyarrowFieldParser.to_paimon_type(pa_type, nullable)`, whose types
    print as Paimon's SQL names."""
    from pypaimon.schema.data_types import PyarrowFieldParser

    return str(PyarrowFieldParser.to_paimon_type(field.type, field.nullable))


def alter_table(catalog, name: str, changes: list[tuple[SchemaChange, pa.Field | None]]) -> None:
    """Apply `changes` (each with the Arrow field its `type` was read as) in order as one new
    schema, or nothing: AlterRefused with pypaimon's reason when it refuses one; NOT_FOUND_ERRORS
    when there is no such table.

    Read from pypaimon 2.1.0: `pypaimon.schema.schema_change.SchemaChange` and `Move` (public
    constructors), `catalog.alter_table(identifier, changes)`, which checks every change before it
    writes schema N+1 (its filesystem catalog wraps a refusal in a RuntimeError whose cause is
    pypaimon's ValueError, NotImplementedError or Column(Not|Already)ExistException)."""
    from pypaimon.catalog.catalog_exception import (
        ColumnAlreadyExistException,
        ColumnNotExistException,
    )
    from pypaimon.schema.data_types import PyarrowFieldParser
    from pypaimon.schema.schema_change import Move
    from pypaimon.schema.schema_change import SchemaChange as Paimon

    def data_type(field: pa.Field):
        return PyarrowFieldParser.to_paimon_type(field.type, field.nullable)

    out = []
    for change, field in changes:
        kind, column = change.change, change.column
        if kind == names.ADD_COLUMN:
            move = Move.first(column) if change.first else Move.after(column, change.after) if change.after else None
            out.append(Paimon.add_column(column, data_type(field), change.comment, move))
        elif kind == names.RENAME_COLUMN:
            out.append(Paimon.rename_column(column, change.new_name))
        elif kind == names.DROP_COLUMN:
            out.append(Paimon.drop_column(column))
        elif kind == names.UPDATE_COLUMN_TYPE:  # a type without NOT NULL keeps the column's nullability
            out.append(Paimon.update_column_type(column, data_type(field), keep_nullability=field.nullable))  # type: ignore[union-attr]  # a type change has its field (alter._check)
        elif kind == names.UPDATE_COLUMN_NULLABILITY:
            out.append(Paimon.update_column_nullability(column, change.nullable))
        elif kind == names.UPDATE_COLUMN_COMMENT:
            out.append(Paimon.update_column_comment(column, change.comment))
        elif kind == names.SET_OPTION:
            out.append(Paimon.set_option(change.key, change.value))
        elif kind == names.REMOVE_OPTION:
            out.append(Paimon.remove_option(change.key))
        else:
            raise AlterRefused(f"Unsupported change: {kind}")
    refusals = (ValueError, NotImplementedError, ColumnNotExistException, ColumnAlreadyExistException)
    try:
        catalog.alter_table(name, out)
    except refusals as e:
        raise AlterRefused(str(e)) from None
    except RuntimeError as e:
        cause = e.__cause__
        while isinstance(cause, RuntimeError) and cause.__cause__ is not None:
            cause = cause.__cause__
        if isinstance(cause, refusals):
            raise AlterRefused(str(cause)) from None
        raise
