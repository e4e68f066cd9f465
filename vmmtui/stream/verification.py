"""What a verification of the shared memory found: the fact a step report and an event carry.

The check itself (the pattern, chunk by chunk) is ``backends.pattern``'s.
"""

from __future__ import annotations

from dataclasses import dataclass


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
