"""Every call with its arguments, result and duration, and every notable event, as it happens."""

from __future__ import annotations

from rich.text import Text
from textual import on
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
    WorkerExited,
    WorkerStarted,
)
from vmmtui.tui.messages import EventView, SessionEvent
from vmmtui.tui.widgets.display import Display


class EventLog(EventView, RichLog):
    def __init__(self, display: Display, **kw):
        super().__init__(wrap=True, markup=False, highlight=False, max_lines=5000, **kw)
        self.fmt = display
        self.border_title = "event log"
        self.repeats = say.Repeats()  # the 4 Hz refresh repeats kcmp: told once per change
        self.consumers: int | None = None

    def write(self, content, width=None, expand=True, shrink=True, scroll_end=None, animate=False):
        """Lines wrap at the log's own width (``expand``), not at the console's measure, which
        is 80 columns where no terminal is attached (tests, screenshots)."""
        return super().write(content, width, expand, shrink, scroll_end, animate)

    def reset(self) -> None:
        self.repeats.clear()  # the log itself stays: it is the history across restarts

    def tag(self, role: str) -> Text:
        return Text(f"{role[:4]} ", style=say.role_style(role))

    def say(self, role: str, text: Text) -> None:
        self.write(self.tag(role) + text)

    @on(SessionEvent)
    def render_event(self, message: SessionEvent) -> None:
        e, d = message.event, self.fmt
        if message.live and not isinstance(e, (WorkerExited, KcmpVerdict)):
            return
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
                for text in say.failed(e):
                    self.write(text)
            case WorkerExited():
                self.say(e.role, say.exited(e, d))
                for text in say.log_tail(e):
                    self.say(e.role, text)
            case SessionFinished():
                self.write(say.finished(e, self.consumers))
            case SessionClosed():
                self.write(say.closed(e))
            case Notice():
                self.write(say.notice(e))
            case ScenarioOutcome():
                self.write(say.outcome(e))
            case FdSnapshot():
                pass  # the fd tables show these
