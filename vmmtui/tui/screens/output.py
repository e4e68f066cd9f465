"""The traced command's own output (``O`` in a live trace): its stdout and stderr as captured
(``trace/output.py``), stderr in red, the newest at the bottom, repainted while it grows. Every
line goes through the sanitiser: a program's bytes never drive the terminal."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from vmmtui.stream.names import shown
from vmmtui.stream.sizes import format_size
from vmmtui.trace.output import STDERR, Kept, Output

#: how often the pane looks for new output while it is open
REFRESH_S = 0.5
#: the longest line shown whole (the rest ends in …)
LINE_LIMIT = 400


def output_head(kept: Kept, command: str, running: bool) -> Text:
    """The pane's first lines: whose output, how it was captured, what is kept and dropped."""
    n_err = kept.stderr_lines
    lines = kept.lines()
    state = "still running" if running else "ended"
    head = Text.assemble(
        ("output of ", "bold"),
        (shown(command, 120), "bold cyan"),
        f" ({state}): {len(lines)} lines, {n_err} on ",
        ("stderr", "red"),
        f" · {format_size(kept.total)} written",
    )
    head.append(
        "\nstdout through a pseudo-terminal, stderr through a pipe, stdin /dev/null (the "
        "inspector has the keyboard; --text passes the terminal through)",
        "dim",
    )
    if kept.dropped:
        head.append(
            f"\nthe last {format_size(kept.total - kept.dropped)} are kept: the first "
            f"{format_size(kept.dropped)} were dropped",
            "bold yellow",
        )
    return head


def output_body(kept: Kept) -> Text:
    lines = kept.lines()
    if not lines:
        return Text("nothing written yet", "dim")
    rows = [
        Text(shown(line, LINE_LIMIT), "red" if stream == STDERR else "") for stream, line in lines
    ]
    return Text("\n").join(rows)


class OutputScreen(ModalScreen[None]):
    """The command's output, over the inspector; ``O``, ``escape`` or ``q`` closes it."""

    BINDINGS = [
        ("escape", "dismiss", "Close"),
        ("O", "dismiss", "Close"),
        ("q", "dismiss", "Close"),
    ]

    def __init__(self, output: Output, command: str, running: object) -> None:
        super().__init__()
        self.output = output
        self.command = command
        #: whether the command still runs (asked at each repaint)
        self.running = running
        #: what was last painted: the output's version and whether the command ran then (a
        #: command can end after its last line: "(ended)" is news without new output)
        self._painted: tuple[int, bool] | None = None

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="output"):
            yield Static(id="output-head")
            yield Static(id="output-body")

    def on_mount(self) -> None:
        self.query_one("#output", VerticalScroll).border_title = "the command's output"
        self.query_one("#output", VerticalScroll).border_subtitle = "O or escape closes"
        self.refresh_output()
        self.set_interval(REFRESH_S, self.refresh_output)

    def refresh_output(self) -> None:
        running = bool(self.running()) if callable(self.running) else bool(self.running)
        painted = (self.output.version, running)
        if painted == self._painted:
            return
        self._painted = painted
        kept = self.output.kept()
        self.query_one("#output-head", Static).update(output_head(kept, self.command, running))
        self.query_one("#output-body", Static).update(output_body(kept))
        self.query_one("#output", VerticalScroll).scroll_end(animate=False)
