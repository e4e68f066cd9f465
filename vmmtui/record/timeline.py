"""A session's events cut into frames: the start, one frame per step of the plan, and the close.

A frame is a prefix of the events: the panels "as of step N" are what the events up to frame N's
end draw. Replay and the live inspector's step back both rebuild the panels from a prefix, so
this is the one place that knows where a step's events end. A step's events run from its
``StepStarted`` to the next one (its StepDone, the fd tables read after it, kcmp, a failure,
the ending); the close (cleanup reports, exits, ``SessionClosed``) is a frame of its own.
No Textual here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from vmmtui.stream.events import (
    Event,
    FdSnapshot,
    KcmpVerdict,
    NextStep,
    Notice,
    ScenarioOutcome,
    SessionClosed,
    SessionFailed,
    SessionFinished,
    SessionStarted,
    StepDone,
    StepStarted,
    WorkerExited,
)

#: what a step emits after its StepDone; anything else after the last step belongs to the close
_STEP_TAIL = (FdSnapshot, KcmpVerdict, NextStep)
_ENDING = (SessionFinished, SessionFailed, ScenarioOutcome)


@dataclass
class Frame:
    """The panels just after ``steps`` steps of the plan (0: just started)."""

    #: events[:end] draw this frame
    end: int
    #: how many steps of the plan had run (the "N" of "as of step N")
    steps: int
    label: str
    #: (role, step) that runs next, None once the plan has stopped
    next_step: tuple[str, str] | None
    finished: bool = False
    failed: bool = False
    closing: bool = False


class Frames(Protocol):
    """Events cut into frames, as the screen's states (``view.FrameStates``) and the viewer read
    them: a session's, one frame per step (``Timeline``), or a trace's, one per call that matters
    (``record.calls.CallTimeline``). The viewer asks this, never which kind it has."""

    #: what a frame is, as the bar and "as of … N" say it: "step" or "call"
    unit: str
    events: list[Event]
    frames: list[Frame]
    #: the plan's (role, step) in order; empty for a trace
    plan: list[tuple[str, str]]
    #: the calls that are no frame, by call name (a trace's; a session's are all frames)
    unframed: dict[str, int]

    def __len__(self) -> int: ...

    def extend(self, events: list[Event], calls: Sequence[bool] | None = None) -> None: ...

    def forget(self, k0: int) -> int: ...

    def frame_of_step(self, steps: int) -> int: ...

    def is_closing(self, index: int) -> bool: ...

    def exits(self) -> list[WorkerExited]: ...

    def notices(self) -> list[Notice]: ...

    def started(self) -> SessionStarted | None: ...

    def verified(self) -> bool | None: ...


class Timeline:
    """Frames over a list of events, recomputed as events are added (the live inspector adds them)."""

    unit = "step"

    def __init__(self, events: list[Event] | None = None):
        self.events: list[Event] = []
        self.frames: list[Frame] = []
        self.plan: list[tuple[str, str]] = []
        #: every event of a session cuts a frame or belongs to one: none is left out
        self.unframed: dict[str, int] = {}
        #: index of the first event of the close (events from there on are the session's close)
        self.closing_from: int | None = None
        self.extend(events or [])

    def extend(self, events: list[Event], calls: Sequence[bool] | None = None) -> None:
        """More events, the frames cut again; ``calls`` is a trace's (its calls that matter):
        a session's frames are its steps, whatever the calls."""
        self.events.extend(events)
        self._cut()

    def forget(self, k0: int) -> int:
        """A session keeps every frame (its plan bounds them): nothing is forgotten."""
        return 0

    def _cut(self) -> None:
        ev = self.events
        # each step begins at its StepStarted (or, lacking one, its StepDone)
        starts: list[int] = []
        seen: set[int] = set()
        for i, e in enumerate(ev):
            if isinstance(e, StepStarted | StepDone) and e.index >= 0 and e.index not in seen:
                seen.add(e.index)
                starts.append(i)
        for e in ev:
            if isinstance(e, SessionStarted):
                self.plan = list(e.plan)
                break
        # the close: the first cleanup report, exit, notice or SessionClosed after the last step's events
        last_step = max(
            [
                i
                for i, e in enumerate(ev)
                if isinstance(e, (StepStarted, *_ENDING))
                or (isinstance(e, StepDone) and e.index >= 0)
            ],
            default=-1,
        )
        closing = None
        if any(isinstance(e, SessionClosed) for e in ev[last_step + 1 :]):
            closing = next(
                i for i in range(last_step + 1, len(ev)) if not isinstance(ev[i], _STEP_TAIL)
            )
        self.closing_from = closing
        bounds = [*starts, closing if closing is not None else len(ev)]
        frames = [self._frame(0, bounds[0], 0)]
        for k, start in enumerate(starts):
            frames.append(self._frame(start, bounds[k + 1], self._step_at(start).index + 1))
        if closing is not None:
            last = frames[-1]
            frames.append(
                Frame(len(ev), last.steps, "closed", None, last.finished, last.failed, True)
            )
        self.frames = frames

    def _frame(self, start: int, end: int, steps: int) -> Frame:
        failed = any(isinstance(e, SessionFailed) for e in self.events[:end])
        finished = not failed and bool(self.plan) and steps >= len(self.plan)
        nxt = None if failed or steps >= len(self.plan) else self.plan[steps]
        if steps == 0:
            return Frame(end, 0, "start", nxt)
        first = self._step_at(start)
        label = f"step {steps}: {first.role} · {first.step}"
        if any(isinstance(e, SessionFailed) for e in self.events[start:end]):
            label += " (failed)"
        return Frame(end, steps, label, nxt, finished, failed)

    def _step_at(self, i: int) -> StepStarted | StepDone:
        """The event a step's frame begins with (``_cut`` found one there)."""
        e = self.events[i]
        assert isinstance(e, StepStarted | StepDone)
        return e

    # -- lookups -----------------------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.frames)

    def frame_of_step(self, steps: int) -> int:
        """The index of the last frame with ``steps`` steps done (clamped to the frames there are)."""
        best = 0
        for i, f in enumerate(self.frames):
            if f.steps <= steps and not f.closing:
                best = i
        return best

    def is_closing(self, index: int) -> bool:
        """Whether the event at ``index`` is part of the session's close (exits are no news then)."""
        return self.closing_from is not None and index >= self.closing_from

    def exits(self) -> list[WorkerExited]:
        return [e for e in self.events if isinstance(e, WorkerExited)]

    def notices(self) -> list[Notice]:
        return [e for e in self.events if isinstance(e, Notice)]

    def started(self) -> SessionStarted | None:
        return next((e for e in self.events if isinstance(e, SessionStarted)), None)

    def verified(self) -> bool | None:
        done = next((e for e in self.events if isinstance(e, SessionFinished)), None)
        return None if done is None else done.verified
