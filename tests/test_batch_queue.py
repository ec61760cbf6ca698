"""The committer's pure parts: the bounded batch queue (chunks, seals, bytes) and the commit policy."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import given
from hypothesis import strategies as st

from flight_server.ingest.batch_queue import (
    COALESCE_BYTES,
    COALESCE_ROWS,
    BatchQueue,
    CommitPolicy,
    default_queue_bytes,
)


@dataclass
class Item:
    order: int
    nbytes: int
    rows: int
    stream: str = "a"


def filled(sizes, limit=64 << 20) -> BatchQueue:
    q = BatchQueue(limit)
    for i, (nbytes, rows) in enumerate(sizes, 1):
        q.append(Item(i, nbytes, rows))
    return q


def test_a_writer_waits_for_a_chunk_unless_a_seal_is_coming():
    q = filled([(1000, 1000)] * 10)
    assert not q.takeable(None), "10,000 rows, 10 KB: less than a chunk"
    assert q.takeable(3), "a seal through order 3: take what it covers"
    assert [i.order for i in q.take(3)] == [1, 2, 3], "never past the seal"
    assert not q.takeable(3), "what is left comes after the seal"
    q = filled([(1000, 1000)] * 66)
    assert q.takeable(None) and [i.order for i in q.take(None)] == list(range(1, 66)), "at most 65,536 rows a write"
    assert (len(q), q.rows, q.bytes) == (1, 1000, 1000)


def test_a_chunk_holds_at_least_one_batch_and_stops_at_the_byte_bound():
    q = filled([(COALESCE_BYTES * 2, 10), (10, 10)])
    assert [i.order for i in q.take(None)] == [1], "one batch larger than a chunk is written alone"
    q = filled([(COALESCE_BYTES // 2, 10)] * 3)
    assert [i.order for i in q.take(None)] == [1, 2]


def test_the_bound_and_what_a_fenced_stream_leaves():
    q = BatchQueue(4 << 20)
    assert q.chunk_bytes == 2 << 20, "a full queue is always a chunk"
    for i in range(4):
        q.append(Item(i, 1 << 20, 10, stream="a" if i % 2 else "b"))
    assert q.full() and q.takeable(None)
    removed = q.remove(lambda item: item.stream == "a")
    assert [i.order for i in removed] == [1, 3] and not q.full() and (q.bytes, q.rows) == (2 << 20, 20)
    assert q.first_order() == 0 and [i.order for i in q.clear()] == [0, 2] and (q.bytes, q.rows, len(q)) == (0, 0, 0)


@given(st.lists(st.tuples(st.integers(1, 3 * COALESCE_BYTES), st.integers(1, 2 * COALESCE_ROWS)), max_size=40),
       st.none() | st.integers(0, 40))
def test_take_keeps_order_and_accounts_every_byte(sizes, flush_to):
    q = filled(sizes)
    taken = []
    while q.takeable(flush_to) or (flush_to is None and q):
        chunk = q.take(flush_to)
        assert chunk and (len(chunk) == 1 or (sum(i.rows for i in chunk) <= COALESCE_ROWS
                                              and sum(i.nbytes for i in chunk) <= COALESCE_BYTES))
        if flush_to is not None:  # taken only while the queue's first batch is within the seal
            assert all(i.order <= flush_to for i in chunk), (flush_to, [i.order for i in chunk])
        taken += chunk
    assert [i.order for i in taken] == list(range(1, len(taken) + 1))
    assert q.bytes == sum(n for n, _ in sizes[len(taken):]) and q.rows == sum(r for _, r in sizes[len(taken):])


def test_a_group_commit_is_due_after_the_interval_or_once_commit_bytes_wait():
    policy = CommitPolicy(0.1, 1000)
    assert policy.wait_s(10, 0.02) > 0.07
    assert policy.wait_s(10, 0.1) <= 0 and policy.wait_s(1000, 0.0) == 0
    assert policy.crossed(0, 5), "the first batch of a group wakes the commit thread"
    assert not policy.crossed(10, 5) and policy.crossed(999, 1) and not policy.crossed(1000, 1)


def test_the_queue_bound_follows_commit_bytes_within_4_and_16_mib():
    assert default_queue_bytes(1 << 20) == 4 << 20
    assert default_queue_bytes(32 << 20) == 8 << 20
    assert default_queue_bytes(1 << 30) == 16 << 20
