"""PaimonSink: durable writes into a Paimon table over a Flight do_put stream (docs/protocol.md).

The same surface as TableSink (`write`, `try_write`, `close`, `fail`, `with`), but every batch
is acked only once the server has committed it to the table, and `close()` returns after the
last ack. A named producer numbers its batches (`{"seq": N}`), starts after the table's
`last_seq`, keeps what is not yet acked, and when the server goes away (restarted, killed)
reconnects, asks `producer_state` and resends only what the table lacks: exactly-once.
An unnamed producer cannot know which of its unacked batches were committed, so a lost
connection is an error naming how many were unacked (at-least-once if the caller resends).

Every call a sink makes goes through one retry policy (`retrying`, with tenacity): after an error that
says the server went away (`retryable`: UNAVAILABLE, CANCELLED) it is made again, with backoff, until
`reconnect_timeout`; any other error (NOT_FOUND, INVALID_ARGUMENT, PERMISSION_DENIED,
UNAUTHENTICATED, ...) is the server's answer and is raised at once. That covers the sink's first
calls (the table's schema, `producer_state`, the stream; for any producer, as nothing is sent
yet), so a sink opened while the server restarts waits for it, and a named producer's
reconnect (a new stream, `producer_state`, the resend).
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import queue
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import NamedTuple, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.wire import messages, names
from flight_server.wire.errors import (
    Cancelled,
    CommitRaced,
    Unavailable,
    error_message,
    from_flight,
)
from flight_server.wire.schemas import by_name_columns, loosened, name_difference
from flight_server.wire.values import is_int
from producers.sink import SinkError, Slotted

log = logging.getLogger(__name__)  # a library: the application configures logging

_CLOSE = object()
T = TypeVar("T")
# pyarrow's client raises get_schema's own UNAVAILABLE and CANCELLED (connection refused or reset)
# as a bare OSError whose text ends with the status's name, which `from_flight` does not read.
_BARE_STATUS = re.compile(r"\. Detail: (Unavailable|Cancelled)\b")
# The retry's backoff: 0.05 s doubling to 0.5 s (the sink's connection retries as often, so a
# restarted server is reached within half a second of listening).
_FIRST_DELAY_S, _MAX_DELAY_S = 0.05, 0.5
# What a producer keeps in flight at most (sent, not yet acked, kept for resending): what the
# server commits in an interval and a commit at ~300 MB/s, whatever the batch size.
DEFAULT_MAX_UNACKED = 4096  # batches
DEFAULT_MAX_UNACKED_BYTES = 64 << 20
# Within those bounds the window follows the acks' latency (as delay-based congestion control
# does): each batch acked sooner than TARGET_ACK_S grows the window by half its size, each one
# acked later shrinks it by as much. A producer alone on a server grows its window until the
# server is busy; many producers sharing one keep ~TARGET_ACK_S of data in flight among them,
# not a queue (their `write` blocks instead).
TARGET_ACK_S = 0.2
WINDOW_GAIN = 0.5
MIN_WINDOW_BYTES = 1 << 20
# A new stream starts at the least (and grows by half each fast ack, so doubling about once a
# commit): 16 producers starting at 4 MiB each put 64 MiB in flight at once, ~0.7 s of acks.
START_WINDOW_BYTES = 1 << 20


class _Unacked(NamedTuple):
    """A batch sent and not yet acked, kept for resending."""

    seq: int
    batch: pa.RecordBatch
    nbytes: int  # computed once: RecordBatch.nbytes walks every buffer
    sent_at: float  # monotonic: its ack's latency moves the window


class _Lost(Exception):
    """The connection to the server broke (a named producer reconnects)."""


def retryable(error: BaseException) -> bool:
    """Whether `error` says the server went away, so the call may succeed when made again:
    UNAVAILABLE (the server is unreachable, restarting or shutting down) or CANCELLED, which a sink
    never causes itself (a server shutting down cancels the calls it still holds), however pyarrow
    raised it. Anything else is the server's answer (NOT_FOUND, INVALID_ARGUMENT,
    PERMISSION_DENIED, UNAUTHENTICATED, a refused batch, a failed commit, a call's deadline)."""
    if isinstance(error, _Lost) or isinstance(from_flight(error), (Unavailable, Cancelled)):
        return True
    return type(error) is OSError and _BARE_STATUS.search(str(error)) is not None


