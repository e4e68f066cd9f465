"""The attach view: an App of its own over processes vmmtui did not start.

Left: the processes (pid, name, fds by kind, GPU memory) and the selected one's fds; right: who
shares what (processes joined by the files they share, with kind labels), the selected process's
timeline, and what cannot be seen from outside.

A collector thread polls at ``hz`` (≥ 4) and owns the follower: it builds a ``Board`` (an immutable
value) after each poll and only posts it as a message; the UI renders from the last board and never
reads the follower. What the UI asks of the collector (another process selected, pause) goes to it
through a queue. Tables are rebuilt only when a poll changed something.
"""

from __future__ import annotations

import asyncio
import queue
import time
from dataclasses import dataclass

from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.widgets import DataTable, Footer, Header, RichLog, Static

from vmmtui.attach.board import Board, board
from vmmtui.attach.follow import Follower
from vmmtui.events import GpuMemory, SharedFile
from vmmtui.names import shown
from vmmtui.narration import attach_lines, shared_file, socket_pair

#: how a poll stays cheap, said on screen: what it carries over and how long a change can hide
CARRIED = (
    "each poll re-reads only processes that ran since the last one (a process that did not run cannot "
    "have changed its fds or mappings); every process is read in full every 5 s anyway"
)


@dataclass
class Polled(Message):
    """One poll done: ``board`` is what to show now, None when nothing changed."""

    board: Board | None
    polls: int


@dataclass
class Select:
    pid: int


class Collector:
    """Owns the follower; polls on its own thread, hands out boards, takes requests by queue."""

    def __init__(self, pids: list[int], interval: float) -> None:
        self.follower = Follower(set(pids), interval=interval)
        self.interval = interval
        self.requests: queue.SimpleQueue = queue.SimpleQueue()
        self.selected: int | None = None
        self.paused = False
        self.gpu: dict[int, GpuMemory] = {}

    def run(self, post, cancelled) -> None:
        try:
            while not cancelled():
                start = time.monotonic()
                reselected = False
                while not self.requests.empty():
                    req = self.requests.get()
                    if isinstance(req, Select):
                        self.selected, reselected = req.pid, True
                    elif req == "pause":
                        self.paused = not self.paused
                if not self.paused:
                    events = self.follower.poll()
                    self.gpu.update({e.pid: e for e in events if isinstance(e, GpuMemory)})
                    changed = bool(events) or reselected or self.follower.polls == 1
                    b = board(self.follower, self.selected, events, self.gpu, reselected)
                    self.selected = b.selected
                    post(Polled(b if changed else None, self.follower.polls))
                elif reselected:
                    post(Polled(board(self.follower, self.selected, [], self.gpu, True), -1))
                time.sleep(max(0.0, self.interval - (time.monotonic() - start)))
        finally:
            self.follower.close()


