"""The one-line status: where the screen is (REPLAY · step N/M, as of a past step, keys queued),
then the scenario, verification, kcmp and the verdict of the state shown."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from vmmtui.view import ScreenState

IDLE = "space: next step · ?: help"


class StatusLine(Static):
    def __init__(self, **kw):
        super().__init__(**kw)
        self._key: tuple = ()

    def show(self, state: ScreenState, where: str = "", queued: int = 0, aside: str = "") -> None:
        """``aside`` comes last (cut first where the line is short): what the frames leave out."""
        key = (tuple(state.status.items()), state.start_error, where, queued, aside)
        if key == self._key:
            return
        self._key = key
        text = Text()
        parts = " · ".join(v for v in state.status.values() if v)
        if where:
            text.append(where, "bold reverse")
            if queued or parts:
                text.append(" · ")
        if queued:
            text.append(f"{queued} key(s) queued", "bold yellow")
            if parts:
                text.append(" · ")
        text.append(parts or ("" if where else IDLE), "bold red" if state.start_error else "bold")
        if aside:
            text.append(" · " if text.plain else "")
            text.append(aside)
        self.update(text)
