"""`create_table`: a Paimon table for durable writes, every argument checked before pypaimon sees it."""

from __future__ import annotations

import pyarrow as pa

from flight_server.paimon import compat
from flight_server.wire.actions import TableCreated
from flight_server.wire.errors import InvalidRequest, WrongState
from flight_server.wire.schemas import describe
from flight_server.wire.values import is_int


def _columns(value, key: str, schema: pa.Schema, name: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(c, str) for c in value):
        raise InvalidRequest(f"create_table {name!r}: {key!r} must be a list of column names, got {value!r}.")
    missing = [c for c in value if c not in schema.names]
    if missing:
        raise InvalidRequest(
            f"create_table {name!r}: {key} column {missing[0]!r} is not in the schema ({', '.join(schema.names)}).")
    return value


def check_options(options: dict[str, str], primary_key: bool, action: str, name: str) -> None:
    """Options this server refuses a table (`create_table`, and `alter_table` for the options it leaves)."""
    producer = options.get("changelog-producer")
    if producer in compat.COMPACTION_CHANGELOG:
        raise InvalidRequest(
            f"{action} {name!r}: changelog-producer {producer!r} has compaction write the changelog, and "
            "this server's compaction writes none (nor does pypaimon), so its delta and follow reads would find "
            "no changelog; use 'input' (the changelog is the rows written) or 'none'.")
    if options.get("deletion-vectors.enabled", "").lower() == "true" and \
            options.get("deletion-vectors.merge-on-read", "").lower() != "true":
        raise InvalidRequest(
            f"{action} {name!r}: with deletion-vectors.enabled, batch reads skip the rows no compaction has "
            "yet turned into deletion vectors, and this server's compaction does not write them, so nothing it "
            "writes would be read; set 'deletion-vectors.merge-on-read' to 'true' too, or leave deletion vectors off.")
    bucket = options.get("bucket", "-1")
    if not primary_key and bucket.lstrip("-").isdigit() and int(bucket) > 0 and "bucket-key" not in options:
        raise InvalidRequest(
            f"{action} {name!r}: an append table with fixed buckets needs option 'bucket-key' (the "
            "columns that pick a row's bucket), e.g. {\"bucket\": \"4\", \"bucket-key\": \"id\"}.")


def check_option_name(key: str, action: str, name: str, nothing_done: str) -> None:
    """A near miss of an option Paimon knows is refused naming it: Paimon would keep the misspelt
    option and do nothing with it."""
    meant = compat.misspelt_option(key)
    if meant is not None:
        raise InvalidRequest(f"{action} {name!r}: Paimon knows no table option {key!r}: did you mean {meant!r}? "
                             f"{nothing_done}", table=name)


def create_table(catalog, name: str, schema: pa.Schema, primary_keys, partition_keys, options) -> TableCreated:
    if len(schema) == 0:
        raise InvalidRequest(f"create_table {name!r}: the schema has no columns.")
    primary_keys = _columns(primary_keys, "primary_keys", schema, name)
    partition_keys = _columns(partition_keys, "partition_keys", schema, name)
    if not isinstance(options, dict) or not all(isinstance(k, str) and (isinstance(v, str) or is_int(v))
                                                for k, v in options.items()):
        raise InvalidRequest(f"create_table {name!r}: 'options' must map option names to strings, got {options!r}.")
    options = {k: str(v) for k, v in options.items()}
    if primary_keys and not set(partition_keys) <= set(primary_keys):
        raise InvalidRequest(
            f"create_table {name!r}: a primary-key table's partition keys must be part of its primary key "
            f"(Paimon's rule); add {sorted(set(partition_keys) - set(primary_keys))} to primary_keys.")
    for key in options:
        check_option_name(key, "create_table", name, "Nothing was created.")
    check_options(options, bool(primary_keys), "create_table", name)
    try:
        compat.create_table(catalog, name, schema, primary_keys, partition_keys, options)
    except compat.ALREADY_EXISTS:
        raise WrongState(f"Paimon table {name!r} already exists; drop it first or choose another name.",
                         table=name) from None
    except (ValueError, TypeError, NotImplementedError) as e:
        raise InvalidRequest(f"create_table {name!r}: pypaimon refused it: {e}") from e
    table = catalog.get_table(name)
    return TableCreated(name, describe(compat.arrow_schema(table)), list(table.primary_keys),
                        list(table.partition_keys), dict(table.options.options.to_map()))
