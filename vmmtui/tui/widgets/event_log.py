"""Every call with its arguments, result and duration, and every notable event, as it happens."""

from __future__ import annotations

from rich.text import Text
from textual import events, on
from textual.widgets import RichLog

from vmmtui import narration as say
from vmmtui.events import (
    FdSnapshot,
    KcmpVerdict,
    Notice,
    ScenarioOutcome,
    SessionClosed,
    SessionFailed,
    SessionFinished,
    SessionStarted,
    StepDone,
    StepStarted,
    WorkerExited,
    WorkerStarted,
)
from vmmtui.tui.messages import EventView, SessionEvent, StepChosen
from vmmtui.tui.widgets.display import Display

#: the style meta each line carries: (the log's era, how many plan steps had run when it was written)
STEP_META = "vmmtui-step"


class EventLog(EventView, RichLog):
    """The log; each line remembers the step it belongs to, so a click on it shows the panels as of that step.

    The map from line to step lives in the lines themselves (a style meta on every segment): it
    survives wrapping, the trim at ``max_lines``, writes deferred until the log has a size, and
    rewind cutting the log back. ``era`` counts resets: a line of an earlier session is no step of
    this one's timeline.
    """

    def __init__(self, display: Display, **kw):
        super().__init__(wrap=True, markup=False, highlight=False, max_lines=5000, **kw)
        self.fmt = display
        self.border_title = "event log"
        self.repeats = say.Repeats()  # the 4 Hz refresh repeats kcmp: told once per change
        self.consumers: int | None = None
        self.era = 0
        #: the step the lines now written belong to (None: before any session)
        self.steps_done: int | None = None

    def write(self, content, width=None, expand=True, shrink=True, scroll_end=None, animate=False):
        """Lines wrap at the log's own width (``expand``), not at the console's measure, which
        is 80 columns where no terminal is attached (tests, screenshots)."""
        if isinstance(content, Text) and self.steps_done is not None:
            content = content.copy()
            content.apply_meta({STEP_META: (self.era, self.steps_done)})
        return super().write(content, width, expand, shrink, scroll_end, animate)

    def reset(self) -> None:
        self.repeats.clear()  # the log itself stays: it is the history across restarts
        self.era += 1
        self.steps_done = None

    def step_at(self, y: int) -> int | None:
        """The step that line ``y`` of the log belongs to; None for a line of no step or an earlier session."""
        if not 0 <= y < len(self.lines):
            return None
        for segment in self.lines[y]:
            tag = segment.style.meta.get(STEP_META) if segment.style is not None else None
            if tag is not None:
                return tag[1] if tag[0] == self.era else None
        return None

    def on_click(self, event: events.Click) -> None:
        offset = event.get_content_offset(self)
        steps = None if offset is None else self.step_at(self.scroll_offset.y + offset.y)
        if steps is not None:
            event.stop()
            self.post_message(StepChosen(steps))

    def tag(self, role: str) -> Text:
        return Text(f"{role[:4]} ", style=say.role_style(role))

    def say(self, role: str, text: Text) -> None:
        self.write(self.tag(role) + text)

    @on(SessionEvent)
    def render_event(self, message: SessionEvent) -> None:
        e, d = message.event, self.fmt
        if message.live and not isinstance(e, (WorkerExited, KcmpVerdict)):
            return
        if isinstance(e, SessionStarted):
            self.steps_done = 0
        elif isinstance(e, StepStarted | StepDone) and e.index >= 0:
            self.steps_done = e.index + 1
        match e:
            case SessionStarted():
                self.consumers = len(e.consumers)
                for text in say.started(e, d):
                    self.write(text)
            case WorkerStarted():
                self.say(e.role, say.worker_started(e, d))
            case StepDone():
                for c in e.report.calls:
                    self.say(e.role, say.call(c, d))
                for line in e.report.log:
                    self.say(e.role, say.log_line(line, d))
            case KcmpVerdict():
                if self.repeats.new(e):
                    self.say(say.KERNEL, say.kcmp_line(e))
            case SessionFailed():
                for text in say.failed(e, d):
                    self.write(text)
            case WorkerExited():
                self.say(e.role, say.exited(e, d))
                for text in say.log_tail(e, d):
                    self.say(e.role, text)
            case SessionFinished():
                self.write(say.finished(e, self.consumers))
            case SessionClosed():
                self.write(say.closed(e, d))
            case Notice():
                self.write(say.notice(e, d))
            case ScenarioOutcome():
                self.write(say.outcome(e))
            case FdSnapshot():
                pass  # the fd tables show these