class AttachApp(App):
    CSS_PATH = "attach.tcss"
    BINDINGS = [
        ("q", "quit", "Quit"),
        ("s", "screenshot", "SVG screenshot"),
        ("p", "pause", "Pause/resume"),
    ]
    TITLE = "vmmtui attach"

    def __init__(self, pids: list[int], hz: float = 4.0, trace=None) -> None:
        super().__init__()
        #: a started ``vmmtui.trace.tracer.Tracer``: its calls and the ledger's findings, live
        self.trace = trace
        self.pids = list(pids)
        self.collector = Collector(self.pids, 1.0 / max(hz, 4.0))
        self.board: Board | None = None
        self.polls = 0
        self.paused = False

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal():
            with Vertical(id="left"):
                yield DataTable(id="procs", cursor_type="row")
                yield DataTable(id="fds", cursor_type="row")
            with Vertical():
                yield Static(id="shares")
                yield RichLog(id="timeline", wrap=True, markup=False)
                if self.trace is not None:
                    yield RichLog(id="trace", wrap=True, markup=False)
                yield Static(id="unseen")
        yield Footer()

    def on_mount(self) -> None:
        procs = self.query_one("#procs", DataTable)
        procs.add_columns("pid", "name", "gpu", "memfd", "shm", "sock", "mapped", "GPU mem")
        procs.border_title = "processes"
        fds = self.query_one("#fds", DataTable)
        fds.add_columns("fd", "kind", "target", "how", "same open file as")
        fds.border_title = "fds"
        self.query_one("#shares").border_title = "who shares what"
        self.query_one("#timeline").border_title = "timeline"
        self.query_one("#unseen").border_title = "not visible from outside"
        scanning = Text(f"scanning {len(self.pids)} process(es)…", "dim italic")
        self.query_one("#shares", Static).update(scanning)
        self.sub_title = f"scanning {len(self.pids)} process(es)…"
        self.run_worker(self._collect, thread=True, exclusive=True)
        if self.trace is not None:
            traced = self.query_one("#trace", RichLog)
            traced.border_title = "eBPF trace: every call as it happens, with the ledger's findings"
            for name, height in (
                ("shares", "25%"),
                ("timeline", "25%"),
                ("trace", "35%"),
                ("unseen", "15%"),
            ):
                self.query_one(f"#{name}").styles.height = height
            self.run_worker(self._trace, thread=True, group="trace")

    def _trace(self) -> None:
        """The tracer's events, folded into a ledger here, handed to the UI thread as lines."""
        from vmmtui.trace.events import TraceStarted
        from vmmtui.trace.ledger import Ledger
        from vmmtui.trace.narration import lines, worth_a_line

        ledger, t0 = Ledger(), 0
        for e in self.trace.events():
            if isinstance(e, TraceStarted):
                t0 = e.ktime0
            shown = [e] if worth_a_line(e, ledger) else []
            texts = [t for x in shown + ledger.apply(e) for t in lines(x, t0)]
            if texts:
                try:
                    self.call_from_thread(self._trace_lines, texts)
                except RuntimeError:  # the app is gone
                    return

    def _trace_lines(self, texts: list[Text]) -> None:
        log = self.query_one("#trace", RichLog)
        for t in texts:
            log.write(t)

    def on_unmount(self) -> None:
        if self.trace is not None:
            self.trace.stopping = True  # its events() ends within a poll and closes the probe

    def _collect(self) -> None:
        from textual.worker import get_current_worker

        worker = get_current_worker()
        self.collector.run(self.post_message, lambda: worker.is_cancelled)

    def on_polled(self, message: Polled) -> None:
        if message.polls >= 0:
            self.polls = message.polls
        b = message.board
        if b is None:
            return
        self.board = b
        self.sub_title = (
            "paused" if self.paused else f"{len(b.processes)} process(es) · poll {b.polls}"
        )
        self._processes(b)
        self._fds(b)
        self._shares(b)
        log = self.query_one("#timeline", RichLog)
        if b.timeline_restart:
            log.clear()
        for e in b.timeline:
            for line in attach_lines(e):
                log.write(line)
        notes = [Text("• " + u, "yellow") for u in b.unseen] or [
            Text("nothing hidden so far", "dim")
        ]
        notes.append(Text(CARRIED, "dim"))
        self.query_one("#unseen", Static).update(Text("\n").join(notes))

    def _processes(self, b: Board) -> None:
        table = self.query_one("#procs", DataTable)
        at = None  # the row under the cursor stays under it when the rows are made again
        if table.row_count:
            at = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        table.clear()
        for r in b.processes:
            g = r.gpu_memory
            mem = (
                ""
                if g is None
                else (g.error[:20] if g.error else f"{sum(g.used.values()) >> 20} MiB")
            )
            table.add_row(
                str(r.pid),
                Text(shown(r.name)),
                str(r.gpu),
                str(r.memfd),
                str(r.shm),
                str(r.sockets),
                str(r.mapped),
                Text(mem),
                key=str(r.pid),
            )
        if at is not None and any(str(r.pid) == at for r in b.processes):
            table.move_cursor(row=table.get_row_index(at), animate=False)

    def _fds(self, b: Board) -> None:
        table = self.query_one("#fds", DataTable)
        table.clear()
        table.border_title = f"fds of pid {b.selected}" if b.selected is not None else "fds"
        for x in b.fds:
            how = Text(x.how, "bold green" if x.how == "arrived" else "")
            others = ", ".join(f"{q}:{qfd}" for q, qfd in x.same_as)
            table.add_row(str(x.fd), x.kind, Text(shown(x.target, 50)), how, others)

    def _shares(self, b: Board) -> None:
        lines = [shared_file(s) if isinstance(s, SharedFile) else socket_pair(s) for s in b.shares]
        now = {line.plain for line in lines}
        earlier = [x for x in (shared_file(f) for f in b.earlier) if x.plain not in now]
        if earlier:
            lines += [Text("earlier:", "dim")] + [Text(x.plain, "dim") for x in earlier]
        self.query_one("#shares", Static).update(
            Text("\n").join(lines)
            if lines
            else Text("no file shared by two of these processes", "dim")
        )

    def on_data_table_row_selected(self, message: DataTable.RowSelected) -> None:
        if message.data_table.id == "procs" and message.row_key.value:
            self.collector.requests.put(Select(int(message.row_key.value)))

    def action_pause(self) -> None:
        self.paused = not self.paused
        self.collector.requests.put("pause")
        self.sub_title = "paused" if self.paused else "resumed"

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        from vmmtui.names import screenshot_name

        name = filename or screenshot_name(self.title)
        self.notify(f"saved {self.save_screenshot(name, path)}")


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


__all__ = ["AttachApp", "Collector", "Polled", "save_screenshot"]
