"""The "flight-paimon" Python Data Source: options in, a batch/stream reader or a writer out."""

from __future__ import annotations

import secrets
from dataclasses import replace

import pyarrow as pa
import pyarrow.flight as flight
from pyspark.sql.datasource import DataSource
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from flight_server.wire import names
from spark_reader import positions
from spark_reader.batch import BatchReader
from spark_reader.flight_io import (
    SourceError,
    call,
    connect,
    paimon_base,
    paimon_info,
    spark_schema,
)
from spark_reader.options import OptionError, Options, parse
from spark_reader.paimon_writer import PaimonBatchWriter, PaimonStreamWriter
from spark_reader.push_writer import PushStreamWriter, PushWriter
from spark_reader.stream_paimon import PaimonStreamReader
from spark_reader.stream_push import PushStreamReader


class FlightPaimonDataSource(DataSource):
    """Reads Paimon and push tables served by flight-paimon; writes into both (Paimon: durable,
    exactly-once per task, batch and streaming)."""

    def __init__(self, options):
        super().__init__(options)
        # One per load(): PySpark pickles this object once per DataFrame and ships it to each
        # planning, so the server can tell plannings of one DataFrame from another's (guard.py).
        self.relation = secrets.token_hex(8)

    @classmethod
    def name(cls) -> str:
        return "flight-paimon"

    @property
    def opts(self) -> Options:
        # Parsed once on the driver, then pickled with this object to planners and executors.
        if "_opts" not in self.__dict__:
            self.__dict__["_opts"] = parse(self.options)
        return self.__dict__["_opts"]

    def schema(self) -> StructType:
        if "_schema" not in self.__dict__:  # once: reader() compares a user's schema with it
            self.__dict__["_schema"] = self._source_schema()
        return self.__dict__["_schema"]

    def _source_schema(self) -> StructType:
        opts = self.opts
        positions.between_tags(opts)  # an unknown tag, or tags in the wrong order, fail at load()
        client = connect(opts)
        try:
            if opts.table:
                info = paimon_info(client, opts, replace(paimon_base(opts), snapshot=_schema_snapshot(opts)))
                if opts.consumer_id:  # the server checks the id now, at load(), not at the first trigger
                    call(opts, names.CONSUMER_PROGRESS, client.consumer_progress, opts.table, opts.consumer_id)
            else:
                info = call(opts, "lookup", client.info, opts.push)
        finally:
            client.close()
        return from_arrow_schema(spark_schema(info))

    def reader(self, schema: StructType) -> BatchReader:
        if self.opts.consumer_id:
            raise OptionError("Option 'consumer-id' is for streams (readStream); a batch read records no progress.")
        self._check_given(schema)
        return BatchReader(positions.for_batch(self.opts), schema, self.__dict__.get("relation", "direct"))

    def _check_given(self, schema: StructType) -> None:
        """A schema the user gave (Spark asks `schema()` only when there is none) must match the source's."""
        check_read_schema(self.opts, self.schema(), schema)

    def streamReader(self, schema: StructType):
        self._check_given(schema)
        if self.opts.table:
            if self.opts.incremental_between or self.opts.incremental_tags:
                raise OptionError("Option 'incremental-between' is for batch reads; a stream uses scan.mode.")
            return PaimonStreamReader(positions.for_stream(self.opts), schema, self.schema())
        ending = "endingOffsets" if self.opts.ending_offsets is not None else \
            "endingTimestamp" if self.opts.ending_timestamp is not None else None
        if ending:  # as Kafka's source refuses them in a stream
            raise OptionError(f"Option {ending!r} is for batch reads (spark.read); a stream reads on as batches "
                              "come (use Trigger.AvailableNow to stop at what is there when it starts).")
        return PushStreamReader(self.opts, schema)

    def writer(self, schema: StructType, overwrite: bool):
        opts = self.opts
        if overwrite:
            raise OptionError(f"{opts.target} is append-only: write with .mode('append'), not overwrite.")
        if opts.table:
            return PaimonBatchWriter(opts, self._paimon_write_schema(schema))
        info = self._push_info(schema)
        return PushWriter(opts, info.schema, len(info.endpoints))

    def streamWriter(self, schema: StructType, overwrite: bool):
        opts = self.opts
        if overwrite:
            raise OptionError(f"{opts.target} is append-only: use outputMode('append').")
        if opts.table:
            return PaimonStreamWriter(opts, self._paimon_write_schema(schema))
        info = self._push_info(schema)
        return PushStreamWriter(opts, info.schema, len(info.endpoints))

    def _push_info(self, schema: StructType) -> flight.FlightInfo:
        """The push table's FlightInfo (its schema, one endpoint per partition), checked against
        the DataFrame's columns."""
        opts = self.opts
        client = connect(opts)
        try:
            info = call(opts, "lookup", client.info, opts.push)
        finally:
            client.close()
        _check_columns(opts, info.schema, schema)
        return info

    def _paimon_write_schema(self, schema: StructType) -> pa.Schema:
        """The table's row type (the server's get_schema), checked against the DataFrame's columns."""
        opts = self.opts
        client = connect(opts)
        try:
            table = call(opts, "lookup", client.flight.get_schema,
                         flight.FlightDescriptor.for_path(*names.paimon_path(opts.table)), client.options()).schema
        finally:
            client.close()
        if opts.merge_schema:  # the DataFrame's new columns join the table as its tasks stage (the server adds them)
            from pyspark.sql.pandas.types import to_arrow_schema

            extra = [f for f in to_arrow_schema(schema) if f.name not in table.names]
            table = pa.schema([*table, *(f.with_nullable(True) for f in extra)])
        _check_columns(opts, table, schema)
        return table


