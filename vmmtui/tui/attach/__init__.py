"""The attach view: an App of its own over processes vmmtui did not start.

Left: the processes (pid, name, fds by kind, GPU memory) and the selected one's fds; right: who
shares what (processes joined by the files they share, with kind labels), the selected process's
timeline, and what cannot be seen from outside. A thread worker scans at ``hz`` (≥ 4) and hands the
events to the UI thread; tables are rebuilt only when something changed.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Footer, Header, RichLog, Static

from vmmtui.attach.follow import Follower
from vmmtui.events import AttachKind, Event, GpuMemory, Notice
from vmmtui.names import shown
from vmmtui.narration import attach_lines, shared_file, socket_pair

#: how a poll stays cheap, said on screen: what it carries over and how long a change can hide
CARRIED = (
    "each poll re-reads only processes that ran since the last one (a process that did not run cannot "
    "have changed its fds or mappings); every process is read in full every 5 s anyway"
)


class AttachApp(App):
    CSS = """
    #left { width: 55%; }
    #procs { height: 40%; border: round $accent; }
    #fds { height: 60%; border: round $accent; }
    #shares { height: 40%; border: round $success; overflow-y: auto; }
    #timeline { height: 40%; border: round $warning; }
    #unseen { height: 20%; border: round $error; overflow-y: auto; }
    """
    BINDINGS = [
        ("q", "quit", "Quit"),
        ("s", "screenshot", "SVG screenshot"),
        ("p", "pause", "Pause/resume"),
    ]
    TITLE = "vmmtui attach"

    def __init__(self, pids: list[int], hz: float = 4.0) -> None:
        super().__init__()
        self.follower = Follower(set(pids))
        self.interval = 1.0 / max(hz, 4.0)
        self.selected: int | None = None
        self.paused = False
        self.gpu: dict[int, GpuMemory] = {}
        self.polls = 0

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            with Vertical(id="left"):
                yield DataTable(id="procs", cursor_type="row")
                yield DataTable(id="fds", cursor_type="row")
            with Vertical():
                yield Static(id="shares")
                yield RichLog(id="timeline", wrap=True, markup=False)
                yield Static(id="unseen")
        yield Footer()

    def on_mount(self) -> None:
        procs = self.query_one("#procs", DataTable)
        procs.add_columns("pid", "name", "gpu", "memfd", "shm", "sock", "mapped", "GPU mem")
        self.query_one("#procs").border_title = "processes"
        fds = self.query_one("#fds", DataTable)
        fds.add_columns("fd", "kind", "target", "how", "same open file as")
        fds.border_title = "fds"
        self.query_one("#shares").border_title = "who shares what"
        self.query_one("#timeline").border_title = "timeline"
        self.query_one("#unseen").border_title = "not visible from outside"
        self.run_worker(self._poll, thread=True, exclusive=True)

    def _poll(self) -> None:
        from textual.worker import get_current_worker

        worker = get_current_worker()
        while not worker.is_cancelled:
            start = time.monotonic()
            if not self.paused:
                events = self.follower.poll()
                self.call_from_thread(self._apply, events)
            time.sleep(max(0.0, self.interval - (time.monotonic() - start)))
        self.follower.close()

    def _apply(self, events: list[Event]) -> None:
        self.polls += 1
        for e in events:
            if isinstance(e, GpuMemory):
                self.gpu[e.pid] = e
        if not events and self.polls > 1:
            return
        t = self.follower.tracker
        if self.selected is None and t.alive:
            self.selected = min(t.alive)
        self._processes()
        self._fds()
        self._shares()
        log = self.query_one("#timeline", RichLog)
        for e in events:
            pid = getattr(e, "pid", None)
            if pid is None or pid == self.selected:
                for line in attach_lines(e):
                    log.write(line)
        notes = [Text("• " + u, "yellow") for u in self.follower.unseen] or [
            Text("nothing hidden so far", "dim")
        ]
        notes.append(Text(CARRIED, "dim"))
        self.query_one("#unseen", Static).update(Text("\n").join(notes))

    def _processes(self) -> None:
        table = self.query_one("#procs", DataTable)
        table.clear()
        for pid, p in sorted(self.follower.tracker.alive.items()):
            kinds = Counter(f.kind for f in p.fds.values())
            g = self.gpu.get(pid)
            mem = (
                ""
                if g is None
                else (g.error[:20] if g.error else f"{sum(g.used.values()) >> 20} MiB")
            )
            table.add_row(
                str(pid),
                Text(shown(p.name)),
                str(kinds[AttachKind.GPU]),
                str(kinds[AttachKind.MEMFD]),
                str(kinds[AttachKind.SHM]),
                str(kinds[AttachKind.SOCKET]),
                str(len(p.maps)),
                mem,
                key=str(pid),
            )

    def _fds(self) -> None:
        table = self.query_one("#fds", DataTable)
        table.clear()
        t = self.follower.tracker
        p = t.alive.get(self.selected or -1)
        table.border_title = f"fds of pid {self.selected}" if p else "fds"
        if p is None:
            return
        for fd, f in sorted(p.fds.items())[:500]:
            e = t.open_fds.get((p.pid, fd))
            how = Text(e.how, "bold green" if e and e.how == "arrived" else "") if e else Text("")
            others = ", ".join(
                f"{q}:{qfd}" for q, qfd in (t.shares.same_as(p.pid, fd, 4) if t.shares else [])
            )
            table.add_row(str(fd), f.kind, Text(shown(f.target, 50)), how, others)

    def _shares(self) -> None:
        t = self.follower.tracker
        lines: list[Text] = []
        if t.shares:
            lines += [shared_file(f) for f in t.shares.files] + [
                socket_pair(s) for s in t.shares.pairs
            ]
        now = {line.plain for line in lines}
        earlier = [
            x
            for x in (shared_file(f) for f in self.follower.shared_history[-6:])
            if x.plain not in now
        ]
        if earlier:
            lines += [Text("earlier:", "dim")] + [Text(x.plain, "dim") for x in earlier]
        self.query_one("#shares", Static).update(
            Text("\n").join(lines)
            if lines
            else Text("no file shared by two of these processes", "dim")
        )

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        if message.data_table.id == "procs" and message.row_key.value:
            self.selected = int(message.row_key.value)
            log = self.query_one("#timeline", RichLog)
            log.clear()
            for e in self.follower.tracker.timeline.get(self.selected, []):
                for line in attach_lines(e):
                    log.write(line)
            self._fds()

    def action_pause(self) -> None:
        self.paused = not self.paused

    def action_screenshot(self) -> None:
        self.notify(f"saved {self.save_screenshot()}")


def save_screenshot(
    pids: list[int], path: str, after: float = 2.0, size: tuple[int, int] = (160, 48)
) -> None:
    """Open the view headless, let it poll for ``after`` seconds, save an SVG to ``path``."""
    import os

    async def go() -> None:
        app = AttachApp(pids)
        async with app.run_test(size=size) as pilot:
            await pilot.pause(after)
            directory, name = os.path.split(os.path.abspath(path))
            app.save_screenshot(filename=name, path=directory)

    asyncio.run(go())


__all__ = ["AttachApp", "Notice", "save_screenshot"]
