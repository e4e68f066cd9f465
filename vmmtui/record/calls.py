"""A trace's events cut into frames: one frame per call that matters (a call that made, moved,
duplicated, took, imported, mapped or closed something shared, a fork, an exec, an exit; a
polling's change), and the start. ``close(fd)`` of an fd that never held anything of interest is
no frame (a Python program closes hundreds at start). Same interface as ``Timeline`` (the demo's
steps), so ``FrameStates``, the replay and the step bar take either. Frames are cut as events are
appended, in constant time per event. No Textual here.

Which calls matter is the run's world's word (``TraceSession.marked``, asked of the world just
before it folds each call): the timeline folds nothing itself. A recording's timeline
(``trace_timeline``) is the one fold of the recording: it keeps that fold's world and keyframes
(``model.world``), so a replay asks them "the world at frame N" and folds nothing again.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from vmmtui.model.findings import Weight
from vmmtui.model.policy import weigh
from vmmtui.record.timeline import Frame
from vmmtui.stream.events import (
    Event,
    FdClosed,
    FdOpened,
    Leak,
    Notice,
    ProcessGone,
    ProcessSeen,
    SessionStarted,
    SharedFile,
    WorkerExited,
)
from vmmtui.stream.observed import (
    CudaCall,
    FdTaken,
    LedgerFinding,
    MemfdCreated,
    ProcessExit,
    ProcessForked,
    TraceCall,
    TraceStarted,
    base_name,
)

if TYPE_CHECKING:
    from vmmtui.model.world import Keyframes, World

#: polling events that are a change of their own (a frame)
_POLL_FRAMES = (ProcessSeen, ProcessGone, FdOpened, FdClosed, SharedFile)


class CallTimeline:
    """Frames over a trace's (or a polling's) events; ``frames[k].steps`` is ``dropped + k``: the
    calls that matter, folded up to the end of frame ``k``."""

    unit = "call"

    def __init__(self, events: list[Event] | None = None, calls: Sequence[bool] | None = None):
        """``events`` with ``calls``: which of them are calls that matter, as the run's world
        said (``TraceSession.marked``; a recording's: ``pipeline.replay.trace_timeline``)."""
        #: the world of the fold that marked these events, and its keyframes, where this
        #: timeline was made from a recording (``kept``); None for a live run's (its session
        #: holds them)
        self.world: World | None = None
        self.keyframes: Keyframes | None = None
        #: for each event of the stream, how many events the world had folded after it (the
        #: findings it made and the end are no event it folds)
        self.folded: list[int] = []
        self.events: list[Event] = []
        self.frames: list[Frame] = [Frame(0, 0, "start", None)]
        #: the pid of each frame's call (0: the start, or a polling change of no one process)
        self.pids: list[int] = [0]
        self.plan: list[tuple[str, str]] = []
        self.closing_from: int | None = None
        #: an eBPF trace: its calls are the frames; what /proc said of the processes at its start
        #: (``trace -p``: their fds, their shares) is part of the frame it comes in
        self.ebpf = False
        #: frames a long live trace no longer keeps (``forget``): frame ``k`` is call ``dropped + k``
        self.dropped = 0
        #: the events they drew (before ``events[0]``)
        self.events_dropped = 0
        #: the calls traced that are no frame (a close or a dup of an fd of no interest), by call
        #: name: with the frames, every call the tracer counted (its closing line's "N calls")
        self.unframed: dict[str, int] = {}
        self.extend(events or [], calls)

    def extend(self, events: list[Event], calls: Sequence[bool] | None = None) -> None:
        """Cut frames over ``events``; ``calls``: for each, whether it is a call that matters,
        as the run's world said (``TraceSession.marked``)."""
        calls = () if calls is None else calls
        if len(calls) != len(events):
            raise ValueError("a call timeline is cut where the run's world says: give its marks")
        frames = self.frames
        for i, e in enumerate(events):
            self.events.append(e)
            if self._matters(e, calls[i]):
                k = self.dropped + len(frames)
                pid = getattr(e, "pid", 0) or 0
                frames.append(Frame(len(self.events), k, f"call {k}: {_what(e)}", None))
                self.pids.append(pid)
            else:
                frames[-1].end = len(self.events)
                if isinstance(e, TraceCall):
                    name = getattr(e, "call", "") or type(e).__name__
                    self.unframed[name] = self.unframed.get(name, 0) + 1
                bad = isinstance(e, LedgerFinding | Leak) and weigh(e) is Weight.PROBLEM
                if bad and not frames[-1].failed:
                    frames[-1].failed = True
                    frames[-1].label += f" ({getattr(e, 'kind', 'finding')})"

    def _matters(self, e: Event, call: bool) -> bool:
        if isinstance(e, TraceStarted):
            self.ebpf = e.mode == "ebpf"
        return call or (isinstance(e, _POLL_FRAMES) and not self.ebpf)

    def forget(self, k0: int) -> int:
        """Forget the frames before frame ``k0`` and the events that drew them: frame ``k0``
        becomes frame 0 (its state is the caller's to keep: ``FrameStates.forget``); the events
        forgotten are the recording's. How many events went."""
        k0 = max(0, min(k0, len(self.frames) - 1))
        if k0 == 0:
            return 0
        cut = self.frames[k0].end
        del self.events[:cut]
        del self.frames[:k0], self.pids[:k0]
        for f in self.frames:
            f.end -= cut
        self.dropped += k0
        self.events_dropped += cut
        return cut

    def kept(self, world: World, keyframes: Keyframes) -> None:
        """The fold that marked these events (a recording's, folded once): its world at the end
        and its keyframes, so that ``world_at`` answers for any frame."""
        self.world, self.keyframes = world, keyframes
        took, n, self.folded = keyframes.events, 0, []
        for e in self.events:
            n += n < len(took) and e is took[n]
            self.folded.append(n)

    def world_at(self, index: int) -> World:
        """The world after frame ``index`` (a recording's timeline: from the keyframes of its one
        fold, a clone that is yours), as step back, a page or a replay's frame asks it."""
        if self.keyframes is None:
            raise ValueError("a live run's timeline: its session holds the world")
        index = max(0, min(index, len(self.frames) - 1))
        end = self.frames[index].end
        return self.keyframes.at(self.folded[end - 1] if end else 0)

    # -- the Timeline interface --------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.frames)

    def frame_of_step(self, steps: int) -> int:
        """Frame ``k`` is the state after ``dropped + k`` calls."""
        return max(0, min(steps - self.dropped, len(self.frames) - 1))

    def is_closing(self, index: int) -> bool:
        return False

    def exits(self) -> list[WorkerExited]:
        return []

    def notices(self) -> list[Notice]:
        return [e for e in self.events if isinstance(e, Notice)]

    def started(self) -> SessionStarted | None:
        return None

    def verified(self) -> bool | None:
        return None


def _what(e: Event) -> str:
    pid = getattr(e, "pid", None)
    name = (
        base_name(e.func)
        if isinstance(e, CudaCall)
        else getattr(e, "call", "")
        or {
            MemfdCreated: "memfd_create",
            FdTaken: "pidfd_getfd",
            ProcessForked: "fork",
            ProcessExit: "exit",
        }.get(type(e), type(e).__name__)
    )
    return f"[{pid}] {name}" if pid else name


def is_trace(events: list[Event]) -> bool:
    """Whether these are a trace's or a polling's events (not a demo session's)."""
    from vmmtui.stream.events import AttachEvent

    return any(isinstance(e, AttachEvent) for e in events[:50]) and not any(
        isinstance(e, SessionStarted) for e in events[:50]
    )
