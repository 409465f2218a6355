"""Chroma's vector index (hnswlib) writes memory it never initialised into a scope's index
file; the mem0 engine has the C allocator fill every block it hands out, so no text the
process held before (another person's facts) can end up there."""

from __future__ import annotations

import ctypes

import pytest

from mindroom.memory.mem0 import engine


def test_after_the_scrub_every_block_malloc_hands_out_is_filled_with_one_byte() -> None:
    libc = ctypes.CDLL(None)
    if not hasattr(libc, "mallopt"):
        pytest.skip("not glibc: the allocator has no scrub (docs/privacy.md says so)")
    libc.malloc.restype = ctypes.c_void_p
    libc.malloc.argtypes = [ctypes.c_size_t]
    libc.free.argtypes = [ctypes.c_void_p]
    size = 4096  # below the mmap threshold: a heap block that may hold what was freed before

    assert engine.scrub_allocations()
    block = libc.malloc(size)
    try:
        seen = ctypes.string_at(block, size)
    finally:
        libc.free(block)

    # not zeros, not leftovers: the filler (glibc hands out the perturb byte inverted)
    assert set(seen) == {engine._PERTURB_BYTE ^ 0xFF}
