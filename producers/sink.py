"""TableSink: push record batches into one push-table partition over a Flight do_put stream.

One sender thread owns the gRPC write side (it is the one that blocks under backpressure) and
one thread reads the server's acks (docs/protocol.md). Between the caller and the sender sits a
one-slot queue: `write` waits for the slot, `try_write` gives up after its timeout with the
batch not taken, so a False never means "half sent".
"""

from __future__ import annotations

import logging
import queue
import threading

import pyarrow as pa
import pyarrow.flight as flight

from flight_server.wire import messages, names
from flight_server.wire.errors import error_message

log = logging.getLogger(__name__)  # a library: the application configures logging

_CLOSE = object()
_FAIL_WAIT_S = 1.0  # how long an in-band failure may wait behind a blocked write


class SinkError(RuntimeError):
    """The stream ended with an error (the server refused it, the table failed, a commit failed)."""


class Slotted:
    """What every sink shares: a one-slot hand-off to its sender thread, and the `with` contract
    (an exception inside fails the stream in-band; a clean exit closes it)."""

    label: str
    _sender: threading.Thread
    _error: BaseException | None
    _closed: bool

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc is not None:
            self.fail(exc)
        else:
            self.close()
        return False

    def _last(self, item) -> bool:
        """Hand the sender its last item (the end, or a failure) and wait until it is done with it;
        False when the sink was already closed. Closing waits out backpressure: the sender
        returns once its last write is taken or the call fails."""
        if self._closed:
            return False
        self._closed = True
        self._put(item, None, check=False)
        self._sender.join()
        return True

    def _put(self, item, timeout: float | None, check: bool = True) -> bool:
        waited = 0.0
        while True:
            if check:
                self._raise_if_broken()
            try:
                self._slot.put(item, timeout=0.05)
                return True
            except queue.Full:
                waited += 0.05
                if timeout is not None and waited >= timeout:
                    return False
                if not self._sender.is_alive():
                    self._raise_if_broken()
                    raise SinkError(f"The stream to {self.label} is closed.") from None

    def _raise_if_broken(self) -> None:
        if self._error is not None:
            raise SinkError(f"The stream to {self.label} failed: {error_message(self._error)}") from self._error
        if self._closed:
            raise SinkError(f"The sink for {self.label} is closed; open a new one to write more.")


class TableSink(Slotted):
    """A producer's end of one push-table partition; use as a context manager.

    Inside `with sink:` any exception fails the partition in-band (the reader gets the cause),
    and a clean exit closes it with the end marker `{"end": N}` (the reader gets EOF once every
    writer has closed). A sink that is never closed never ends its partition cleanly.

    No call of a push sink is retried, unlike a PaimonSink's: a push partition is memory and fails
    when its server goes away (docs/protocol.md), so there is nothing to resend into or wait for.
    """

    def __init__(self, client, name: str, partition: int, schema: pa.Schema,
                 call_timeout: float | None = None):
        self.name, self.partition, self.schema = name, partition, schema
        self._client = client
        self.label = f"push table {name!r} partition {partition}"
        options = client.options(call_timeout)
        descriptor = flight.FlightDescriptor.for_path(*names.push_path(name, partition))
        self._writer, self._acks = client.flight.do_put(descriptor, schema, options=options)
        self._slot: queue.Queue = queue.Queue(maxsize=1)
        self._error: BaseException | None = None
        self._closed = False
        self._failed = False
        self.acked = -1  # highest sequence number the server accepted
        self.sent = 0
        self._sender = threading.Thread(target=self._send_loop, name=f"sink-send-{name}-{partition}", daemon=True)
        self._acker = threading.Thread(target=self._ack_loop, name=f"sink-ack-{name}-{partition}", daemon=True)
        self._sender.start()
        self._acker.start()

    # -- the caller's side ---------------------------------------------------------------

    def write(self, data: pa.RecordBatch | pa.Table) -> None:
        """Send a batch (or each batch of a table), waiting while the partition is full."""
        for batch in self._batches(data):
            self._put(batch, None)

    def try_write(self, batch: pa.RecordBatch, timeout: float = 0.0) -> bool:
        """Send `batch` if the sink takes it within `timeout` seconds; False leaves it unsent."""
        if not isinstance(batch, pa.RecordBatch):
            raise TypeError("try_write takes one pyarrow.RecordBatch; use write() for tables.")
        self._batches(batch)
        return self._put(batch, timeout)

    def close(self) -> None:
        """End the stream cleanly (idempotent); raises if the server refused anything sent."""
        if not self._last(_CLOSE):  # a consumer cancel, drop, shutdown or the call's deadline end a wait
            return
        # The acks end when the server has appended the last batch (it may still be waiting
        # for room) or has failed the stream; the call's own deadline bounds this wait.
        self._acker.join()
        try:
            self._writer.close()
        except flight.FlightError as e:
            self._error = self._error or e
        if self._error is not None:
            raise SinkError(f"The push stream to {self.label} failed: {self._error}") from self._error

    def fail(self, cause: BaseException | str) -> None:
        """End the partition with an error its reader receives; returns promptly even when full."""
        if self._closed:
            return
        self._closed = self._failed = True
        message = cause if isinstance(cause, str) else f"{type(cause).__name__}: {cause}"
        queued = self._put(("fail", message), _FAIL_WAIT_S, check=False)
        self._sender.join(_FAIL_WAIT_S if queued else 0)
        if self._sender.is_alive():
            # The sender is stuck behind backpressure: the in-band message cannot pass it, so fail
            # the partition out of band; the server then ends the blocked stream.
            try:
                self._client.fail(self.name, message, partition=self.partition)
            except flight.FlightError as e:
                # e.g. a principal without the 'admin' grant `fail` needs: closing the writer below
                # cancels the stream, and the server fails the partition as a broken stream.
                log.warning("sink_fail_action_refused sink=%s error=%s", self.label, error_message(e))
            self._sender.join(5)
        try:
            self._writer.close()
        except flight.FlightError as e:
            log.debug("sink_closed_after_fail sink=%s error=%s", self.label, str(e).splitlines()[0])

    def _batches(self, data) -> list[pa.RecordBatch]:
        batches = data.to_batches() if isinstance(data, pa.Table) else [data]
        for b in batches:
            if not b.schema.equals(self.schema, check_metadata=False):
                raise ValueError(
                    f"Batch schema does not match {self.label}: got {b.schema}, expected {self.schema}."
                )
        return batches

    # -- the threads ---------------------------------------------------------------------

    def _send_loop(self) -> None:
        try:
            while True:
                item = self._slot.get()
                if item is _CLOSE:
                    # The explicit clean end: without it the server fails the partition, so a
                    # producer that dies (its writer closed by destructors) never looks finished.
                    self._writer.write_metadata(messages.end(self.sent))
                    self._writer.done_writing()
                    return
                if isinstance(item, tuple):
                    self._writer.write_metadata(messages.producer_error(item[1]))
                    self._writer.done_writing()
                    return
                self._writer.write_batch(item)
                self.sent += 1
        except BaseException as e:  # noqa: BLE001 - handed to the caller by _raise_if_broken
            self._error = self._error or e

    def _ack_loop(self) -> None:
        try:
            while (buf := self._acks.read()) is not None:
                self.acked = messages.read_ack(buf).seq
        except BaseException as e:  # noqa: BLE001 - the same error reaches close()/write()
            if not self._failed:
                self._error = self._error or e