def _check_columns(opts: Options, table: pa.Schema, schema: StructType) -> None:
    """A write's columns, by name: every column of a push table (a Paimon table's nullable ones
    may be missing: written null), and (unless write.drop-extra-columns) no other."""
    missing = [f.name for f in table if f.name not in schema.fieldNames() and (opts.push or not f.nullable)]
    if missing:
        raise SourceError(
            f"The DataFrame lacks {'' if opts.push else 'NOT NULL '}column(s) {', '.join(missing)} of {opts.target} "
            f"(schema {table.to_string(show_schema_metadata=False)})."
        )
    extra = [n for n in schema.fieldNames() if n not in table.names]
    if extra and not opts.drop_extra_columns:
        raise SourceError(
            f"The DataFrame has column(s) {', '.join(extra)} that {opts.target} does not have (its columns: "
            f"{', '.join(table.names)}); select the table's columns, or set "
            ".option('write.drop-extra-columns', 'true') to drop them."
        )


def check_read_schema(opts: Options, table: StructType, given: StructType) -> None:
    """A user's `.schema(...)` on a read: each of its columns must be one of the source's, of the
    same type (nothing is cast; nullability may differ)."""
    if given == table:
        return
    types = {f.name: f.dataType for f in table.fields}
    for f in given.fields:
        if f.name not in types:
            raise OptionError(f"The read schema names column {f.name!r}, which {opts.target} does not have; its "
                              f"columns are {', '.join(types)}. Leave .schema() out to read the table's own.")
        if f.dataType != types[f.name]:
            raise OptionError(f"The read schema gives column {f.name!r} type {f.dataType.simpleString()}, but "
                              f"{opts.target} has {types[f.name].simpleString()}; nothing is cast: use the table's "
                              "type, or cast after load().")


def _schema_snapshot(opts: Options) -> int | None:
    """The snapshot whose schema the read has: its start's, else the latest's (None)."""
    return opts.snapshot_id if opts.snapshot_id is not None and opts.scan_mode != "latest" else None


def register(spark) -> None:
    """Make .format("flight-paimon") available in this SparkSession."""
    spark.dataSource.register(FlightPaimonDataSource)
