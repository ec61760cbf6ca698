"""Where a reader of a follow or a push view is, endpoint by endpoint, so that a stream opened again
(after its server restarted) resumes exactly: no row twice, none lost.

A Paimon follow's endpoints each send `{"snapshot": S}` beside their rows and `{"done": N}` after
each snapshot. `FollowCursor` keeps, per endpoint, the last done mark and how many rows of the
snapshot in progress were handed out; a follow opened again at `resume_start()` (the snapshot after
the lowest done mark) sends some of that again, which `admit` drops: whole snapshots at or below the
endpoint's done mark, and the first rows of the snapshot in progress (an endpoint reads a snapshot's
splits in a stable order, so the same rows come first again).

A push view's batches carry `{"seq": N}`; `ViewCursor` drops the seqs already handed out when the
view is opened again on the same server (a restarted server's push table is a new one: its seqs
start again at 0, and nothing is dropped).
"""

from __future__ import annotations

import pyarrow as pa

from flight_server.wire import messages
from flight_server.wire.errors import WrongState


class _Endpoint:
    """One endpoint's position: `done` (its last done mark), `snap` and `rows` (the snapshot whose
    rows came after it and how many were handed out), `replayed` (rows of `snap` received since
    the stream was last opened: `rows - replayed` are still to drop)."""

    __slots__ = ("done", "snap", "rows", "replayed")

    def __init__(self):
        self.done: int | None = None
        self.snap: int | None = None
        self.rows = 0
        self.replayed = 0


class FollowCursor:
    """A reader's position in a Paimon follow of `endpoints` endpoints opened at `start` (pinned:
    `snapshot:N` or `snapshot-full:N`, so that opening it again reads the same)."""

    def __init__(self, endpoints: int, start: str):
        self.start = start
        self._at = [_Endpoint() for _ in range(endpoints)]

    @property
    def endpoints(self) -> int:
        return len(self._at)

    def resume_start(self) -> str:
        """The `start` of the follow opened again: the snapshot after the lowest done mark, or the
        first start while an endpoint has sent none."""
        done = [e.done for e in self._at]
        if None in done:
            return self.start
        return f"snapshot:{min(done) + 1}"

    def reopened(self, endpoints: int) -> None:
        """The follow was opened again (at `resume_start()`) with `endpoints` endpoints."""
        if endpoints != len(self._at):
            raise WrongState(f"The follow opened again has {endpoints} endpoints, not {len(self._at)}: the table's "
                             "buckets changed (was it dropped and created again?); follow it again.")
        for e in self._at:
            e.replayed = 0

    def admit(self, endpoint: int, batch: pa.RecordBatch | None, metadata) -> pa.RecordBatch | None:
        """What of one received chunk is new: the batch, a slice of it, or None (all seen before).
        Call it for every chunk, in order, and hand out what it returns."""
        e = self._at[endpoint]
        mark = messages.read_mark(metadata)
        if mark.done is not None:
            e.done = mark.done if e.done is None else max(e.done, mark.done)
            if e.snap is not None and e.snap <= e.done:
                e.snap, e.rows, e.replayed = None, 0, 0
        if batch is None or not batch.num_rows or mark.snapshot is None:
            return batch
        s, n = mark.snapshot, batch.num_rows
        if e.done is not None and s <= e.done:
            return None
        if s != e.snap:  # the next snapshot's first rows
            e.snap, e.rows, e.replayed = s, n, n
            return batch
        skip = max(0, min(n, e.rows - e.replayed))
        e.replayed += n
        e.rows += n - skip
        if skip == n:
            return None
        return batch.slice(skip) if skip else batch


class ViewCursor:
    """The last seq handed out of each viewed push partition (by endpoint)."""

    def __init__(self, endpoints: int):
        self.last: list[int | None] = [None] * endpoints
        self.same_table = True  # False once opened again on a restarted server: its seqs are new

    @property
    def endpoints(self) -> int:
        return len(self.last)

    def reopened(self, same_table: bool) -> None:
        self.same_table = same_table
        if not same_table:
            self.last = [None] * len(self.last)

    def admit(self, endpoint: int, batch: pa.RecordBatch | None, metadata) -> pa.RecordBatch | None:
        seq = messages.read_mark(metadata).seq
        if seq is None:
            return batch
        last = self.last[endpoint]
        if last is not None and seq <= last:
            return None
        self.last[endpoint] = seq
        return batch
