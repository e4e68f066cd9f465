"""The seed's test pattern ``data[i] = (i*2 + 1337) ^ 0xDEADBEEF`` (uint32) and its checker.

Both work chunk by chunk so that a multi-GiB buffer never needs a second full-size host copy.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from vmmtui.stream.values import Verification

if (
    TYPE_CHECKING
):  # numpy is imported where it is used: the inspector's first frame does not wait for it
    import numpy as np

CHUNK = 16 << 20  # integers per chunk (64 MiB)


def pattern(start: int, count: int) -> np.ndarray:
    """The pattern for indices ``start .. start+count`` with C's 32-bit unsigned wrap-around."""
    import numpy as np

    i = np.arange(start, start + count, dtype=np.uint64)
    return ((i * np.uint64(2) + np.uint64(1337)) ^ np.uint64(0xDEADBEEF)).astype(np.uint32)


def verify_chunks(count: int, read: Callable[[int, int], np.ndarray]) -> Verification:
    """Check ``count`` integers; ``read(start, n)`` returns the uint32 values at those indices."""
    import numpy as np

    mismatches = 0
    first: tuple[int, int, int] | None = None
    for start in range(0, count, CHUNK):
        n = min(CHUNK, count - start)
        got = read(start, n)
        expected = pattern(start, n)
        bad = np.flatnonzero(got != expected)
        if bad.size:
            mismatches += int(bad.size)
            if first is None:
                j = int(bad[0])
                first = (start + j, int(expected[j]), int(got[j]))
    if first is None:
        return Verification(count, 0)
    return Verification(count, mismatches, *first)
