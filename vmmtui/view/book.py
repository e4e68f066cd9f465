"""Entries that only grow, shared by every state of one fold (each process's calls, the
transfers, the findings of ``view/programs.py``): a state holds how many it shows, so a state
per frame costs no copy of them."""

from __future__ import annotations

from typing import Generic, TypeVar

T = TypeVar("T")


class Book(Generic[T]):
    """Entries that only grow, shared by every state of one fold; each entry remembers the event
    (its sequence number in the fold) that wrote it. A long trace forgets the oldest: ``base``
    entries came before ``entries[0]`` (lengths and indices stay those of the whole fold)."""

    def __init__(self, entries: list[tuple[int, T]] | None = None, base: int = 0):
        self.entries: list[tuple[int, T]] = entries or []
        self.base = base

    def add(self, length: int, seq: int, item: T) -> tuple[Book[T], int]:
        """This book (or a copy, for a state off its tip) with ``item`` after ``length`` entries.
        A fold forward from a snapshot writes what it wrote before: the entry is reused."""
        at = length - self.base
        if at < len(self.entries):
            if at >= 0 and self.entries[at][0] == seq:
                return self, length + 1
            book: Book[T] = Book(self.entries[: max(0, at)], self.base)
        else:
            book = self
        book.entries.append((seq, item))
        return book, length + 1

    def between(self, start: int, end: int) -> list[T]:
        """Entries ``start`` to ``end`` (of the whole fold) that are still kept."""
        lo, hi = max(0, start - self.base), max(0, end - self.base)
        return [item for _, item in self.entries[lo:hi]]

    def items(self, length: int) -> list[T]:
        return self.between(0, length)

    def forget(self, before: int) -> int:
        """Forget the entries before entry ``before`` (of the whole fold); how many went."""
        drop = min(len(self.entries), before - self.base)
        if drop <= 0:
            return 0
        del self.entries[:drop]
        self.base += drop
        return drop
