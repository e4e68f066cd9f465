"""Search in the event log (``/``, ``n``, ``N``): which lines match, and the next one from a place.

Smart case, as in ``less`` and vim: a query in lower case matches any case, one with a capital
letter matches exactly. A query is plain text, not a pattern (``cuMemMap(`` means what it says).
The lines searched are the whole session's log (the latest state's), so a match can be ahead of
the frame on show: the app then goes to the frame of the line's step. No Textual here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class LogSearch:
    query: str

    @property
    def exact(self) -> bool:
        return self.query != self.query.lower()

    def hits(self, line: str) -> bool:
        return (self.query in line) if self.exact else (self.query.lower() in line.lower())

    def matches(self, lines: Sequence[str]) -> list[int]:
        """The indexes of the lines that match, in order."""
        return [i for i, line in enumerate(lines) if self.query and self.hits(line)]

    def next(self, lines: Sequence[str], after: int, backward: bool = False) -> int | None:
        """The first match after line ``after`` (before it, ``backward``), wrapping around;
        None when no line matches. ``after`` = -1 searches from the top."""
        found = self.matches(lines)
        if not found:
            return None
        if backward:
            return next((i for i in reversed(found) if i < after), found[-1])
        return next((i for i in found if i > after), found[0])
