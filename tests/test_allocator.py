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


def test_release_free_memory_never_imports_pyarrow():
    """It asks Arrow's pool to give its unused pages back only once pyarrow is loaded: importing
    pyarrow there would come before one_malloc_arena() in a command that calls it first."""
    code = ("import sys; from flight_server.wire.allocator import release_free_memory; release_free_memory(); "
            "print('pyarrow' in sys.modules); import pyarrow as pa; b = pa.allocate_buffer(1 << 24); del b; "
            "release_free_memory(); print(pa.total_allocated_bytes())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.split() == ["False", "0"]
