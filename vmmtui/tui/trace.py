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
#: the most events waiting to be drawn (taken from the trace, not yet folded into the screen):
#: past it the screen falls behind on purpose. The calls are counted, not drawn, until half of
#: the backlog is folded; everything else (a process's start, program and end, the findings, the
#: losses, the clock) is drawn still. The run's ledger, the recording and the exporters get every
#: call whatever the screen does: only the drawing drops them, and the status line says how many.
#: Without a bound, a program sharing 50,000 fds a second grew the inspector by 50 MB a second and
#: left a queue that q waited behind for minutes.
BACKLOG_MOST = 20_000
#: how long after q (or a signal) the tracer's thread is waited for, all waits together: it
#: stops at once, but a drain under load may not; the recording then says it was cut there
END_WAIT_S = 0.5


@dataclass
class TraceEvents(Message):
    """Events of the trace are waiting in the app's inbox (tracer thread → app): one message at
    a time, however many batches came (a queue of messages was the memory that grew)."""


class Inbox:
    """The events the tracer's thread took for the screen and the app has not yet: a list under a
    lock, bounded by ``BACKLOG_MOST`` with what the screen already holds unfolded; the calls past
    the bound are counted, not kept (``not_drawn``)."""

    def __init__(self, most: int = BACKLOG_MOST) -> None:
        self.most = most
        self.lock = threading.Lock()
        self.events: list[Event] = []
        #: for each event, whether it is a call that matters (the timeline's frames)
        self.calls: list[bool] = []
        #: calls the screen did not draw: it was behind (every one is in the ledger's counts)
        self.not_drawn = 0
        #: findings the screen did not draw: past twice the bound even they are counted, not
        #: kept (a flood of findings grew the backlog without end); the verdict, the end's count
        #: and the recording have every one
        self.findings_not_drawn = 0
        #: dropping now (until the backlog is down to half the bound)
        self.behind = False
        #: a TraceEvents message is on its way to the app (one at a time)
        self.told = False

    def put(self, e: Event, call: bool, unfolded: int) -> None:
        """``e`` for the screen, unless the screen is behind (``unfolded``: events it holds not
        yet folded) and ``e`` is a call that only adds detail."""
        from vmmtui.stream.events import Leak
        from vmmtui.stream.observed import (
            LedgerFinding,
            ProcessExec,
            ProcessExit,
            ProcessForked,
            TraceCall,
        )

        with self.lock:
            backlog = unfolded + len(self.events)
            if self.behind and backlog <= self.most // 2:
                self.behind = False
            elif not self.behind and backlog >= self.most:
                self.behind = True
            if (
                self.behind
                and isinstance(e, TraceCall)
                and not isinstance(e, (ProcessForked, ProcessExec, ProcessExit))
            ):
                self.not_drawn += 1
                return
            if self.behind and backlog >= 2 * self.most and isinstance(e, (LedgerFinding, Leak)):
                self.findings_not_drawn += 1
                return
            self.events.append(e)
            self.calls.append(call)

    def take(self) -> tuple[list[Event], list[bool]]:
        with self.lock:
            events, calls = self.events, self.calls
            self.events, self.calls = [], []
            self.told = False
        return events, calls

    def tell(self) -> bool:
        """Whether the app is to be told (no message on its way yet); it is then on its way."""
        with self.lock:
            if self.told or not self.events:
                return False
            self.told = True
            return True


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
        #: the events on their way from the tracer's thread to the screen
        self.inbox = Inbox()
        #: when the trace was asked to end (``time.monotonic()``; None: it was not)
        self.quit_at: float | None = None
        #: no repaint before this (``time.monotonic()``): the last one took long
        self.rest_until = 0.0

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

        inbox = self.inbox

        def flush() -> None:
            if inbox.tell():
                self.post_message(TraceEvents())

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
        timeline = self.timeline
        try:
            for n, (e, call) in enumerate(self.session.marked(on_batch=flush)):
                inbox.put(e, call, len(timeline.events) - self.live_to)
                if n % 4096 == 4095:
                    flush()
        except Exception as exc:  # noqa: BLE001 - said on screen in one line, never a traceback
            error = f"the trace stopped: {type(exc).__name__}: {exc}"
        finally:
            flush()
            self.post_message(TraceEnded(error))

    # -- events in ---------------------------------------------------------------------------------
    def on_trace_events(self, message: TraceEvents) -> None:
        self.take()

    def take(self) -> None:
        """What waits in the inbox, into the timeline (folded at the repaints)."""
        events, calls = self.inbox.take()
        if events:
            self.frames.extend(events, calls)
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
        if self.ending or time.monotonic() < self.rest_until:
            return
        began = time.monotonic()
        try:
            self._fold_and_paint()
        finally:
            # a repaint that took long (a busy machine, a big backlog) is followed by as long a
            # rest: the loop stays free half the time at least, for q and the other keys
            took = time.monotonic() - began
            if took > 1 / REPAINT_HZ:
                self.rest_until = time.monotonic() + took

    def _fold_and_paint(self) -> None:
        self.take()
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
    def live_state(self) -> ScreenState:
        return self.frames.after(self.live_to)

    def state_shown(self) -> ScreenState:
        state = super().state_shown()
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
            not_drawn=self.inbox.not_drawn,
            behind=self.inbox.behind,
            findings_not_drawn=self.inbox.findings_not_drawn,
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
        if self.quit_at is not None:  # asked again (the command's end after the screen's)
            self.wait_for_thread()
            return
        self.quit_at = time.monotonic()
        if self.tracer is None:
            return
        self.tracer.stopping = True  # the tracer's loop ends at its next batch
        # the session's, before the session may exist
        self.stopped_command = stop_command(self.tracer) or self.stopped_command
        self.wait_for_thread()

    def wait_for_thread(self) -> None:
        """Wait for the tracer's thread to end, at most until ``END_WAIT_S`` after the end was
        asked (every wait together: the screen's, the command's)."""
        if self.thread is not None and self.quit_at is not None:
            self.thread.join(max(0.0, self.quit_at + END_WAIT_S - time.monotonic()))
