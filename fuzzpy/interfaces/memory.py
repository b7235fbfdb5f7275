"""The memory policy of the sampling-heavy command, `fuzzpy audit` (docs/performance.md).

An audit allocates and frees float arrays of tens of thousands of lanes (hundreds of KB) many
thousands of times.  glibc gives such a block back to the operating system when it is freed
(a block above the mmap threshold, or the top of the heap past the trim threshold; glibc's
own adjustment of both is not enough once two such arrays are alive at once), and the next
one is page-faulted in again, page by page.  On a virtual machine, where a page fault is
dear, that was most of the time of `floor(y + 1/2)` on 50,000 floats, and more than half of a
discrete Gaussian draw (36 ns, 16 ns with the thresholds raised).  Raising both thresholds
keeps up to TRIM_THRESHOLD of freed memory in the process for the next array.

Process-wide, so only the audit command asks for it; a user who set glibc's own variables
(MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_, GLIBC_TUNABLES) keeps them.
"""

from __future__ import annotations

import ctypes
import os
import sys

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)
MMAP_THRESHOLD = 32 << 20  # blocks below 32 MiB come from the heap (glibc's largest allowed)
TRIM_THRESHOLD = 64 << 20  # the heap's top is given back past 64 MiB free
_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "GLIBC_TUNABLES")


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process; False (nothing changed) off
    Linux, without glibc's mallopt, when it refuses, or when the user set them."""
    if not sys.platform.startswith("linux") or any(name in os.environ for name in _USER_SETTINGS):
        return False
    try:  # the C library already loaded in this process (no ldconfig run to look for it)
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
