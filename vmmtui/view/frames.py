"""The state at every frame of a Timeline, folded once and cached.

Live, replay and step back all ask for "the state at frame N". A state is kept every ``EVERY``
events (a snapshot) and for the last ``RECENT`` frames asked; asking for any other frame folds on
from the nearest earlier state kept, at most ``EVERY`` events. So a 100,000-call trace keeps a few
hundred states, not one per call, and a step back to any frame folds a few hundred events. Events
are only ever appended (the live inspector adds them as they come), so a kept prefix stays true;
a long live trace forgets its oldest frames (``forget``): the first kept becomes frame 0, its
state the start, every count whole. No Textual here.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Sequence

from vmmtui.record.timeline import Frame, Frames, Timeline
from vmmtui.stream.events import Event
from vmmtui.view.display import Display
from vmmtui.view.model import ScreenState, fold_one

#: a snapshot every this many events
EVERY = 128
#: the states of the frames asked last, kept besides the snapshots
RECENT = 64
#: what ``forget`` keeps of each part that only grows (log lines, transfers, findings, calls)
ROWS = 2000


class FrameStates:
    """``at(index)``: the ScreenState after frame ``index`` of ``timeline``."""

    def __init__(
        self,
        timeline: Frames | None = None,
        blank: ScreenState | None = None,
        display: Display | None = None,
    ):
        self.timeline: Frames = timeline if timeline is not None else Timeline()
        self.display = display or Display()
        #: events folded -> the state after them, every EVERY events (ends kept sorted)
        self._states: dict[int, ScreenState] = {0: blank or ScreenState.blank()}
        self._ends: list[int] = [0]
        #: the states asked for last (most recent at the end)
        self._recent: OrderedDict[int, ScreenState] = OrderedDict()

    def __len__(self) -> int:
        return len(self.timeline)

    @property
    def frames(self) -> list[Frame]:
        return self.timeline.frames

    @property
    def last(self) -> int:
        """The index of the latest frame (live: where the session is)."""
        return len(self.timeline) - 1

    def extend(self, events: list[Event], calls: Sequence[bool] | None = None) -> None:
        """More events; ``calls``: which are calls that matter, where the trace session said
        (``TraceSession.marked``: a call timeline then folds no ledger of its own)."""
        self.timeline.extend(events, calls)

    def at(self, index: int) -> ScreenState:
        """The state after frame ``index`` (clamped to the frames there are)."""
        index = max(0, min(index, self.last))
        return self.after(self.timeline.frames[index].end)

    def latest(self) -> ScreenState:
        return self.after(len(self.timeline.events))

    def after(self, n: int) -> ScreenState:
        """The state after the first ``n`` events."""
        state = self._states.get(n) or self._recent.get(n)
        if state is not None:
            if n in self._recent:
                self._recent.move_to_end(n)
            return state
        k = self._ends[bisect_right(self._ends, n) - 1]
        state = self._states[k]
        near = max((m for m in self._recent if k < m < n), default=None)
        if near is not None:  # a recent state nearer than the snapshot (the live tip, stepping)
            k, state = near, self._recent[near]
        events, closing = self.timeline.events, self.timeline.is_closing
        for i in range(k, n):
            state = fold_one(state, events[i], self.display, closing=closing(i))
            if (i + 1) % EVERY == 0 and i + 1 not in self._states:
                self._states[i + 1] = state
                self._ends.insert(bisect_right(self._ends, i + 1), i + 1)
        self._recent[n] = state
        if len(self._recent) > RECENT:
            self._recent.popitem(last=False)
        return state

    def forget(self, k0: int, rows: int = ROWS) -> int:
        """A long live trace's memory, bounded: the frames before frame ``k0`` and their events
        go (``CallTimeline.forget``; the recording keeps them), frame ``k0``'s state is kept as
        the new start, and of what only grows (the log, the transfers, the findings, each
        process's calls) the ``rows`` newest as of that frame are kept; every count stays
        whole. How many events went."""
        timeline = self.timeline
        if k0 <= 0:
            return 0
        cut = timeline.frames[min(k0, self.last)].end
        start = self.after(cut)
        gone = timeline.forget(k0)
        if gone == 0:  # a session's timeline keeps every frame
            return 0
        self._states = {n - gone: s for n, s in self._states.items() if n > gone}
        self._states[0] = start
        self._ends = sorted(self._states)
        self._recent = OrderedDict((n - gone, s) for n, s in self._recent.items() if n >= gone)
        start.log.forget(start.log_len - rows)
        v = start.programs
        if v is not None:
            v.transfers.forget(v.transfers_len - rows)
            v.findings.forget(v.findings_len - rows)
            for pid, book in v.call_books.items():
                book.forget(v.proc(pid).ncalls - rows)
        return gone
