"""What the next step does, in two or three sentences naming the API; or the error, cause and fix."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from vmmtui import narration as say
from vmmtui.steps import step_info
from vmmtui.view import Display, ScreenState


class TeachingPanel(Static):
    """From the state shown; ``replay``: a recording cannot be restarted, so no "ctrl+r" is offered."""

    def __init__(self, replay: bool = False, display: Display | None = None, **kw):
        super().__init__(**kw)
        self.replay = replay
        self.fmt = display or Display()
        self.border_title = "what this step does"
        self._key: tuple = ()
        #: the whole text; what is drawn is cut to the panel's rows, with a sign (``_fitted``)
        self.full = Text("")
        #: the teacher's note on the frame shown (replay --notes): (what it is on, its text)
        self.note: tuple[str, str] | None = None

    def show(self, state: ScreenState, note: tuple[str, str] | None = None) -> None:
        self.note = note
        key = (
            state.start_error,
            state.failure,
            state.crash,
            state.next_step,
            state.done,
            state.mechanism,
            state.transport,
            state.plan,
            self.note,
        )
        if key == self._key:
            return
        self._key = key
        title, text = self._text(state)
        self.border_title = title
        self.set_class(self.note is not None, "-noted")
        if self.note is not None:
            sep = "\n" if text.plain else ""
            text = Text.assemble(
                text, sep, (f"teacher's note ({self.note[0]}): ", "bold magenta"), self.note[1]
            )
        self.full = text
        self.update(self._fitted())

    def on_resize(self) -> None:
        self.update(self._fitted())

    def _fitted(self) -> Text:
        """The text cut to the rows the panel may take (its max-height less its border), the last
        row ending in "…" where it was cut: a small terminal once dropped the rest silently."""
        text, limit = self.full, self.styles.max_height
        width = self.size.width - self.styles.gutter.width
        if limit is None or width <= 0 or not self.app.console:
            return text
        rows = int(limit.value) - self.styles.gutter.height
        lines = text.wrap(self.app.console, width)
        if rows <= 0 or len(lines) <= rows:
            return text
        kept = list(lines[:rows])
        last = kept[-1]
        last.rstrip()
        last.truncate(width - 2)
        last.append(" …", "bold")
        return Text("\n").join(kept)

    def _text(self, state: ScreenState) -> tuple[str, Text]:
        again = "" if self.replay else "ctrl+r tries again · c picks a scenario · q quits"
        if state.start_error is not None:
            return "COULD NOT START", Text.assemble(
                (state.start_error, "bold red"), "\n", (again, "dim")
            )
        if state.failure is not None:
            role, step, f = state.failure
            m = self.fmt.text  # --stable: no pids or addresses
            return f"FAILED: {role} · {step}", Text.assemble(
                (f"{f.call} → {f.code}", "bold red"),
                m(f" ({f.message})\n"),
                ("cause: ", "bold"),
                m(f"{f.cause}\n"),
                ("fix: ", "bold"),
                m(f"{f.fix}"),
                ("" if self.replay else "  (ctrl+r restarts)", "dim"),
            )
        if state.crash is not None:
            restart = "" if self.replay else ": restart with ctrl+r"
            return "what this step does", Text(
                f"{say.exited(state.crash, self.fmt).plain}{restart}", style="bold red"
            )
        nxt = state.next_step
        if nxt is None:
            if not state.done:
                return "what this step does", Text("")
            again = "" if self.replay else " ctrl+r runs it again."
            return "done", Text(
                say.closing(state.mechanism, state.plan, state.transport) + again, style="green"
            )
        s = step_info(nxt[0], nxt[1], state.mechanism, state.transport)
        return f"next: {nxt[0]} · {s.title}", Text.assemble(
            (", ".join(s.apis) + " — ", "bold cyan"), s.teaching
        )
