"""What the current step does, in two or three sentences naming the API; or the error, cause and fix."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.widgets import Static

from vmmtui import narration as say
from vmmtui.events import SessionFailed, SessionStarted, WorkerExited
from vmmtui.steps import step_info
from vmmtui.troubleshooting import Failure
from vmmtui.tui.messages import EventView, SessionEvent


class TeachingPanel(EventView, Static):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.border_title = "what this step does"
        #: a failure or a crash is on show: the next step's text must not cover it
        self.failed = False
        #: the teacher's note on the frame shown (replay --notes): (what it is on, its text)
        self.note: tuple[str, str] | None = None
        self._body: Text | str = ""

    mechanism = "vmm"
    transport = "scm-rights"
    #: the session's plan (a scenario may leave a role's cleanup out of it)
    plan: list[tuple[str, str]] = []  # replaced at each start, never mutated

    @on(SessionEvent)
    def render_event(self, message: SessionEvent) -> None:
        e = message.event
        if isinstance(e, SessionStarted):
            self.mechanism, self.transport = e.mechanism, e.transport
            self.plan = list(e.plan)
        elif isinstance(e, SessionFailed):
            self.show_failure(e.role, e.step, e.failure)
        elif (
            isinstance(e, WorkerExited)
            and not e.expected
            and not message.closing
            and not self.failed
        ):
            shown = say.exited(e, getattr(self.app, "display_mode", say.PLAIN)).plain
            self.update(Text(f"{shown}: restart with ctrl+r", style="bold red"))

    def reset(self) -> None:
        self.failed = False

    def update(self, content: Text | str = "", *, layout: bool = True) -> None:
        """The step's text (or the failure), with the teacher's note under it when there is one."""
        self._body = content
        super().update(self._noted(content), layout=layout)

    def set_note(self, note: tuple[str, str] | None) -> None:
        if note != self.note:
            self.note = note
            self.set_class(note is not None, "-noted")
            super().update(self._noted(self._body))

    def _noted(self, content: Text | str) -> Text | str:
        if self.note is None:
            return content
        body = content if isinstance(content, Text) else Text(str(content))
        sep = "\n" if body.plain else ""
        return Text.assemble(
            body, sep, (f"teacher's note ({self.note[0]}): ", "bold magenta"), self.note[1]
        )

    def show_step(self, step: tuple[str, str] | None, finished: bool = False) -> None:
        if self.failed:
            return
        if step is None:
            self.border_title = "done" if finished else "what this step does"
            self.update(
                Text(
                    say.closing(self.mechanism, self.plan, self.transport)
                    + " ctrl+r runs it again."
                    if finished
                    else "",
                    style="green" if finished else "",
                )
            )
            return
        s = step_info(step[0], step[1], self.mechanism, self.transport)
        self.border_title = f"next: {step[0]} · {s.title}"
        self.update(Text.assemble((", ".join(s.apis) + " — ", "bold cyan"), s.teaching))

    def show_start_failure(self, message: str) -> None:
        self.failed = True
        self.border_title = "COULD NOT START"
        self.update(
            Text.assemble(
                (message, "bold red"),
                "\n",
                ("ctrl+r tries again · c picks a scenario · q quits", "dim"),
            )
        )

    def masked(self, text: str) -> str:
        """``text`` as the app shows volatile values (``--stable`` masks pids and addresses)."""
        display = getattr(self.app, "display_mode", None)
        return display.text(text) if display is not None else text

    def show_failure(self, role: str, step: str, f: Failure) -> None:
        self.failed = True
        self.border_title = f"FAILED: {role} · {step}"
        self.update(
            Text.assemble(
                (f"{f.call} → {f.code}", "bold red"),
                self.masked(f" ({f.message})\n"),
                ("cause: ", "bold"),
                self.masked(f"{f.cause}\n"),
                ("fix: ", "bold"),
                self.masked(f"{f.fix}  "),
                ("(ctrl+r restarts)", "dim"),
            )
        )
