"""What the next step does, in two or three sentences naming the API; or the error, cause and fix."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from vmmtui.plan.steps import step_info, teaching_for
from vmmtui.view import Display, ScreenState
from vmmtui.words import narration as say
from vmmtui.words.troubleshooting import said, worded


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
        self.step_text = Text("")
        self.note_text = Text("")
        #: the kernel's record of the last step (eBPF), kept whole like the note
        self.kernel_text = Text("")
        #: the teacher's note on the frame shown (replay --notes): (what it is on, its text)
        self.note: tuple[str, str] | None = None
        #: "as of step N" (a past frame), on the bottom border beside what a cut left out
        self.mark = ""
        #: the plan step whose kernel line is left out for want of rows (0: none is)
        self.kernel_left_out = 0
        self._kernel_step = 0

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
            state.kernel_facts(),
        )
        if key == self._key:
            return
        self._key = key
        title, text = self._text(state)
        self.border_title = title
        self.set_class(self.note is not None, "-noted")
        self.step_text, self.note_text = text, Text("")
        self.kernel_text = self._kernel(state)
        self._kernel_step = state.steps
        self.set_class(bool(self.kernel_text.plain), "-kernel")
        if self.kernel_text.plain:
            text = Text.assemble(text, "\n" if text.plain else "", self.kernel_text)
        if self.note is not None:
            self.note_text = Text.assemble(
                (f"teacher's note ({self.note[0]}): ", "bold magenta"), self.note[1]
            )
            sep = "\n" if text.plain else ""
            text = Text.assemble(text, sep, self.note_text)
        self.full = text
        self._refit()

    def on_resize(self) -> None:
        self._refit()

    def _refit(self) -> None:
        self.update(self._fitted())
        self.show_mark(self.mark)

    def show_mark(self, mark: str) -> None:
        """The bottom border: "as of step N" (``mark``) and the kernel's line, where it was cut:
        at 80x24 it once went without a sign."""
        self.mark = mark
        out = ""
        if self.kernel_left_out:  # the record's words: imported only where there is a record
            from vmmtui.words.trace import kernel_line_left_out

            out = kernel_line_left_out(self.kernel_left_out)
        subtitle = " · ".join(part for part in (mark, out) if part)
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle

    def _fitted(self) -> Text:
        """The text cut to the rows the panel may take (its max-height less its border), a cut
        part's last row ending in "…": a small terminal once dropped the rest silently. The
        teacher's note keeps its rows first; the step's text gives way to it. The kernel's line
        (eBPF) is the first to go where rows are short: the event log holds it too, and the
        border says so (``kernel_left_out``)."""
        self.kernel_left_out = 0
        text, limit = self.full, self.styles.max_height
        width = self.size.width  # the content's: inside the border and the padding
        if limit is None or width <= 0:
            return text
        rows = int(limit.value) - self.styles.gutter.height
        console = self.app.console
        if rows <= 0 or len(text.wrap(console, width)) <= rows:
            return text
        if self.kernel_text.plain:
            self.kernel_left_out = self._kernel_step
            text = Text("\n").join(t for t in (self.step_text, self.note_text) if t.plain)
            if len(text.wrap(console, width)) <= rows:
                return text
        note = list(self.note_text.wrap(console, width)) if self.note_text.plain else []
        step = list(self.step_text.wrap(console, width)) if self.step_text.plain else []
        if len(note) >= rows - (1 if step else 0):  # the note alone fills the panel
            # "…": the step's text is out; "+N lines": so is the end of the note
            return self._cut(note, rows, width, hidden=bool(step), count=True)
        return Text("\n").join([self._cut(step, rows - len(note), width), *note])

    @staticmethod
    def _cut(
        lines: list[Text], rows: int, width: int, hidden: bool = False, count: bool = False
    ) -> Text:
        """``lines`` cut to ``rows``, the last ending in "…" when some (or, ``hidden``, another
        part of the text) were left out; ``count``: and how many of ``lines`` ("… +3 lines")."""
        kept = lines[: max(rows, 1)]
        if hidden or len(kept) < len(lines):
            left = len(lines) - len(kept)
            sign = f" … +{left} line{'s' if left > 1 else ''}" if count and left else " …"
            last = kept[-1]
            last.rstrip()
            last.truncate(width - len(sign))
            last.append(sign, "bold")
        return Text("\n").join(kept)

    def _kernel(self, state: ScreenState) -> Text:
        """What the kernel recorded in the last step, in one line (nothing without the record)."""
        facts = state.kernel_facts()
        if not facts or state.start_error is not None:
            return Text("")
        from vmmtui.words.trace import kernel_step_line

        line = kernel_step_line(facts)
        if line is None:
            return Text("")
        line.stylize("dim")
        return Text(self.fmt.text(line.plain), line.style) if self.fmt.stable else line

    def _text(self, state: ScreenState) -> tuple[str, Text]:
        again = "" if self.replay else "ctrl+r tries again · c picks a scenario · q quits"
        if state.start_error is not None:
            return "COULD NOT START", Text.assemble(
                (state.start_error, "bold red"), "\n", (again, "dim")
            )
        if state.failure is not None:
            role, step, f = state.failure
            m = self.fmt.text  # --stable: no pids or addresses
            cause, fix = worded(f)
            return f"FAILED: {role} · {step}", Text.assemble(
                (f"{f.call} → {f.code}", "bold red"),
                m(f" ({said(f)})\n"),
                ("cause: ", "bold"),
                m(f"{cause}\n"),
                ("fix: ", "bold"),
                m(f"{fix}"),
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
            (", ".join(s.apis) + " — ", "bold cyan"), teaching_for(s.teaching, state.backend)
        )
