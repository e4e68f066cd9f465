"""What a long run keeps of what only grows: the newest ``limit`` entries, and the count of all.

A trace of an hour at 10,000 calls a second closes millions of holdings and moves millions of
fds; the ledger needs the open ones to fold, and of the closed ones only their number and the
newest few (the exporters' spans, the summary's counts). ``Kept`` is a deque that drops its
oldest entries past ``limit`` and says how many it saw and dropped, and, where asked, counts
every entry by a key as it comes, so a count stays whole when the entries are gone.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Generic, TypeVar

T = TypeVar("T")

#: the closed entries a ledger keeps of each kind (holdings, transfers, findings)
LIMIT = 10_000


class Kept(deque[T], Generic[T]):
    """The newest ``limit`` entries; ``total`` appended, ``dropped`` of them no longer kept, and
    ``by``: every entry counted by ``key`` (when given), dropped ones too."""

    def __init__(
        self,
        entries: Iterable[T] = (),
        limit: int | None = None,
        key: Callable[[T], Hashable] | None = None,
    ) -> None:
        super().__init__((), LIMIT if limit is None else limit)  # None: LIMIT, read now
        self.total = 0
        self.key = key
        self.by: Counter[Hashable] = Counter()
        self.extend(entries)

    def append(self, item: T) -> None:
        self.total += 1
        if self.key is not None:
            self.by[self.key(item)] += 1
        super().append(item)

    def extend(self, items: Iterable[T]) -> None:
        for item in items:
            self.append(item)

    def __iadd__(self, items: Iterable[T]) -> Kept[T]:
        self.extend(items)
        return self

    def index(self, item: T, start: int = 0, stop: int | None = None) -> int:
        """Where ``item`` is kept: looked for from the newest end, by identity first (the entry
        asked for is nearly always one just appended; from the oldest end each look compared
        thousands of entries)."""
        for i in range(len(self) - 1, -1, -1):
            if self[i] is item:
                return i
        return super().index(item, start, len(self) if stop is None else stop)

    def remove(self, item: T) -> None:
        """Take back an entry still kept (it no longer counts)."""
        del self[self.index(item)]
        self.total -= 1
        if self.key is not None:
            self.by[self.key(item)] -= 1

    def __setitem__(self, index: int, item: T) -> None:  # type: ignore[override]
        """Replace a kept entry (counted by its new key)."""
        if self.key is not None:
            self.by[self.key(self[index])] -= 1
            self.by[self.key(item)] += 1
        super().__setitem__(index, item)

    def __copy__(self) -> Kept[T]:
        """Another container of the same entries and counts (the entries themselves shared:
        what is kept is over, and a world's clone, ``model.world``, shares it)."""
        out: Kept[T] = Kept(limit=self.maxlen, key=self.key)
        deque.extend(out, self)  # not counted again
        out.total, out.by = self.total, Counter(self.by)
        return out

    @property
    def dropped(self) -> int:
        return self.total - len(self)

    def __bool__(self) -> bool:
        return self.total > 0

    def __eq__(self, other: object) -> bool:
        if isinstance(other, list):  # compared with a list as the list of the entries kept
            return list(self) == other
        return super().__eq__(other)

    __hash__ = None


def remember_name(names: dict[str, str], file: str, name: str, held: Iterable[Any]) -> None:
    """``names[file] = name``; past twice ``LIMIT`` names, those of files no longer ``held``
    (holdings, each naming its ``file``) go, but for the newest ``LIMIT``."""
    names[file] = name
    if len(names) > 2 * LIMIT:
        keep = set(list(names)[-LIMIT:]) | {h.file for h in held}
        for f in [f for f in names if f not in keep]:
            del names[f]
