"""A producer's do_put stream, read the same way for every kind of write: push tables, named
producers of push tables, durable writes into Paimon tables.

The grammar (docs/protocol.md, "Producer streams"): batches, each with optional app_metadata; a
message `{"error": TEXT}` ends the stream as the producer's failure (a batch it rides on is not
taken); `{"end": N}` (alone, or riding on the last batch) ends it cleanly when N, an integer, is
the number of batches sent; nothing may follow it. A named producer's every batch carries
`{"seq": N}`, an integer >= 0. A stream that half-closes without an end marker may be a crashed
producer: what that means is the caller's (a push table fails its partition, a durable write
discards its unacked batches).

`read(chunks, named)` yields what the stream says, in order; a message that breaks the grammar
raises `StreamBroken`, whose `reason` the caller puts in its own words.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from flight_server.wire import messages
from flight_server.wire.errors import InvalidRequest
from flight_server.wire.values import is_int


@dataclass(frozen=True)
class Batch:
    """A batch: its index on the stream, and (named producers) the producer's own seq."""

    data: object  # a pyarrow RecordBatch
    index: int
    seq: int | None = None


@dataclass(frozen=True)
class Idle:
    """A message without a batch or an end: the producer is alive."""


@dataclass(frozen=True)
class ProducerFailed:
    """The producer said it failed (`{"error": TEXT}`): the stream ends here."""

    error: str


@dataclass(frozen=True)
class Ended:
    """The end marker, matching the batches received. The caller settles the stream before it
    asks for the next event: then the reader checks that nothing followed the marker."""

    batches: int


@dataclass(frozen=True)
class HalfClosed:
    """The stream ended without an end marker, after `batches` batches."""

    batches: int


Event = Batch | Idle | ProducerFailed | Ended | HalfClosed

BAD_END, AFTER_END, NO_SEQ = "bad end marker", "data after the end marker", "batch without its seq"


class StreamBroken(InvalidRequest):
    """A message that breaks the grammar; `kind` is one of BAD_END, AFTER_END, NO_SEQ and
    `reason` says what happened, starting with a verb ("ended with end marker 3 but ...")."""

    def __init__(self, kind: str, reason: str, batches: int):
        super().__init__(reason)
        self.kind, self.reason, self.batches = kind, reason, batches


def read(chunks: Iterable[tuple[object, object]], named: bool = False) -> Iterator[Event]:
    """The events of a stream of `(batch or None, app_metadata or None)` pairs."""
    chunks = iter(chunks)
    received = 0
    for data, metadata in chunks:
        said = messages.read_producer_message(metadata)
        if said is not None and said.error is not None:
            yield ProducerFailed(said.error)
            return
        if data is not None:
            seq: int | None = None
            if named:
                said_seq = None if said is None else said.seq
                if not is_int(said_seq, minimum=0):
                    raise StreamBroken(NO_SEQ, f"sent batch {received} without its app_metadata {{\"seq\": N}} "
                                               f"(N an integer >= 0, got {said_seq!r})", received)
                seq = said_seq
            yield Batch(data, received, seq)
            received += 1
        elif said is None or not said.has_end:
            yield Idle()
        if said is not None and said.has_end:
            if not is_int(said.end) or said.end != received:
                raise StreamBroken(BAD_END, f"ended with end marker {said.end!r} but the server received "
                                            f"{received} batch(es)", received)
            yield Ended(received)
            if next(chunks, None) is not None:
                raise StreamBroken(AFTER_END, "sent more after its end marker", received)
            return
    yield HalfClosed(received)
