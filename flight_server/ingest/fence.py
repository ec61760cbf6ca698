"""Which stream of each named producer may write into a table, and which of its batches are in
flight: the state behind fencing (a producer's newer stream takes over from its older one) and
behind `producer_state` (what the table holds once a producer's written batches have landed).

Pure: no threads, no lock (the table's committer holds its lock around every call), so the rules
are tested on their own (tests/test_ingest_parts.py).
"""

from __future__ import annotations

from typing import Generic, TypeVar

S = TypeVar("S")


class ProducerFence(Generic[S]):
    """Per named producer: its current stream, and its batches a writer took that are neither
    committed nor failed yet (`unsettled`)."""

    def __init__(self) -> None:
        self._active: dict[str, S] = {}
        self._unsettled: dict[str, int] = {}

    def current(self, producer: str) -> S | None:
        """The producer's stream that writes now (None: none)."""
        return self._active.get(producer)

    def take_over(self, producer: str, stream: S) -> None:
        """`stream` is now the producer's only writing stream (the caller fenced the old one)."""
        self._active[producer] = stream

    def release(self, producer: str, stream: S) -> None:
        """`stream` ended or broke: the producer has no writing stream, unless a newer one took over."""
        if self._active.get(producer) is stream:
            del self._active[producer]

    def writing(self) -> list[str]:
        """The producers that have a writing stream, sorted."""
        return sorted(self._active)

    def taken(self, producer: str) -> None:
        """A writer took one of the producer's batches."""
        self._unsettled[producer] = self._unsettled.get(producer, 0) + 1

    def settle(self, producer: str) -> None:
        """One of the producer's taken batches was committed or failed."""
        left = self._unsettled[producer] - 1
        if left:
            self._unsettled[producer] = left
        else:
            del self._unsettled[producer]

    def settled(self, producer: str) -> bool:
        """Whether none of the producer's taken batches waits for a commit."""
        return not self._unsettled.get(producer)
