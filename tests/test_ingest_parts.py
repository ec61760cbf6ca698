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


def test_the_commit_pool_runs_due_jobs_first_come_first_served_one_step_at_a_time_and_at_their_time():
    from flight_server.ingest.commit_pool import CommitPool

    pool = CommitPool(1)
    ran: list[str] = []
    gate, started = threading.Event(), threading.Event()

    class Job:
        def __init__(self, name, delays):
            self.name, self.delays, self.running = name, list(delays), 0

        def step(self):
            self.running += 1
            assert self.running == 1, "a job never runs on two threads at once"
            ran.append(self.name)
            if self.name == "blocker":
                started.set()
                assert gate.wait(30)
            self.running -= 1
            return self.delays.pop(0) if self.delays else None

    try:
        blocker, a, b, c = Job("blocker", []), Job("a", [0]), Job("b", []), Job("c", [0.2])
        pool.wake(blocker)
        assert started.wait(30)
        for job in (a, b, c, a):  # a woken twice while waiting: once in the queue
            pool.wake(job)
        assert pool.waiting() == 3
        gate.set()
        deadline = time.monotonic() + 30
        while ran.count("c") < 2:  # c asked to run again 0.2 s later
            assert time.monotonic() < deadline, f"c never ran again: {ran}"
            time.sleep(0.01)
        assert ran[:6] == ["blocker", "a", "b", "c", "a", "c"], "in the order they fell due; a's 0 runs it again at once"
        pool.wake(b)
        while ran.count("b") < 2:
            assert time.monotonic() < deadline, f"b was not run again when woken: {ran}"
            time.sleep(0.01)
    finally:
        gate.set()
        pool.stop()
        assert pool.join(30)
    with pytest.raises(ValueError, match="at least one thread"):
        CommitPool(0)


def test_the_writer_pool_pins_lanes_to_its_least_loaded_threads_and_serves_each_on_its_own():
    from flight_server.ingest.writer_pool import WriterPool

    pool = WriterPool(2)
    try:
        assert sorted(pool.pin(2)) == [0, 1], "one table's lanes on distinct threads"
        assert len(pool.pin(3)) == 3
        served: dict[str, set[str]] = {}
        done = threading.Event()

        class Lane:
            def __init__(self, name, times):
                self.name, self.times = name, times

            def serve(self):
                served.setdefault(self.name, set()).add(threading.current_thread().name)
                self.times -= 1
                if self.name == "y" and self.times == 0:
                    done.set()
                return self.times > 0

        pool.kick(0, Lane("x", 5))
        pool.kick(1, Lane("y", 5))
        assert done.wait(30)
        deadline = time.monotonic() + 30
        while len(served) < 2 or "x" not in served:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        assert served["y"] == {"write-1"}, "a lane is served on its pinned thread only"
    finally:
        pool.stop()
        assert pool.join(30)
