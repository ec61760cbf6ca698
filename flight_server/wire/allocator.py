"""glibc malloc settings for processes that move large Arrow batches through Flight.

Flight (gRPC) receives each message into 64 KiB slices and copies it into one contiguous buffer
(~4 MiB for a 64k-row batch) with malloc, not in Arrow's pool. glibc's defaults handle that
pattern badly: the mmap threshold rises to the size of the last freed mmapped chunk, so these
buffers move to the heap, and every free past the trim threshold (twice the mmap threshold)
gives pages back that the next batch faults in again (scripts/bench_push.py's CPU seconds per
GiB: docs/benchmarks_push.md). A MALLOC_* setting in the environment wins.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD, M_ARENA_MAX = -1, -3, -8  # glibc's mallopt parameters
MMAP_THRESHOLD = 32 << 20  # glibc's maximum: batch buffers stay in the heap and are reused
TRIM_THRESHOLD = 64 << 20  # free heap kept for the next batches before pages go back

_reusing = False  # reuse_batch_buffers() took effect in this process
_one_arena = False  # one_malloc_arena() took effect in this process


def _glibc() -> bool:
    try:
        return sys.platform.startswith("linux") and (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (ValueError, OSError):
        return False  # the C library does not say: not glibc, leave malloc alone


def _mallopt(param: int, value: int) -> bool:
    """Set one glibc malloc parameter; True when glibc took it."""
    return _glibc() and ctypes.CDLL("libc.so.6").mallopt(param, value) == 1


def one_malloc_arena() -> bool:
    """The server: one arena for all threads; True when it was set.

    Received push batches are freed by other threads than the ones that allocated them. Spread
    over glibc's default of up to 8 arenas per core they fragment many arenas and server RSS
    climbs with the volume pushed (docs/benchmarks_push.md, "Server RSS"). Call it before pyarrow
    is imported (flight_cli's main does, first): importing pyarrow.flight already starts a thread
    that makes a second arena, and a limit set after that leaves the threads spread over both.
    """
    global _one_arena
    _one_arena = _one_arena or ("MALLOC_ARENA_MAX" not in os.environ and _mallopt(M_ARENA_MAX, 1))
    return _one_arena


def release_free_memory() -> bool:
    """Give free memory back to the OS: Arrow's memory pool's unused pages, then the heap's free
    pages (glibc `malloc_trim(0)`); True when glibc freed any.

    The durable-write committer calls it after a commit of many bytes: the group's Arrow batches,
    gRPC's receive buffers and the Parquet writer's buffers are freed by then, and without it glibc
    keeps much of them (docs/benchmarks_ingest.md, "Server RSS"). Arrow's default pool (mimalloc)
    keeps pages it no longer uses until asked: about 17 KiB per table written and then evicted
    (docs/benchmarks_ingest.md, "Many tables on one server").
    """
    arrow = sys.modules.get("pyarrow")  # never imported here: one_malloc_arena() must come first
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
    return _glibc() and ctypes.CDLL("libc.so.6").malloc_trim(0) == 1


def one_malloc_arena_set() -> bool:
    """Whether one_malloc_arena() took effect in this process."""
    return _one_arena


def reuse_batch_buffers() -> bool:
    """A process that reads large batches: keep their buffers in the heap for the next ones.

    Fixed thresholds (which also turn off glibc's dynamic adjustment) cut a reader's page faults
    from ~100k to ~1k per GiB and its CPU per GiB by about a third, holding at most
    TRIM_THRESHOLD of free heap. Safe to call at any time, more than once; True when set.
    """
    global _reusing
    if not _reusing and not {"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"} & set(os.environ):
        _reusing = _mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) and _mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    return _reusing
