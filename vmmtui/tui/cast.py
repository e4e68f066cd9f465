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
        from vmmtui.system.atomic import AtomicFile

        self.path = Path(path)
        #: whole or not at all: written beside its name, put in place by ``close``
        self.out = AtomicFile(self.path)
        self.file = self.out.file
        #: why the cast could not be written (one line), or ""
        self.error = ""
        self.t0 = time.monotonic()
        self.last = ""
        self.frames = 0
        width, height = app.size
        header = {
            "version": 2,
            "width": width,
            "height": height,
            "timestamp": int(time.time()),
            "title": app.title,
            "env": {"TERM": "xterm-256color"},
        }
        try:
            self.file.write(json.dumps(header) + "\n")
        except OSError as exc:
            self._lost(exc)

    def capture(self, only_changed: bool = False) -> None:
        """A frame of the screen as it is now (the app calls it after painting a state)."""
        if self.out.done or not self.app.is_running:
            return
        try:
            text = screen_ansi(self.app)
        except Exception:  # noqa: BLE001 - a screen in the middle of a change: the next tick gets it
            return
        if only_changed and text == self.last:
            return
        self.last = text
        self.frames += 1
        try:
            self.file.write(
                json.dumps(
                    [round(time.monotonic() - self.t0, 6), "o", CLEAR + text], ensure_ascii=False
                )
                + "\n"
            )
            self.file.flush()
        except OSError as exc:
            self._lost(exc)

    def _lost(self, exc: OSError) -> None:
        self.error = (
            f"cannot write the cast {self.path}: {exc.strerror or exc}; nothing was written: free "
            "space there, or name a file on another file system"
        )
        self.out.abort()

    def close(self) -> None:
        """The last frame, then the file is complete and in place (or ``error`` says why not)."""
        if self.out.done:
            return
        self.capture(only_changed=True)
        if self.out.done:  # the last frame failed
            return
        try:
            self.out.commit()
        except OSError as exc:  # the last write or the rename (the temporary file is gone)
            self._lost(exc)
