"""One producer stream as a table's committer sees it: its acks in order, then END or its error."""

from __future__ import annotations

import queue

END = object()  # the last item of a stream's ack queue (or the stream's error, once it fails)


class WriteStream:
    """One producer stream as the committer sees it: its acks in order, its error once it has one."""

    def __init__(self, label: str, producer: str | None):
        self.label, self.producer = label, producer
        self.acks: queue.SimpleQueue = queue.SimpleQueue()  # (seq, snapshot) in stream order, then END or an error
        self.error: BaseException | None = None
        self.outstanding = 0  # submitted, neither acked nor failed
        self.last_seq: int | None = None  # the producer's last seq on this stream
        self.closed = False  # acks are no longer wanted (the stream ended or broke)
        self.skipped = 0  # resent batches the table already held
        self.columns = None  # the table's schema version its batches are conformed to (compat.Columns)
