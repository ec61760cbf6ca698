"""The one interface both kinds of table serve through (DataFusion's PartitionStream shape).

`schema(request)` answers get_schema: the output schema alone, without planning the read.
`plan(request)` answers get_flight_info: the output schema and one ticket per endpoint.
`open(ticket, cancelled)` answers do_get: the schema and a stream of `(batch, app_metadata)`.
Neither knows anything of Flight; the server encodes the tickets and turns streams into Flight's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Protocol

import pyarrow as pa

Items = Iterator[tuple[pa.RecordBatch, bytes | None]]


@dataclass
class ReadPlan:
    """What FlightInfo needs: the output schema, one ticket per endpoint, the rows where known."""

    schema: pa.Schema
    tickets: list
    total_records: int = -1
    app_metadata: bytes = b""  # FlightInfo's: `{"snapshot": N}` of a snapshot read, `{"files": K}` of a delta
    total_bytes: int = -1  # a Paimon delta's data files on storage (what read.stream.maxBytesPerTrigger counts)


class Source(Protocol):
    def schema(self, request) -> pa.Schema: ...

    def plan(self, request) -> ReadPlan: ...

    def open(self, ticket, cancelled: Callable[[], bool]) -> tuple[pa.Schema, Items]: ...
