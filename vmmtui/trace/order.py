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

import heapq
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
    """Events in, the same events out in the kernel's timestamp order, ``window_ns`` late."""

    def __init__(self, window_ns: int = WINDOW_NS) -> None:
        self.window_ns = window_ns
        self._heap: list[tuple[int, int, Event]] = []
        self._seq = itertools.count()
        #: the timestamp of the last event let go (a straggler older than it goes out at once)
        self.released = 0
        #: events that came after their turn (for the tests and the bench; not an error)
        self.late = 0

    def __len__(self) -> int:
        return len(self._heap)

    def push(self, e: Event) -> list[Event]:
        """Hold ``e``; an event with no timestamp lets every held one go first (it ends or
        starts something: the trace's start and finish), and goes out after them."""
        t = stamp(e)
        if t is None:
            return [*self.flush(), e]
        if t < self.released:
            self.late += 1
        heapq.heappush(self._heap, (t, next(self._seq), e))
        return []

    def release(self, now_ns: int) -> list[Event]:
        """The events stamped before ``now_ns - window``, oldest first."""
        horizon = now_ns - self.window_ns
        out = []
        while self._heap and self._heap[0][0] <= horizon:
            t, _, e = heapq.heappop(self._heap)
            self.released = max(self.released, t)
            out.append(e)
        return out

    def flush(self) -> list[Event]:
        """Every held event, oldest first (the end of the trace, or of a recording)."""
        out = []
        while self._heap:
            t, _, e = heapq.heappop(self._heap)
            self.released = max(self.released, t)
            out.append(e)
        return out
