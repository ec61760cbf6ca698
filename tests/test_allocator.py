"""The glibc malloc settings take effect on this (glibc) machine, and the environment wins."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

PROBE = ("from flight_server.wire.allocator import one_malloc_arena, reuse_batch_buffers; "
         "print(one_malloc_arena(), reuse_batch_buffers(), reuse_batch_buffers())")


def probe(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run([sys.executable, "-c", PROBE], env={**clean, **env}, capture_output=True,
                         text=True, timeout=60, check=True)
    return out.stdout.strip()


@pytest.mark.skipif(not os.confstr("CS_GNU_LIBC_VERSION").startswith("glibc"), reason="glibc only")
def test_settings_apply_and_the_environment_wins():
    assert probe() == "True True True"
    assert probe(MALLOC_ARENA_MAX="4", MALLOC_TRIM_THRESHOLD_="1048576") == "False False False"
