"""``vmmtui trace`` in a terminal: the inspector on programs vmmtui did not start, live.

A thread runs the tracer (eBPF) and the ledger, writes the recording and the exporters, and only
posts batches of events to the app. The app keeps every event (nothing is dropped from the state:
``FrameStates`` folds them all) and repaints at most ``REPAINT_HZ`` times a second, however fast
the calls come. Each call is a frame: ←/→, g, the timeline and / go back through them while the
trace goes on; end goes back to live. q, Ctrl-C, SIGTERM or a closed terminal end the trace: the
traced command's process tree is stopped (SIGTERM, then SIGKILL), the probes closed.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.message import Message

from vmmtui.record.calls import CallTimeline
from vmmtui.stream.events import Event
from vmmtui.tui.keys import TRACE, bindings
from vmmtui.tui.viewer import Viewer
from vmmtui.view import FrameStates, ScreenState

#: the most repaints a second: calls come by thousands, the screen shows the newest state
REPAINT_HZ = 20
#: the longest a repaint folds new events before it draws (the keys stay answered; the rest is
#: folded at the next repaint: nothing is dropped, the screen says how far behind it is)
FOLD_BUDGET_S = 0.03
#: the tracer's thread starts this long after the app (its first frame written by then)
THREAD_AFTER_S = 0.25
#: how long the command's tree gets after SIGTERM before SIGKILL
TERM_GRACE_S = 0.8


@dataclass
class TraceEvents(Message):
    """Events of the trace, in order (tracer thread → app)."""

    events: list[Event]


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
        tracer: Any,
        *,
        title: str = "",
        sink: Callable[[Event], None] | None = None,
        cast: str | None = None,
        started: bool = False,
    ):
        super().__init__(FrameStates(CallTimeline(), ScreenState.for_programs()), cast=cast)
        #: the tracer, or what makes it (in the app's thread, after the first frame)
        self.tracer: Any = None if callable(tracer) else tracer
        self.make_tracer: Callable[[], Any] | None = tracer if callable(tracer) else None
        #: the user quit before the tracer was made: it is not started
        self.quitting = False
        #: False: the app's thread loads the probes and starts the command, after the first frame
        self.tracer_started = started
        #: the exit status an error calls for (the command not found: 127)
        self.code = 0
        #: what else gets every event (the recording, the exporters), in the tracer's thread
        self.sink = sink
        self.sub = title
        self.dirty = False
        self.ended = False
        self.notes: list[Text] = []
        self.thread: threading.Thread | None = None
        self.error = ""
        #: events folded into the live state (the newest are folded at the next repaints)
        self.live_to = 0
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
        from vmmtui.stream.observed import TraceFinished, TraceStarted
        from vmmtui.trace.ledger import Ledger

        ledger = Ledger()
        batch: list[Event] = []

        def out(e: Event) -> None:
            batch.append(e)
            if self.sink is not None:
                self.sink(e)

        def flush() -> None:
            if batch:
                self.post_message(TraceEvents(batch[:]))
                batch.clear()

        error = ""
        if self.tracer is None and self.make_tracer is not None:
            try:
                self.tracer = self.make_tracer()
            except Exception as exc:  # noqa: BLE001 - said on screen in one line
                self.post_message(TraceEnded(f"the trace did not start: {exc}", 1))
                return
            if self.quitting:
                return
        if not self.tracer_started:  # after the first frame: the kernel's verifier takes seconds
            from vmmtui.attach.command import CommandNotFound
            from vmmtui.trace.loader import ProbeUnavailable

            try:
                self.tracer.start()
            except ProbeUnavailable as exc:
                self.post_message(TraceEnded(f"eBPF unavailable: {exc}", 1))
                return
            except CommandNotFound as exc:
                self.post_message(TraceEnded(str(exc), exc.code))
                return
            except Exception as exc:  # noqa: BLE001 - said on screen in one line
                self.post_message(TraceEnded(f"the trace did not start: {exc}", 1))
                return
            if self.tracer.stopping:  # the user quit while the probes loaded: no command runs on
                self.stopped_command = stop_command(self.tracer) or self.stopped_command
        try:
            for e in self.tracer.events(on_batch=flush):
                if isinstance(e, TraceStarted):  # then, for -p, who they are (from /proc)
                    out(e)
                    for seen in seen_now(getattr(self.tracer, "pids", [])):
                        out(seen)
                    continue
                if isinstance(e, TraceFinished):
                    for f in ledger.finish():
                        out(f)
                    bad = sum(1 for f in ledger.findings if f.kind not in ("shared", "imported"))
                    out(dataclasses.replace(e, findings=bad))
                    continue
                out(e)
                for said in ledger.apply(e):  # findings, and probes
                    out(said)
                if len(batch) >= 4096:
                    flush()
        except Exception as exc:  # noqa: BLE001 - said on screen in one line, never a traceback
            error = f"the trace stopped: {type(exc).__name__}: {exc}"
        finally:
            flush()
            self.post_message(TraceEnded(error))

    # -- events in ---------------------------------------------------------------------------------
    def on_trace_events(self, message: TraceEvents) -> None:
        self.frames.extend(message.events)
        self.dirty = True

    def on_trace_ended(self, message: TraceEnded) -> None:
        self.ended = True
        self.error, self.code = message.error, message.code
        if message.error:
            self.note(Text(message.error, style="bold red"))
            self.notify(message.error, severity="error", timeout=20)
        exit_ = getattr(self.tracer, "exit", None)
        if exit_ is not None and self.tracer is not None and self.tracer.command:
            how = f"signal {exit_.signal}" if exit_.signal else f"exit {exit_.code}"
            self.notify(f"the command ended ({how}); q quits", timeout=6)
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
            while n < total and time.perf_counter() - t < FOLD_BUDGET_S:
                n = min(total, n + 256)
                self.frames.after(n)
            self.live_to = n
            self.dirty = True
        if self.dirty:
            self.dirty = False
            self.paint()

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
        calls = self.frames.frames[-1].steps
        if not self.frames.timeline.events and not self.ended:
            return "STARTING · loading the eBPF probes (the kernel checks each program first)"
        if self.shown is None:
            behind = len(self.timeline.events) - self.live_to
            folding = f" · folding {behind} more events" if behind > 0 else ""
            ended = "ENDED" if self.ended else "LIVE"
            return f"{ended} · call {calls}{folding}{self.traced_beyond_frames()}"
        shown = self.frames.frames[self.shown].steps
        return f"AS OF CALL {shown} of {calls}{self.traced_beyond_frames()} · end: live"

    def subtitle(self, state: ScreenState) -> str:
        return self.sub

    # -- frames ------------------------------------------------------------------------------------
    def go(self, index: int | None) -> None:
        if index is None or index >= self.frames.last:
            self.shown = None
            self.inspector.mark = ""
        else:
            self.shown = max(0, index)
            self.inspector.mark = f"as of call {self.frames.frames[self.shown].steps}"
        self.paint()

    async def action_back(self) -> None:
        self.go((self.shown if self.shown is not None else self.frames.last) - 1)

    def action_forward(self) -> None:
        if self.shown is not None:
            self.go(self.shown + 1)

    def action_live(self) -> None:
        self.search = None
        self.go(None)

    def action_first(self) -> None:
        self.go(0)

    def action_chapter(self, direction: int) -> None:
        """``]``/``[``: the next/previous call with a finding (marked ✗ on the timeline)."""
        marks = [k for k, f in enumerate(self.timeline.frames) if f.failed]
        here = self.shown if self.shown is not None else self.frames.last
        ahead = [k for k in marks if (k - here) * direction > 0]
        if not ahead:
            self.notify("no further finding that way", timeout=3)
            return
        self.go(min(ahead) if direction > 0 else max(ahead))

    def tick_autoplay(self) -> None:
        return

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("forward", "live") and self.shown is None:
            return False
        return super().check_action(action, parameters)

    # -- the end -----------------------------------------------------------------------------------
    def finish(self, code: int) -> None:
        self.end_trace()
        super().finish(code)

    def end_trace(self) -> None:
        """Stop the command's process tree and the tracer (within about a second)."""
        self.quitting = True
        if self.tracer is None:
            return
        self.stopped_command = stop_command(self.tracer) or self.stopped_command
        self.tracer.stopping = True
        if self.thread is not None:
            self.thread.join(1.0)


def stop_command(tracer: Any) -> bool:
    """SIGTERM to the traced command and everything it started (orphans too: they carry its
    mark), SIGKILL to what is left after TERM_GRACE_S (a ``trace -p`` target is not ours: it is
    left alone). ``vmmtui.attach.command`` is the one place that knows the tree. True when the
    command was still running (its exit status is then ours, not its own)."""
    from vmmtui.attach.command import alive

    watch = getattr(tracer, "watch", None)
    tree = getattr(tracer, "tree", None) or getattr(watch, "tree", None)
    if tree is None or getattr(tracer, "exit", None) is not None:
        return False
    running = alive(tree.pid)
    tree.stop(TERM_GRACE_S)
    return running


def seen_now(pids: list[int]) -> list[Event]:
    """``ProcessSeen`` for processes already running (``trace -p``): their name, parent, command
    line and uid as /proc says now (the trace sees no exec of theirs to name them)."""
    from vmmtui.stream.events import ProcessSeen
    from vmmtui.trace.identity import identity_of

    out: list[Event] = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                stat = f.read()
            name = stat[stat.index(b"(") + 1 : stat.rindex(b")")].decode("utf-8", "replace")
            ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
            uid = os.stat(f"/proc/{pid}").st_uid
        except (OSError, ValueError):
            continue
        who = identity_of(pid)
        c = who.container
        label = c.label() if c else ""
        out.append(
            ProcessSeen(
                pid,
                ppid,
                name,
                cmdline[:500],
                uid,
                0.0,
                None,
                label,
                c.pod if c else "",
                who.inner_pid,
            )
        )
    return out
