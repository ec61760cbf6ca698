"""The pure parts of a table's committer, without threads or a table: the producer fence
(ingest/fence.py), the malloc_trim policy (ingest/trim.py) and a chore's outcome (ingest/chores.py).
The committer's queue and commit policy are in test_batch_queue.py."""

from __future__ import annotations

import threading
import time

import pytest

from flight_server.ingest.chores import Chore
from flight_server.ingest.fence import ProducerFence
from flight_server.ingest.trim import TrimPolicy

pytestmark = pytest.mark.timeout(60)


def test_a_producers_newer_stream_takes_over_and_an_older_release_leaves_it():
    fence: ProducerFence[str] = ProducerFence()
    assert fence.current("p") is None and fence.writing() == []
    fence.take_over("p", "s1")
    fence.take_over("q", "t1")
    fence.take_over("p", "s2")
    assert fence.current("p") == "s2" and fence.writing() == ["p", "q"]
    fence.release("p", "s1")  # the fenced stream ends after its successor opened
    assert fence.current("p") == "s2"
    fence.release("p", "s2")
    assert fence.current("p") is None and fence.writing() == ["q"]


def test_a_producer_is_settled_once_every_batch_taken_is_committed_or_failed():
    fence: ProducerFence[str] = ProducerFence()
    assert fence.settled("p")
    for _ in range(3):
        fence.taken("p")
    fence.taken("q")
    fence.settle("p")
    fence.settle("p")
    assert not fence.settled("p") and not fence.settled("q")
    fence.settle("p")
    assert fence.settled("p") and not fence.settled("q")
    with pytest.raises(KeyError):
        fence.settle("p")  # more settled than taken is a bug, never silently negative


def test_trim_waits_for_its_bytes_then_trims_when_idle_or_every_so_often_under_load():
    trim = TrimPolicy(after_bytes=100, every_s=2.0)
    assert not trim.committed(60, idle=True, now=0.0), "below the bytes: never"
    assert trim.committed(60, idle=False, now=0.1), "the first trim under load: at once"
    assert not trim.committed(150, idle=False, now=1.0), "under load: at most once an every_s"
    assert trim.committed(0, idle=False, now=2.2), "under load, every_s later"
    assert not trim.committed(50, idle=True, now=2.3)
    assert trim.committed(50, idle=True, now=2.4), "idle (the end of a burst) once the bytes are there"


def test_a_chore_hands_its_result_or_its_error_to_the_thread_that_asked():
    ok, bad = Chore(lambda: 42), Chore(lambda: 1 / 0)
    for chore in (ok, bad):
        threading.Thread(target=chore.run).start()
        assert chore.done.wait(30)
    assert ok.outcome() == 42
    with pytest.raises(ZeroDivisionError):
        bad.outcome()
    failed = Chore(lambda: 1)
    failed.fail(RuntimeError("the committer closed"))
    assert failed.done.is_set()
    with pytest.raises(RuntimeError, match="closed"):
        failed.outcome()


def test_the_commit_gate_holds_its_slots_and_hands_each_freed_one_to_the_longest_waiter():
    from flight_server.ingest.gate import CommitGate

    gate = CommitGate(2)
    order, entered = [], threading.Event()
    gate.__enter__()
    gate.__enter__()  # both slots held

    def waiter(i: int) -> None:
        with gate:
            order.append(i)
            entered.set()

    threads = []
    for i in range(3):
        t = threading.Thread(target=waiter, args=(i,))
        t.start()
        threads.append(t)
        deadline = time.monotonic() + 30
        while gate.waiting() != i + 1:  # queued in this order
            assert time.monotonic() < deadline, "a waiter never queued"
            time.sleep(0.001)
    assert order == [] and not entered.is_set(), "no slot was free"
    gate.__exit__(None, None, None)  # one slot: each waiter hands it to the next as it leaves
    for t in threads:
        t.join(30)
    assert order == [0, 1, 2], "first come, first served"
    assert gate.waiting() == 0
    gate.__exit__(None, None, None)
    with gate, gate:  # both slots free again
        assert gate.waiting() == 0
    with pytest.raises(ValueError, match="at least one slot"):
        CommitGate(0)