def retrying(what: str, timeout: float, attempt: Callable[[], T], cause: BaseException | None = None) -> T:
    """`attempt()`, made again while it fails `retryable`, with backoff, for at most `timeout` s;
    then SinkError saying it could not `what` (raised from `cause`, else the last error). Any other
    error is raised at once: retrying a user's mistake would only hide it until the deadline."""
    import tenacity  # here: it imports asyncio, a tenth of every flight_cli start-up that retries nothing

    def give_up(state: tenacity.RetryCallState):
        e = state.outcome.exception()
        raise SinkError(f"Could not {what} within {timeout} s: {error_message(e)}") from (cause or e)

    def logged(state: tenacity.RetryCallState) -> None:
        log.debug("sink_call_retried call=%s error=%s delay_s=%.2f", what,
                  error_message(state.outcome.exception()), state.upcoming_sleep)

    # No attempt starts past the deadline: stop before a sleep that would end after it.
    return tenacity.Retrying(
        retry=tenacity.retry_if_exception(retryable), stop=tenacity.stop_before_delay(timeout),
        wait=tenacity.wait_exponential(multiplier=_FIRST_DELAY_S, max=_MAX_DELAY_S),
        before_sleep=logged, retry_error_callback=give_up,
    )(attempt)


@contextlib.contextmanager
def _losing() -> Iterator[None]:
    """Around a call on the stream: a `retryable` error is a lost connection (`_Lost`)."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 - sorted by `retryable`; the rest is raised as it came
        if retryable(e):
            raise _Lost(e) from e
        raise


class PaimonSink(Slotted):
    """A producer's durable stream into one Paimon table; use as a context manager.

    `reconnect_timeout` bounds each retry (opening the sink; each reconnect of a named producer):
    calls that fail because the server is away are made again within it, and a user's mistake
    (an unknown table, a bad name, a missing grant or token) is raised at once."""

    def __init__(self, client, table: str, producer: str | None = None, reconnect_timeout: float = 60.0,
                 call_timeout: float | None = None, max_unacked: int = DEFAULT_MAX_UNACKED,
                 max_unacked_bytes: int = DEFAULT_MAX_UNACKED_BYTES, merge_schema: pa.Schema | None = None):
        if max_unacked < 1 or max_unacked_bytes < 1:
            raise ValueError(f"max_unacked ({max_unacked}) and max_unacked_bytes ({max_unacked_bytes}) must be positive.")
        self.table, self.producer = table, producer
        # Batches and bytes kept for resending; `write` waits past either (one batch always goes).
        self.max_unacked, self.max_unacked_bytes = max_unacked, max_unacked_bytes
        self.label = f"Paimon table {table!r}" + (f" (producer {producer!r})" if producer else "")
        self.reconnect_timeout = reconnect_timeout
        # Its own connection: after a server restart gRPC would otherwise wait up to 2 minutes
        # between connection attempts; this one retries at least every half second.
        self._client = type(client)(client.uri, timeout=client.timeout, max_reconnect_backoff_s=0.5,
                                    credentials=client.credentials)
        self._options = self._client.options(call_timeout)
        self.schema: pa.Schema | None = None
        self._stream_schema: pa.Schema | None = None
        self._merge_schema = merge_schema  # the batches' schema: its new columns join the table at the open
        # The table's last committed seq of this producer; batches are numbered after it.
        self.last_seq: int | None = None
        self._next_seq = 0
        self.last_snapshot: int | None = None  # the snapshot of the latest ack
        self.acked = 0  # batches acked (resent ones once)
        self.reconnects = 0
        self._lock = threading.Condition()
        self._unacked: collections.deque[_Unacked] = collections.deque()
        self._unacked_bytes = 0
        self._window = min(START_WINDOW_BYTES, max_unacked_bytes)  # bytes that may be unacked now
        self._slot: queue.Queue = queue.Queue(maxsize=1)
        self._error: BaseException | None = None
        self._closed = False
        self._writer = self._acks = self._acker = None
        self._stream_sent = 0
        self._ack_error: BaseException | None = None
        self._refused: messages.StreamFailed | None = None  # the server's word that the stream failed
        self._failing_since: float | None = None  # the first of failed commits with no ack since (resumed)
        try:
            # A sink opened while the server restarts waits for it, as a reconnect does.
            retrying(f"open {self.label}", reconnect_timeout, self._open)
        except BaseException:
            self._client.close()
            raise
        self._sender = threading.Thread(target=self._send_loop, name=f"paimon-sink-{table}", daemon=True)
        self._sender.start()

    # -- the caller's side ---------------------------------------------------------------

    def write(self, data: pa.RecordBatch | pa.Table, seq: int | None = None) -> None:
        """Send a batch (or each batch of a table), waiting while the server's commit queue is full.
        A named producer may number it itself with `seq` (strictly increasing; a table's batches get
        seq, seq + 1, ...); by default each batch gets the next number after the last."""
        for batch in self._batches(data):
            self._put((self._number(seq), batch), None)
            seq = None if seq is None else seq + 1

    def try_write(self, batch: pa.RecordBatch, timeout: float = 0.0, seq: int | None = None) -> bool:
        """Send `batch` if the sink takes it within `timeout` seconds; False leaves it unsent."""
        if not isinstance(batch, pa.RecordBatch):
            raise TypeError("try_write takes one pyarrow.RecordBatch; use write() for tables.")
        (batch,) = self._batches(batch)
        number = self._peek(seq)
        if not self._put((number, batch), timeout):
            return False
        self._next_seq = number + 1
        return True

    def close(self) -> None:
        """End the stream cleanly once every batch is committed; raises if any was refused or lost."""
        if not self._last(_CLOSE):
            return
        self._client.close()
        if self._error is not None:
            raise SinkError(f"The durable write into {self.label} failed: {error_message(self._error)}") from self._error

    def fail(self, cause: BaseException | str) -> None:
        """End the stream with an error: the server discards its batches not yet committed."""
        message = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
        if self._last(("fail", message)):
            self._client.close()

    @property
    def unacked(self) -> tuple[int, int]:
        """(batches, bytes) sent and not yet acked: what the sink keeps for resending."""
        with self._lock:
            return len(self._unacked), self._unacked_bytes

    # -- numbering and checks ------------------------------------------------------------

    def _peek(self, seq: int | None) -> int:
        if seq is None:
            return self._next_seq
        if self.producer is None:
            raise ValueError(f"{self.label}: only a named producer numbers its batches; open the sink with producer=.")
        if not is_int(seq, minimum=self._next_seq):
            raise ValueError(f"{self.label}: seq {seq!r} must be an integer >= {self._next_seq} (seqs increase).")
        return seq

    def _number(self, seq: int | None) -> int:
        number = self._peek(seq)
        self._next_seq = number + 1
        return number

    def _batches(self, data) -> list[pa.RecordBatch]:
        batches = data.to_batches() if isinstance(data, pa.Table) else [data]
        out = []
        for b in batches:
            if b.schema.equals(self._stream_schema, check_metadata=True):  # the common case: checked once
                out.append(b)
                continue
            diff = name_difference(self.schema, b.schema)
            if diff is not None:
                raise ValueError(f"Batch schema does not match {self.label} (columns match by name; a nullable one "
                                 f"the batch lacks is written null): {diff}.")
            out.append(pa.RecordBatch.from_arrays(by_name_columns(b, self._stream_schema), schema=self._stream_schema))
        return out

    # -- the connection ------------------------------------------------------------------

    def _descriptor(self) -> flight.FlightDescriptor:
        if self.producer is None:
            if self._merge_schema is None:
                return flight.FlightDescriptor.for_path(*names.paimon_path(self.table))
        command = names.write_command(self.table, self.producer, merge_schema=self._merge_schema is not None)
        return flight.FlightDescriptor.for_command(json.dumps(command))

    def _open(self) -> None:
        """The sink's first calls: the table's schema, the producer's last committed seq, the stream."""
        descriptor = flight.FlightDescriptor.for_path(*names.paimon_path(self.table))
        self.schema = self._client.flight.get_schema(descriptor, options=self._client.options()).schema
        if self._merge_schema is not None:  # the server adds what the table lacks as the stream opens
            self.schema = self._merge_schema
        self._stream_schema = loosened(self.schema)
        self.last_seq = self._client.producer_state(self.table, self.producer) if self.producer else None
        self._next_seq = 0 if self.last_seq is None else self.last_seq + 1
        self._open_stream()

    def _open_stream(self) -> None:
        self._writer, self._acks = self._client.flight.do_put(self._descriptor(), self._stream_schema,
                                                              options=self._options)
        self._stream_sent = 0
        self._ack_error = self._refused = None
        self._acker = threading.Thread(target=self._ack_loop, args=(self._acks,), name=f"paimon-acks-{self.table}",
                                       daemon=True)
        self._acker.start()

    def _write(self, seq: int, batch: pa.RecordBatch) -> None:
        with _losing():
            if self.producer is None:
                self._writer.write_batch(batch)
            else:
                self._writer.write_with_metadata(batch, pa.py_buffer(messages.batch_seq(seq)))
        self._stream_sent += 1

    def _end_refused(self, half_closed: bool = False) -> None:
        """The server said the stream failed: half-close and raise the call's status, which
        carries the error and its code (UNAVAILABLE from a closing server: reconnect). A named
        producer whose group commit lost a race with another writer (a conflict, or an outcome
        another server's expiry hid) resumes as after a lost connection (producer_state says what
        the table holds), until commits have failed for reconnect_timeout with no ack between them;
        any other failed commit (a full disk) is raised at once."""
        refused = self._refused
        if self._resumes_after(refused):
            self._drop_stream()
            raise _Lost(refused)
        with _losing():
            if not half_closed:
                self._writer.done_writing()
            self._writer.close()
        raise SinkError(f"The server failed the stream into {self.label}: {refused}") from refused

    def _resumes_after(self, refused: messages.StreamFailed) -> bool:
        if self.producer is None or refused.code != CommitRaced.code:
            return False
        now = time.monotonic()
        with self._lock:
            if self._failing_since is None:
                self._failing_since = now
            return now - self._failing_since < self.reconnect_timeout

    def _end_stream(self) -> None:
        """Send the end marker and wait for the last ack (the server answers after the commit)."""
        with _losing():
            self._writer.write_metadata(pa.py_buffer(messages.end(self._stream_sent)))
            self._writer.done_writing()
        self._acker.join()
        if self._refused is not None:
            self._end_refused(half_closed=True)
        with _losing():
            self._writer.close()
        if self._ack_error is not None:
            raise _Lost(self._ack_error) if retryable(self._ack_error) else self._ack_error
        with self._lock:
            if self._unacked:
                raise SinkError(f"The server ended the stream into {self.label} with {len(self._unacked)} "
                                "batch(es) unacked.")

    def _reconnect(self, cause: BaseException) -> None:
        """A named producer's resume (`_resume`), retried as every call is, within `reconnect_timeout`."""
        if self.producer is None:
            with self._lock:
                n = len(self._unacked)
            raise SinkError(
                f"The connection to the server broke with {n} batch(es) into {self.label} unacked; an unnamed "
                "producer cannot know whether they were committed (resending them is at-least-once; name the "
                f"producer for exactly-once): {cause}") from cause
        retrying(f"reconnect {self.label}", self.reconnect_timeout, self._resume, cause)

    def _resume(self) -> None:
        """A new stream, `producer_state`, then the unacked batches the table lacks, resent in order."""
        self._drop_stream()
        last = self._client.producer_state(self.table, self.producer)
        self._open_stream()
        with self._lock:
            while self._unacked and last is not None and self._unacked[0].seq <= last:
                self._pop_acked()
            if last is not None:
                self.last_seq = max(last, self.last_seq if self.last_seq is not None else last)
            resend = list(self._unacked)
        for sent in resend:
            self._write(sent.seq, sent.batch)
        self.reconnects += 1
        log.info("sink_reconnected sink=%s last_seq=%s resent=%d", self.label, last, len(resend))

    def _drop_stream(self) -> None:
        """Let go of a broken stream (once); its own errors are the reason we are here."""
        if self._writer is None:
            return
        writer, self._writer = self._writer, None
        try:
            writer.close()
        except (flight.FlightError, pa.ArrowException, OSError) as e:
            log.debug("broken_stream_closed sink=%s error=%s", self.label, str(e).splitlines()[0] if str(e) else "")
        self._acker.join(5)

    # -- the threads ---------------------------------------------------------------------

    def _send_loop(self) -> None:
        try:
            while True:
                item = self._slot.get()
                if isinstance(item, tuple) and item[0] == "fail":
                    if self._writer is None:
                        return  # the stream is gone: the server has discarded what it had not committed
                    self._writer.write_metadata(pa.py_buffer(messages.producer_error(item[1])))
                    self._writer.done_writing()
                    self._drop_stream()
                    return
                if item is _CLOSE:
                    while True:
                        try:
                            self._end_stream()
                            return
                        except _Lost as e:
                            self._reconnect(e.__cause__ or e)  # then end the new stream
                seq, batch = item
                nbytes = batch.nbytes
                with self._lock:
                    # Bounded memory for resends; a dead ack reader means the write below fails.
                    while self._unacked and self._acker.is_alive() and (
                            len(self._unacked) >= self.max_unacked
                            or self._unacked_bytes + nbytes > self._window):
                        self._lock.wait(0.1)
                    self._unacked.append(_Unacked(seq, batch, nbytes, time.monotonic()))
                    self._unacked_bytes += nbytes
                try:
                    if self._refused is not None:
                        self._end_refused()
                    self._write(seq, batch)
                except _Lost as e:
                    self._reconnect(e.__cause__ or e)  # resends the unacked batches, this one too
        except BaseException as e:  # noqa: BLE001 - handed to the caller by _raise_if_broken / close
            self._error = self._error or e

    def _pop_acked(self) -> None:
        """(Holding the lock.) The oldest unacked batch is committed: the window follows its latency."""
        sent = self._unacked.popleft()
        self._unacked_bytes -= sent.nbytes
        self.acked += 1
        step = int(sent.nbytes * WINDOW_GAIN)
        grown = self._window + step if time.monotonic() - sent.sent_at < TARGET_ACK_S else self._window - step
        self._window = min(self.max_unacked_bytes, max(MIN_WINDOW_BYTES, grown))

    def _ack_loop(self, acks) -> None:
        try:
            while (buf := acks.read()) is not None:
                try:
                    ack = messages.read_ack(buf)
                except messages.StreamFailed as e:
                    with self._lock:
                        self._refused = e
                        self._lock.notify_all()
                    return
                with self._lock:
                    self._failing_since = None  # commits land again
                    if self._unacked and self._unacked[0].seq == ack.seq:
                        self._pop_acked()
                        self._lock.notify_all()
                    else:
                        self.acked += 1
                    if self.producer is not None:
                        self.last_seq = ack.seq
                    if ack.snapshot is not None:
                        self.last_snapshot = ack.snapshot
        except BaseException as e:  # noqa: BLE001 - the sender reads it at the end, or reconnects
            self._ack_error = e
