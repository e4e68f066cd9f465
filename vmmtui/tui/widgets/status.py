"""The one-line status (shown in the compact layout): scenario, verification, kcmp, the verdict."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.widgets import Static

from vmmtui import narration as say
from vmmtui.events import KcmpVerdict, ScenarioOutcome, SessionFinished, SessionStarted, StepDone
from vmmtui.steps import base
from vmmtui.tui.messages import EventView, SessionEvent

IDLE = "space: next step · ?: help"


class StatusLine(EventView, Static):
    """Parts in the order they first appeared; each new event of a kind replaces its part."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.parts: dict[str, str] = {}
        #: the scenario the session runs (the app's choice; no event names it before the outcome)
        self.scenario: str | None = None

    def on_mount(self) -> None:
        self.render_parts()

    @on(SessionEvent)
    def render_event(self, message: SessionEvent) -> None:
        e = message.event
        if isinstance(e, SessionStarted) and self.scenario:
            self.parts["scenario"] = f"scenario {self.scenario}"
        elif (
            isinstance(e, StepDone)
            and base(e.step) == "verify"
            and e.report.state.verification is not None
        ):
            self.parts["verify"] = say.verification_word(e.report.state.verification)
        elif isinstance(e, KcmpVerdict):
            self.parts["kcmp"] = say.kcmp_verdict(e).plain
        elif isinstance(e, SessionFinished):
            self.parts["done"] = say.verdict(e.verified).plain
        elif isinstance(e, ScenarioOutcome):
            self.parts["scenario"] = say.outcome(e).plain
        else:
            return
        self.render_parts()

    def show_error(self, message: str) -> None:
        """Why the session stopped before any event could say it (it did not start)."""
        self.parts["error"] = message
        self.update(Text(" · ".join(v for v in self.parts.values() if v), style="bold red"))

    def reset(self) -> None:
        self.parts.clear()
        self.render_parts()

    def render_parts(self) -> None:
        self.update(Text(" · ".join(v for v in self.parts.values() if v) or IDLE, style="bold"))
