"""What the next step does, in two or three sentences naming the API; or the error, cause and fix."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from vmmtui import narration as say
from vmmtui.steps import step_info
from vmmtui.view import ScreenState


class TeachingPanel(Static):
    """From the state shown; ``replay``: a recording cannot be restarted, so no "ctrl+r" is offered."""

    def __init__(self, replay: bool = False, **kw):
        super().__init__(**kw)
        self.replay = replay
        self.border_title = "what this step does"
        self._key: tuple = ()

    def show(self, state: ScreenState) -> None:
        key = (
            state.start_error,
            state.failure,
            state.crash,
            state.next_step,
            state.done,
            state.mechanism,
        )
        if key == self._key:
            return
        self._key = key
        title, text = self._text(state)
        self.border_title = title
        self.update(text)

    def _text(self, state: ScreenState) -> tuple[str, Text]:
        again = "" if self.replay else "ctrl+r tries again · c picks a scenario · q quits"
        if state.start_error is not None:
            return "COULD NOT START", Text.assemble(
                (state.start_error, "bold red"), "\n", (again, "dim")
            )
        if state.failure is not None:
            role, step, f = state.failure
            return f"FAILED: {role} · {step}", Text.assemble(
                (f"{f.call} → {f.code}", "bold red"),
                f" ({f.message})\n",
                ("cause: ", "bold"),
                f"{f.cause}\n",
                ("fix: ", "bold"),
                f"{f.fix}",
                ("" if self.replay else "  (ctrl+r restarts)", "dim"),
            )
        if state.crash is not None:
            restart = "" if self.replay else ": restart with ctrl+r"
            return "what this step does", Text(
                f"{say.exited(state.crash).plain}{restart}", style="bold red"
            )
        nxt = state.next_step
        if nxt is None:
            if not state.done:
                return "what this step does", Text("")
            how = (
                "The 64-byte IPC handle went producer → socket → consumer as plain bytes (no fd), "
                if state.mechanism == "legacy"
                else "The fd went producer → SCM_RIGHTS → consumer, "
            )
            again = "" if self.replay else " ctrl+r runs it again."
            return "done", Text(
                how + "both mapped the same physical memory, and every resource was released in "
                "reverse order." + again,
                style="green",
            )
        s = step_info(nxt[0], nxt[1], state.mechanism)
        return f"next: {nxt[0]} · {s.title}", Text.assemble(
            (", ".join(s.apis) + " — ", "bold cyan"), s.teaching
        )
