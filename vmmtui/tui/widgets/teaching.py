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

    mechanism = "vmm"
    transport = "scm-rights"

    @on(SessionEvent)
    def render_event(self, message: SessionEvent) -> None:
        e = message.event
        if isinstance(e, SessionStarted):
            self.mechanism, self.transport = e.mechanism, e.transport
        elif isinstance(e, SessionFailed):
            self.show_failure(e.role, e.step, e.failure)
        elif (
            isinstance(e, WorkerExited)
            and not e.expected
            and not message.closing
            and not self.failed
        ):
            self.update(Text(f"{say.exited(e).plain}: restart with ctrl+r", style="bold red"))

    def reset(self) -> None:
        self.failed = False

    def show_step(self, step: tuple[str, str] | None, finished: bool = False) -> None:
        if self.failed:
            return
        if step is None:
            self.border_title = "done" if finished else "what this step does"
            how = (
                "The 64-byte IPC handle went producer → socket → consumer as plain bytes (no fd), "
                if self.mechanism == "legacy"
                else "The consumer took the producer's fd with pidfd_getfd (only a pid and a number "
                "travelled), "
                if self.transport == "pidfd"
                else "The fd went producer → SCM_RIGHTS → consumer, "
            )
            self.update(
                Text(
                    how
                    + "both mapped the same physical memory, and every resource was released in "
                    "reverse order. ctrl+r runs it again."
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

    def show_failure(self, role: str, step: str, f: Failure) -> None:
        self.failed = True
        self.border_title = f"FAILED: {role} · {step}"
        self.update(
            Text.assemble(
                (f"{f.call} → {f.code}", "bold red"),
                f" ({f.message})\n",
                ("cause: ", "bold"),
                f"{f.cause}\n",
                ("fix: ", "bold"),
                f"{f.fix}  ",
                ("(ctrl+r restarts)", "dim"),
            )
        )
