"""What the app writes to files and what it shows when it cannot start or cannot write.

A mixin of ``InspectorApp`` (kept apart so that app.py stays about layout and the session): the
``s`` key and ``--screenshots`` pictures, and the failures that no session event carries (a session
that did not start, a file that could not be written), each shown in the panels, the status
line, the event log and a toast; the app goes on.
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.text import Text

from vmmtui.tui.widgets.display import Display
from vmmtui.tui.widgets.event_log import EventLog
from vmmtui.tui.widgets.status import StatusLine
from vmmtui.tui.widgets.teaching import TeachingPanel


class Outputs:
    """Needs the app's ``screenshots``, ``shots``, ``session``, ``roles``, ``panel()`` and Textual's App."""

    screenshots: Path | None
    start_error: str | None
    display_mode: Display

    def _start_failed(self, message: str) -> None:
        """The session did not start: the panels, the status line, the log and a toast say why."""
        self.start_error = message
        message = self.display_mode.text(message)  # --stable: no pids or addresses
        self.sub_title = "could not start"
        for role in self.roles:
            self.panel(role).start_failed()
        self.query_one(TeachingPanel).show_start_failure(message)
        self.query_one(StatusLine).show_error(f"could not start: {message}")
        self.query_one(EventLog).write(Text(f"could not start: {message}", style="bold red"))
        self.notify(message, severity="error", timeout=10)

    def write_failed(self, message: str) -> None:
        """A file could not be written (screenshot, transcript): a toast and a line in the log; the app goes on."""
        self.query_one(EventLog).write(Text(message, style="bold red"))
        self.notify(message, severity="error", timeout=8)

    def action_screenshot(self) -> None:
        where = str(self.screenshots or os.getcwd())
        try:
            path = self.save_screenshot(path=where)
        except OSError as exc:
            self.write_failed(
                f"screenshot not saved in {where}: {exc.strerror} (fix: start vmmtui in a "
                "writable directory, or pass --screenshots DIR)"
            )
            return
        self.notify(f"saved {path}", timeout=3)

    def _auto_screenshot(self, name: str) -> None:
        """Save ``name``.svg (``NN-role-step``: the plan step whose events the screen now holds)."""
        self.shots += 1
        if self.screenshots is None:  # an earlier one failed
            return
        try:
            self.screenshots.mkdir(parents=True, exist_ok=True)
            self.save_screenshot(filename=f"{name}.svg", path=str(self.screenshots))
        except OSError as exc:
            self.write_failed(
                f"--screenshots {self.screenshots}: {exc.strerror}; no more screenshots this run"
            )
            self.screenshots = None
