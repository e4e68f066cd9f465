"""``--cast FILE.cast``: the screen as an asciinema v2 recording (``asciinema play FILE.cast``).

Line 1 is the header (version 2, width, height, timestamp); each next line is ``[seconds, "o",
text]``, the text being the whole screen in ANSI: one frame for every state the app shows (each
step, each step back, each live read that changed something), taken after that state was painted
(times from the monotonic clock, so they only grow).
"""

from __future__ import annotations

import io
import json
import re
import time
from pathlib import Path

from rich.console import Console
from textual.app import App

#: clear and home before each frame: each event draws the whole screen
CLEAR = "\x1b[H\x1b[2J"


def screen_ansi(app: App) -> str:
    """The current screen as ANSI text, one line per row (what export_screenshot renders as SVG)."""
    width, height = app.size
    console = Console(
        width=width,
        height=height,
        file=io.StringIO(),
        force_terminal=True,
        color_system="truecolor",
        record=True,
        legacy_windows=False,
        safe_box=False,
    )
    console.print(
        app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    )
    return console.export_text(styles=True).rstrip("\n").replace("\n", "\r\n")


ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def plain(ansi: str) -> str:
    """A frame's text without its colours."""
    return ANSI.sub("", ansi)


class CastWriter:
    def __init__(self, app: App, path: str | Path):
        self.app = app
        self.path = Path(path)
        self.file = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 - held open while the app runs
        self.t0 = time.monotonic()
        self.last = ""
        self.frames = 0
        width, height = app.size
        self.file.write(
            json.dumps(
                {
                    "version": 2,
                    "width": width,
                    "height": height,
                    "timestamp": int(time.time()),
                    "title": app.title,
                    "env": {"TERM": "xterm-256color"},
                }
            )
            + "\n"
        )

    def capture(self, only_changed: bool = False) -> None:
        """A frame of the screen as it is now (the app calls it after painting a state)."""
        if self.file.closed or not self.app.is_running:
            return
        try:
            text = screen_ansi(self.app)
        except Exception:  # noqa: BLE001 - a screen in the middle of a change: the next tick gets it
            return
        if only_changed and text == self.last:
            return
        self.last = text
        self.frames += 1
        self.file.write(
            json.dumps(
                [round(time.monotonic() - self.t0, 6), "o", CLEAR + text], ensure_ascii=False
            )
            + "\n"
        )
        self.file.flush()

    def close(self) -> None:
        """The last frame, then the file is complete."""
        if self.file.closed:
            return
        self.capture(only_changed=True)
        self.file.close()
