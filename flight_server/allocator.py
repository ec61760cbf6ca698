"""The server process's glibc malloc set-up: one arena, so received push batches do not fragment."""

from __future__ import annotations

import ctypes
import os
import sys

M_ARENA_MAX = -8  # glibc's mallopt parameter number


def one_malloc_arena() -> bool:
    """Make glibc's malloc use one arena for the server's threads; True when it was set.

    Received push batches live in gRPC's malloc'ed buffers (64 KiB read slices, then one
    contiguous ~4 MiB copy per message), not in Arrow's pool, and are freed by other threads
    than the ones that allocated them. With glibc's default of up to 8 arenas per core those
    buffers fragment many arenas, and every arena that shrinks has to be faulted back in: server
    RSS climbed with the volume pushed. One arena measured less RSS (no climb) and less CPU
    (about 7x fewer page faults); see docs/bench-results/push.json. A MALLOC_ARENA_MAX in the
    environment wins.

    Call it before pyarrow is imported (flight_cli does, at its top): importing pyarrow.flight
    already starts a thread that makes a second arena, and a limit set after that leaves the threads spread
    over both (measured: RSS growth 166 MiB instead of 132, 5x the page faults).
    """
    if "MALLOC_ARENA_MAX" in os.environ or not sys.platform.startswith("linux"):
        return False
    try:
        if not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"):
            return False
    except (ValueError, OSError):
        return False
    try:
        return ctypes.CDLL("libc.so.6").mallopt(M_ARENA_MAX, 1) == 1
    except (OSError, AttributeError):
        return False
