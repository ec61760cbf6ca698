"""app_metadata messages: the small JSON objects that travel beside (or instead of) batches.

Producer -> server on a do_put stream:
  `{"end": N}`      the stream's clean end: N batches were sent on it (may ride on the last batch)
  `{"error": TEXT}` the producer failed: the partition fails with TEXT (a batch it rides on is dropped)
  `{"seq": N}`      (on a batch, named producers writing to a Paimon table) the producer's number
                    for the batch, strictly increasing; may ride with "end"
Server -> producer:
  `{"seq": N}`      batch N of the partition was appended
  `{"seq": N, "snapshot": S}`  (Paimon writes) batch N is durable: committed in snapshot S (or,
                    for a resent batch the table already held, in the table as of snapshot S)
  `{"error": TEXT, "code": C}`  (Paimon writes) the stream failed (a failed commit, a newer stream
                    of the producer, a closing server): send nothing more and half-close; the
                    call's status carries the error. A producer waiting for acks learns it here.
Server -> viewer of a push partition (its do_get stream):
  `{"seq": N}`      the batch is batch N of the partition (a gap means the viewer fell behind)
Server -> reader in a Paimon read's FlightInfo (`get_flight_info`):
  `{"snapshot": N}` (a snapshot read) the snapshot it is pinned at
  `{"files": K}`    (a delta read) the data files it reads (absent over 64 snapshots)
Server -> reader on a Paimon do_get stream:
  `{"snapshot": N}` the batch's rows were committed by snapshot N
  `{"done": N}`     (on a zero-row batch, follow reads) every row of snapshots <= N this endpoint
                    will send has been sent: a consumer may commit progress N + 1
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from flight_server.wire.values import is_int

if TYPE_CHECKING:
    import pyarrow as pa

Metadata: TypeAlias = "pa.Buffer | bytes | None"  # a batch's or PutResult's app_metadata, as pyarrow gives it

SEQ, END, ERROR, SNAPSHOT, DONE, FILES, CODE = "seq", "end", "error", "snapshot", "done", "files", "code"


def _encode(key: str, value: object) -> bytes:
    return json.dumps({key: value}).encode()


def _object(buf: Metadata) -> dict | None:
    """The JSON object in an app_metadata buffer, None when it holds none."""
    if buf is None:
        return None
    raw = buf.to_pybytes() if hasattr(buf, "to_pybytes") else bytes(buf)
    try:
        value = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def ack(seq: int, snapshot: int | None = None) -> bytes:
    if snapshot is None:
        return b'{"seq": %d}' % seq
    return b'{"seq": %d, "snapshot": %d}' % (seq, snapshot)


@dataclass(frozen=True)
class Ack:
    """A server's PutResult: the batch's sequence number, and (Paimon writes) its snapshot."""

    seq: int
    snapshot: int | None = None


class StreamFailed(Exception):
    """The server's PutResult `{"error": TEXT, "code": C}`: the stream failed; its status says why."""

    def __init__(self, message: str, code: str | None):
        super().__init__(message)
        self.code = code


def stream_failed(message: str, code: str) -> bytes:
    return json.dumps({ERROR: message, CODE: code}).encode()


def read_ack(buf: Metadata) -> Ack:
    """A PutResult's ack; raises `StreamFailed` for the server's word that the stream failed."""
    value = _object(buf)
    if value is not None and isinstance(value.get(ERROR), str):
        code = value.get(CODE)
        raise StreamFailed(value[ERROR], code if isinstance(code, str) else None)
    seq, snapshot = (value or {}).get(SEQ), (value or {}).get(SNAPSHOT)
    if not is_int(seq) or not (snapshot is None or is_int(snapshot)):
        raise ValueError(f"not a flight-paimon ack: {(b'' if buf is None else bytes(buf))[:100]!r}")
    return Ack(seq, snapshot)


def batch_seq(seq: int, end: int | None = None) -> bytes:
    """A named producer's number for a batch (with the stream's end marker when it is the last)."""
    if end is None:
        return b'{"seq": %d}' % seq
    return b'{"seq": %d, "end": %d}' % (seq, end)


def end(batches: int) -> bytes:
    return _encode(END, batches)


def producer_error(message: str) -> bytes:
    return _encode(ERROR, message)


def snapshot_mark(snapshot_id: int) -> bytes:
    return b'{"snapshot": %d}' % snapshot_id


def files_mark(files: int) -> bytes:
    return b'{"files": %d}' % files


@dataclass(frozen=True)
class PlanMark:
    """What a Paimon read's FlightInfo app_metadata says: the snapshot a snapshot read is pinned
    at, or the data files a delta reads (None: not said)."""

    snapshot: int | None = None
    files: int | None = None


def read_plan_mark(buf: Metadata) -> PlanMark:
    value = _object(buf) or {}
    ints = [value.get(k) for k in (SNAPSHOT, FILES)]
    return PlanMark(*(v if is_int(v) else None for v in ints))


def done_mark(snapshot_id: int) -> bytes:
    return b'{"done": %d}' % snapshot_id


@dataclass(frozen=True)
class ProducerMessage:
    """What a producer said in one message's app_metadata (anything else there is its own)."""

    error: str | None = None
    has_end: bool = False
    end: object = None  # the raw value: the server checks it against what it received
    seq: object = None  # the raw value of a named producer's batch number, None when absent


def read_producer_message(buf: Metadata) -> ProducerMessage | None:
    value = _object(buf)
    if value is None or (ERROR not in value and END not in value and SEQ not in value):
        return None
    error = value.get(ERROR)
    return ProducerMessage(
        error=None if error is None else str(error), has_end=END in value, end=value.get(END),
        seq=value.get(SEQ))


@dataclass(frozen=True)
class ReadMark:
    """What a reader learns from a batch's app_metadata: its snapshot, a follow's progress, or
    (a viewer of a push partition) its sequence number."""

    snapshot: int | None = None
    done: int | None = None
    seq: int | None = None


def read_mark(buf: Metadata) -> ReadMark:
    value = _object(buf) or {}
    ints = [value.get(k) for k in (SNAPSHOT, DONE, SEQ)]
    return ReadMark(*(v if is_int(v) else None for v in ints))
