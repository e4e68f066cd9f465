"""The kernel's order for the trace's records: a reorder window.

Each CPU hands its records to the ring buffer when its call ends, so a receive that ended on one
CPU can reach userspace before the send it received, which ended (later) on another. Conclusions
drawn in arrival order are then false ("sent, never received" about an fd that was received).
``KernelOrder`` holds records in a heap keyed by the kernel's timestamp and lets one go only once
it is older than the newest clock reading minus the window: by then every record stamped before
it has arrived (a record reaches userspace within a poll period, tens of ms, of its call's end).
A record that still comes later than its turn goes out at once; the ledger matches a receive to
a send that arrives after it (within the same window), so such a straggler concludes nothing
false either. Loss windows (``TraceLost``) are ordered by their first lost timestamp, so the
ledger knows of a loss before it folds the records around it.
"""

from __future__ import annotations

import bisect
import itertools

from vmmtui.stream.events import Event
from vmmtui.stream.observed import TraceLost

#: how long a record waits for the records stamped before it (ns): several poll periods of the
#: reader (25 ms) and the scheduling delay of a loaded 2-core machine
WINDOW_NS = 150_000_000


def stamp(e: Event) -> int | None:
    """The kernel timestamp an event is ordered by (None: it has none, it goes out in place)."""
    if isinstance(e, TraceLost):
        return e.t_first_ns or e.ktime or None
    t = getattr(e, "ktime", None)
    return t if isinstance(t, int) and t > 0 else None


class KernelOrder:
    """Events in, the same events out in the kernel's timestamp order, ``window_ns`` late.

    Held events are kept sorted in batches, not one heap operation each: what came since the last
    ``release`` is sorted at once (the records of one read are nearly in order already) and merged
    with what is held (two sorted runs: one linear pass of the sort), and what is old enough is
    cut off the front."""

    def __init__(self, window_ns: int = WINDOW_NS) -> None:
        self.window_ns = window_ns
        #: (timestamp, arrival, event), sorted
        self._held: list[tuple[int, int, Event]] = []
        #: what came since the last release, unsorted
        self._new: list[tuple[int, int, Event]] = []
        self._seq = itertools.count()
        #: the timestamp of the last event let go (a straggler older than it goes out at once)
        self.released = 0
        #: events that came after their turn (for the tests and the bench; not an error)
        self.late = 0

    def __len__(self) -> int:
        return len(self._held) + len(self._new)

    def push(self, e: Event) -> list[Event]:
        """Hold ``e``; an event with no timestamp lets every held one go first (it ends or
        starts something: the trace's start and finish), and goes out after them."""
        t = stamp(e)
        if t is None:
            return [*self.flush(), e]
        if t < self.released:
            self.late += 1
        self._new.append((t, next(self._seq), e))
        return []

    def extend(self, events: list[Event]) -> list[Event]:
        """``push`` of each of ``events``, in one call: what they let go (most often nothing)."""
        out: list[Event] = []
        new, seq, released = self._new, self._seq, self.released
        for e in events:
            t = stamp(e)
            if t is None:
                out += [*self.flush(), e]
                new = self._new
                continue
            if t < released:
                self.late += 1
            new.append((t, next(seq), e))
        return out

    def _sorted(self) -> list[tuple[int, int, Event]]:
        new, held = self._new, self._held
        if new:
            new.sort()
            overlap = held and new[0] < held[-1]
            held.extend(new)
            if overlap:
                held.sort()  # two sorted runs: merged in one pass
            self._new = []
        return held

    def release(self, now_ns: int) -> list[Event]:
        """The events stamped before ``now_ns - window``, oldest first."""
        held = self._sorted()
        if not held or held[0][0] > now_ns - self.window_ns:
            return []
        cut = bisect.bisect_right(held, (now_ns - self.window_ns, _AFTER_ALL))
        return self._cut(cut)

    def flush(self) -> list[Event]:
        """Every held event, oldest first (the end of the trace, or of a recording)."""
        return self._cut(len(self._sorted()))

    def _cut(self, n: int) -> list[Event]:
        held = self._held
        if not n:
            return []
        self.released = max(self.released, held[n - 1][0])
        out = [x[2] for x in held[:n]]
        del held[:n]
        return out


#: an arrival number after every other: (t, _AFTER_ALL) sorts after every held event stamped t
_AFTER_ALL = float("inf")
