"""The state at every frame of a Timeline, folded once and cached.

Live, replay and step back all ask for "the state at frame N". A state is cached by how many events
it folded; asking for a later frame folds on from the nearest earlier cached state, so stepping
forward costs the new events only and stepping back costs a lookup. Events are only ever appended
(the live inspector adds them as they come), so a cached prefix stays true. No Textual here.
"""

from __future__ import annotations

from bisect import bisect_right

from vmmtui.events import Event
from vmmtui.record.timeline import Frame, Timeline
from vmmtui.view.display import Display
from vmmtui.view.model import ScreenState, fold_one


class FrameStates:
    """``at(index)``: the ScreenState after frame ``index`` of ``timeline``."""

    def __init__(
        self,
        timeline: Timeline | None = None,
        blank: ScreenState | None = None,
        display: Display | None = None,
    ):
        self.timeline = timeline if timeline is not None else Timeline()
        self.display = display or Display()
        #: events folded -> the state after them (ends kept sorted for the nearest-earlier lookup)
        self._states: dict[int, ScreenState] = {0: blank or ScreenState.blank()}
        self._ends: list[int] = [0]

    def __len__(self) -> int:
        return len(self.timeline)

    @property
    def frames(self) -> list[Frame]:
        return self.timeline.frames

    @property
    def last(self) -> int:
        """The index of the latest frame (live: where the session is)."""
        return len(self.timeline) - 1

    def extend(self, events: list[Event]) -> None:
        self.timeline.extend(events)

    def at(self, index: int) -> ScreenState:
        """The state after frame ``index`` (clamped to the frames there are)."""
        index = max(0, min(index, self.last))
        return self.after(self.timeline.frames[index].end)

    def latest(self) -> ScreenState:
        return self.after(len(self.timeline.events))

    def after(self, n: int) -> ScreenState:
        """The state after the first ``n`` events."""
        state = self._states.get(n)
        if state is not None:
            return state
        k = self._ends[bisect_right(self._ends, n) - 1]
        state = self._states[k]
        events, closing = self.timeline.events, self.timeline.is_closing
        for i in range(k, n):
            state = fold_one(state, events[i], self.display, closing=closing(i))
        self._states[n] = state
        self._ends.insert(bisect_right(self._ends, n), n)
        return state
