"""Keep glibc's malloc from mapping and unmapping every large buffer (bench/profiles/malloc.md).

A broker allocates and frees megabyte buffers many times a second: a produce request's batch
bytes, a pread of a fetch answer, gRPC's message buffers. By default glibc serves a block over
its mmap threshold (128 KiB at first, raised only as far as the largest block freed) with a
fresh mmap and returns it with munmap, and trims the heap's free top back to the system: each
such buffer is faulted in page by page again, which on these virtual machines costs ~1 ms per
MiB, twenty times the copy itself. Raising both thresholds keeps those buffers in the heap,
where freed memory is reused without faults; the price is a heap that keeps up to
TRIM_THRESHOLD_BYTES of free memory instead of returning it.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os

# mallopt's parameter numbers (glibc's malloc.h).
M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3

# Blocks up to this size come from the heap: above Kafka's largest batch (message.max.bytes,
# ~1 MiB) and a follower's whole fetch answer (replica.fetch.response.max.bytes, 10 MiB).
MMAP_THRESHOLD_BYTES = 32 << 20
# Free memory the heap keeps at its top before giving it back to the system.
TRIM_THRESHOLD_BYTES = 128 << 20

# glibc's own environment variables for the same settings: when a user set either, theirs win.
ENVIRONMENT_NAMES = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_")


def tune_malloc() -> bool:
    """Raise glibc's mmap and trim thresholds for this process; returns whether it did (False
    where the C library is not glibc, or the user's environment sets them already)."""
    if any(name in os.environ for name in ENVIRONMENT_NAMES):
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    # mallopt returns 1 on success, 0 on error.
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)
    )
