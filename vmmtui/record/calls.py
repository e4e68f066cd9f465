"""A trace's events cut into frames: one frame per call that matters (a call that made, moved,
duplicated, took, imported, mapped or closed something shared, a fork, an exec, an exit; a
polling's change), and the start. ``close(fd)`` of an fd that never held anything of interest is
no frame (a Python program closes hundreds at start). Same interface as ``Timeline`` (the demo's
steps), so ``FrameStates``, the replay and the step bar take either. Frames are cut as events are
appended, in constant time per event. No Textual here.
"""

from __future__ import annotations

from collections.abc import Sequence

from vmmtui.model.findings import Weight, weigh
from vmmtui.model.ledger import Ledger
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

#: polling events that are a change of their own (a frame)
_POLL_FRAMES = (ProcessSeen, ProcessGone, FdOpened, FdClosed, SharedFile)


class CallTimeline:
    """Frames over a trace's (or a polling's) events; ``frames[k].steps`` is ``dropped + k``: the
    calls that matter, folded up to the end of frame ``k``."""

    unit = "call"

    def __init__(self, events: list[Event] | None = None, calls: Sequence[bool] | None = None):
        self.events: list[Event] = []
        self.frames: list[Frame] = [Frame(0, 0, "start", None)]
        #: the pid of each frame's call (0: the start, or a polling change of no one process)
        self.pids: list[int] = [0]
        self.plan: list[tuple[str, str]] = []
        self.closing_from: int | None = None
        #: which calls matter, where the trace session does not say (``TraceSession.marked``):
        #: the ledger's fds of interest under the one rule (``model.interest``), as for the
        #: panels' call rows and the log's lines; made at the first events that come unmarked
        self.ledger: Ledger | None = None
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
        as the trace session's ledger said (``TraceSession.marked``). Give it always or never:
        without it the timeline folds a ledger of its own over the events."""
        frames = self.frames
        if calls is None and self.ledger is None:
            self.ledger = Ledger(keep=0)  # asked only which fds are open: keeps nothing closed
        for i, e in enumerate(events):
            self.events.append(e)
            if self._matters(e, calls[i] if calls is not None else None):
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

    def _matters(self, e: Event, call: bool | None) -> bool:
        if isinstance(e, TraceStarted):
            self.ebpf = e.mode == "ebpf"
        if call is None and self.ledger is not None:
            call = self.ledger.matters(e)  # asked of the state before ``e``
            self.ledger.apply(e)
        return bool(call) or (isinstance(e, _POLL_FRAMES) and not self.ebpf)

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
