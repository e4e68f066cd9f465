"""``/``: the search prompt of the event log, one line at the bottom, as in ``less``."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.screen import ModalScreen
from textual.widgets import Input, Static


class SearchPrompt(ModalScreen[str | None]):
    """Dismisses with the text to search for, or None when cancelled (escape, or nothing typed)."""

    DEFAULT_CSS = """
    SearchPrompt { align: left bottom; background: $background 0%; }
    SearchPrompt > Static { dock: bottom; height: 1; background: $boost; padding: 0 1; }
    SearchPrompt > Input { dock: bottom; margin-bottom: 1; border: tall $accent; }
    """
    BINDINGS = [("escape", "cancel", "Cancel")]

    def __init__(self, last: str = ""):
        super().__init__()
        self.last = last

    def compose(self) -> ComposeResult:
        yield Input(value=self.last, placeholder="search the event log", id="search")
        yield Static("enter: search · n / N: next / previous match · escape: cancel")

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self.dismiss(event.value or None)

    def action_cancel(self) -> None:
        self.dismiss(None)
