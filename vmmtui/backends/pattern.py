"""The seed's test pattern ``data[i] = (i*2 + 1337) ^ 0xDEADBEEF`` (uint32) and its checker.

Both work chunk by chunk so that a multi-GiB buffer never needs a second full-size host copy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

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


@dataclass
class Verification:
    """What a verification found: how many integers, how many differ, and the first that did."""

    checked: int
    mismatches: int
    first_index: int | None = None
    first_expected: int | None = None
    first_got: int | None = None
    #: where it was checked: host (numpy), device (the verify kernel) or both
    on: str = "host"

    @property
    def passed(self) -> bool:
        return self.mismatches == 0 and self.checked > 0

    def describe(self) -> str:
        if self.passed:
            return f"Data verification PASSED ({self.checked} integers verified)"
        if self.first_index is None:
            return f"Data verification FAILED ({self.checked} integers checked)"
        return (
            f"Data verification FAILED ({self.mismatches} of {self.checked} integers differ; first at "
            f"index {self.first_index}: expected 0x{self.first_expected:08x}, got 0x{self.first_got:08x})"
        )


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
