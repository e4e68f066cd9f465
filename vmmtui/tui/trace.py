"""``vmmtui trace`` in a terminal: the inspector on programs vmmtui did not start, live.

A thread runs the trace session (``pipeline.session``: the tracer, the ledger, the recording and
the exporters) and only posts batches of events to the app; the app never reads /proc or signals
a process itself. The app folds every event (nothing is dropped from the state: ``FrameStates``
folds them all), keeps the frames of the newest ``KEEP_EVENTS`` to step back through (older
ones are forgotten, counted and said; the recording keeps them) and repaints at most ``REPAINT_HZ`` times a second, however fast
the calls come. Each call is a frame: ←/→, g, the timeline and / go back through them while the
trace goes on; end goes back to live. q, Ctrl-C, SIGTERM or a closed terminal end the trace: the
session stops the traced command's process tree (SIGTERM, then SIGKILL), the probes close.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.message import Message

from vmmtui.record.calls import CallTimeline
from vmmtui.stream.events import Event
from vmmtui.tui.keys import TRACE, bindings
from vmmtui.tui.viewer import Viewer
from vmmtui.view import FrameStates, ScreenState

if TYPE_CHECKING:
    from vmmtui.model.world import World
    from vmmtui.pipeline.session import Source
    from vmmtui.trace.output import Output

#: the most repaints a second: calls come by thousands, the screen shows the newest state
REPAINT_HZ = 20
#: the longest a repaint folds new events before it draws (the keys stay answered; the rest is
#: folded at the next repaint: nothing is dropped, the screen says how far behind it is)
FOLD_BUDGET_S = 0.03
#: the tracer's thread starts this long after the app (its first frame written by then)
THREAD_AFTER_S = 0.25
#: a long trace's memory is bounded: past MAX_EVENTS events, the frames before the newest
#: KEEP_EVENTS are forgotten (``FrameStates.forget``: the counts stay whole, the recording keeps
#: every event), and the screen says how many calls it no longer keeps
MAX_EVENTS = 100_000
KEEP_EVENTS = 50_000
#: more than KEEP_EVENTS events not yet folded: a repaint folds this many times FOLD_BUDGET_S
BEHIND_FOLDS = 5


@dataclass
class TraceEvents(Message):
    """Events of the trace, in order (tracer thread → app); ``calls``: for each, whether it is
    a call that matters, as the run's ledger said (the timeline's frames)."""

    events: list[Event]
    calls: list[bool]


@dataclass
class TraceEnded(Message):
    """The tracer's thread is done: ``error`` says why when it failed (``code``: the exit status
    it calls for: 127 for a command not found…)."""

    error: str = ""
    code: int = 0


class TraceApp(Viewer):
    TITLE = "vmmtui trace"
    BINDINGS = bindings(TRACE)
    MODE = TRACE

    def __init__(
        self,
        source: Source | None = None,
        *,
        start: Callable[[], tuple[Source, str]] | None = None,
        title: str = "",
        sink: Callable[[Event], None] | None = None,
        cast: str | None = None,
        output: Output | None = None,
        never_imported_s: float | None = None,
        world: World | None = None,
        recorded: bool = False,
    ):
        """``source``: a trace already running (polling, a recording played); or ``start``, the
        trace's one start (``TraceRequest.start``, as the text trace's), called in the app's
        thread after the first frame: loading the probes takes the kernel's verifier seconds.
        ``world``: the run's, where others read it too (the exporters): the session folds it."""
        super().__init__(FrameStates(CallTimeline(), ScreenState.for_programs()), cast=cast)
        #: seconds with no import before an export is said never imported (None: the default)
        self.never_imported_s = never_imported_s
        self.world = world
        #: the running source (None until ``start`` has made it)
        self.tracer: Source | None = source
        self.start = start
        #: the user quit before the trace started: it is stopped as soon as it has
        self.quitting = False
        #: the exit status an error calls for (the command not found: 127)
        self.code = 0
        #: what else gets every event (the recording, the exporters), in the tracer's thread
        self.sink = sink
        #: a recording keeps every event (the status line says where the forgotten ones are)
        self.recorded = recorded
        self.sub = title
        self.dirty = False
        self.ended = False
        self.notes: list[Text] = []
        self.thread: threading.Thread | None = None
        self.error = ""
        #: events folded into the live state (the newest are folded at the next repaints)
        self.live_to = 0
        #: the run (made in the tracer's thread, once the tracer is)
        self.session: Any = None
        #: the command's own stdout and stderr, captured (None: no command, or not captured)
        self.output = output
        #: the traced command was still running when the app ended and was stopped by it: its
        #: exit status is ours, not its own
        self.stopped_command = False

    @property
    def timeline(self) -> CallTimeline:
        return self.frames.timeline  # type: ignore[return-value]

    def begin(self) -> None:
        self.set_interval(1 / REPAINT_HZ, self._repaint)
        # after the first frame is on the terminal: the tracer's imports in a thread would hold
        # the interpreter's lock while Textual lays the screen out and writes it
        self.set_timer(THREAD_AFTER_S, self._start_thread)

    def _start_thread(self) -> None:
        if self.quitting:
            return
        self.thread = threading.Thread(target=self._trace, name="vmmtui-trace", daemon=True)
        self.thread.start()

    # -- the tracer's thread (posts messages only) -------------------------------------------------
    def _trace(self) -> None:
        from vmmtui.pipeline.session import TraceSession, stop_command

        batch: list[Event] = []
        calls: list[bool] = []

        def flush() -> None:
            if batch:
                self.post_message(TraceEvents(batch[:], calls[:]))
                batch.clear()
                calls.clear()

        error = ""
        if self.tracer is None and self.start is not None:
            from vmmtui.trace.command import CommandNotFound

            try:  # eBPF, or polling where the kernel refuses the probes (its notice says why)
                source, _ = self.start()
            except CommandNotFound as exc:
                self.post_message(TraceEnded(str(exc), exc.code))
                return
            except Exception as exc:  # noqa: BLE001 - said on screen in one line
                self.post_message(TraceEnded(f"the trace did not start: {exc}", 1))
                return
            self.tracer = source
            if self.quitting:  # the user quit while the probes loaded: no command runs on
                self.stopped_command = stop_command(source) or self.stopped_command
                source.stopping = True
        assert self.tracer is not None, "a source, or the start that makes it"
        sinks = [self.sink] if self.sink is not None else []
        self.session = TraceSession(
            self.tracer, sinks, never_imported_s=self.never_imported_s, world=self.world
        )
        try:
            for e, call in self.session.marked(on_batch=flush):
                batch.append(e)
                calls.append(call)
                if len(batch) >= 4096:
                    flush()
        except Exception as exc:  # noqa: BLE001 - said on screen in one line, never a traceback
            error = f"the trace stopped: {type(exc).__name__}: {exc}"
        finally:
            flush()
            self.post_message(TraceEnded(error))

    # -- events in ---------------------------------------------------------------------------------
    def on_trace_events(self, message: TraceEvents) -> None:
        self.frames.extend(message.events, message.calls)
        self.dirty = True

    def on_trace_ended(self, message: TraceEnded) -> None:
        self.ended = True
        self.error, self.code = message.error, message.code
        if message.error:
            self.note(Text(message.error, style="bold red"))
            self.notify(message.error, severity="error", timeout=20)
        exit_ = self.tracer.exit if self.tracer is not None else None
        if exit_ is not None and self.tracer is not None and self.tracer.command:
            from vmmtui.model.ends import End
            from vmmtui.words.programs import end_words

            how = end_words(End.of_exit(exit_.code, exit_.signal))
            wrote = ""
            if self.output is not None and self.output.total:
                wrote = f"; O shows what it wrote ({len(self.output.kept().lines())} lines)"
            self.notify(f"the command {how}{wrote}; q quits", timeout=6)
        self.dirty = True

    def _repaint(self) -> None:
        """At most REPAINT_HZ a second: the newest state (live), or the bar only (looking back).
        The new events are folded here, FOLD_BUDGET_S at a time."""
        if self.ending:
            return
        total = len(self.timeline.events)
        if self.live_to < total:
            t = time.perf_counter()
            n = self.live_to
            # far behind (the calls come faster than a repaint's share folds them): fold longer
            # between repaints, or the events waiting would grow without end
            budget = FOLD_BUDGET_S * (BEHIND_FOLDS if total - n > KEEP_EVENTS else 1)
            while n < total and time.perf_counter() - t < budget:
                n = min(total, n + 256)
                self.frames.after(n)
            self.live_to = n
            self.dirty = True
            if total > MAX_EVENTS:
                self.forget(total - KEEP_EVENTS)
        if self.dirty:
            self.dirty = False
            self.paint()

    def forget(self, before: int) -> None:
        """Forget the frames drawn by the events before ``before`` (at most those folded): the
        frame of the state that goes on is the first kept; a frame on show before it, that one."""
        from bisect import bisect_right

        frames = self.timeline.frames
        k0 = bisect_right(frames, min(before, self.live_to), key=lambda f: f.end) - 1
        if k0 <= 0:
            return
        gone = self.frames.forget(k0)
        self.live_to -= gone
        if self.shown is not None:
            self.shown = max(0, self.shown - k0)
        del self._bar_cache[:k0]

    # -- what the screen says ----------------------------------------------------------------------
    def state_shown(self) -> ScreenState:
        state = self.frames.after(self.live_to) if self.shown is None else super().state_shown()
        for text in self.notes:
            state = state.noted(text)
        return state

    def note(self, text: Text) -> None:
        self.notes.append(text)
        self.paint()

    def where(self) -> str:
        from vmmtui.words.status import trace_where

        timeline = self.timeline
        return trace_where(
            self.frames.frames[-1].steps,
            None if self.shown is None else self.frames.frames[self.shown].steps,
            ended=self.ended,
            starting=not timeline.events and not self.ended,
            folding=len(timeline.events) - self.live_to,
            dropped=timeline.dropped,
            recorded=self.recorded,
        )

    def subtitle(self, state: ScreenState) -> str:
        return self.sub

    def tick_autoplay(self) -> None:
        return

    def action_output(self) -> None:
        """``O``: the command's own output, as captured so far."""
        if self.output is None:
            self.notify(
                "no output captured: only a command this trace started (trace -- CMD) has one",
                timeout=4,
            )
            return
        from vmmtui.tui.screens.output import OutputScreen

        tracer = self.tracer
        command = " ".join(tracer.command if tracer is not None else []) or "the command"
        running = lambda: not self.ended and (tracer is None or tracer.exit is None)  # noqa: E731
        self.push_screen(OutputScreen(self.output, command, running))

    # -- the end -----------------------------------------------------------------------------------
    def finish(self, code: int) -> None:
        self.end_trace()
        super().finish(code)

    def end_trace(self) -> None:
        """Stop the command's process tree and the tracer (within about a second)."""
        from vmmtui.pipeline.session import stop_command

        self.quitting = True
        if self.tracer is None:
            return
        # the session's, before the session may exist
        self.stopped_command = stop_command(self.tracer) or self.stopped_command
        self.tracer.stopping = True
        if self.thread is not None:
            self.thread.join(1.0)
