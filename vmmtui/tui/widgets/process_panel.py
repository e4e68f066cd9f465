"""One worker's panel: who it is, its steps with ✓ ▶ ✗ and durations, its mapping card, its fds."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from vmmtui import narration as say
from vmmtui.events import SessionStarted, StepDone, WorkerExited, WorkerStarted
from vmmtui.sizes import format_size
from vmmtui.state import WorkerState
from vmmtui.steps import build_plan, role_steps, step_info
from vmmtui.tui.messages import EventView, SessionEvent, StepChosen
from vmmtui.tui.widgets.display import Display
from vmmtui.tui.widgets.fd_table import FdTableView


class ProcessPanel(EventView, Vertical):
    """Producer or consumer: header, step list, mapping card and live fd table.

    Renders the session's plan, its worker's start, steps and exit; the app tells it which step
    runs now and which comes next (``step_running``, ``set_next``), which no event says.
    """

    def __init__(self, role: str, display: Display, **kw):
        super().__init__(id=role, classes="process", **kw)
        self.role = role
        self.fmt = display
        self.border_title = role
        self.pid: int | None = None
        self.backend = ""
        self.state_text = "starting"
        self.results: dict[str, tuple[bool, int]] = {}
        #: each done step's place in the plan (a click on it shows the panels as of it)
        self.indices: dict[str, int] = {}
        self.next_step: str | None = None
        self.worker_state: WorkerState | None = None
        self.plan: list[tuple[str, str]] = build_plan()
        self.mechanism = "vmm"
        self.transport = "scm-rights"

    def configure(
        self, plan: list[tuple[str, str]], mechanism: str, transport: str = "scm-rights"
    ) -> None:
        """The session's plan, mechanism and transport decide this worker's step list and titles."""
        self.plan, self.mechanism, self.transport = plan, mechanism, transport
        self.refresh_all()

    def compose(self) -> ComposeResult:
        yield Static(id=f"{self.role}-head", classes="head")
        # the compact layout hides the step list, and shows the next step here instead
        yield Static(id=f"{self.role}-next", classes="next")
        yield Static(id=f"{self.role}-steps", classes="steps")
        yield Static(id=f"{self.role}-card", classes="card")
        yield FdTableView(self.role, self.fmt, id=f"{self.role}-fds")

    def on_mount(self) -> None:
        self.refresh_all()

    def reset(self) -> None:
        self.pid, self.backend, self.state_text = None, "", "starting"
        self.results.clear()
        self.indices.clear()
        self.next_step = None
        self.worker_state = None
        self.refresh_all()

    # -- events ------------------------------------------------------------------------------------
    @on(SessionEvent)
    def render_event(self, message: SessionEvent) -> None:
        e = message.event
        if isinstance(e, SessionStarted):
            self.configure(e.plan, e.mechanism, e.transport)
        elif isinstance(e, WorkerStarted) and e.role == self.role:
            self.started(e.pid, e.backend)
        elif isinstance(e, StepDone) and e.role == self.role:
            self.step_done(e)
        elif isinstance(e, WorkerExited) and e.role == self.role:
            self.exited(e)

    def on_click(self, event: events.Click) -> None:
        """A click on a done step of the list: the app shows the panels as of it."""
        steps = self.query_one(f"#{self.role}-steps", Static)
        offset = event.get_content_offset(steps) if event.widget is steps else None
        names = role_steps(self.role, self.plan)
        if offset is None or not 0 <= offset.y < len(names):
            return
        index = self.indices.get(names[offset.y])
        if index is not None and index >= 0:
            event.stop()
            self.post_message(StepChosen(index + 1))

    def started(self, pid: int, backend: str) -> None:
        self.pid, self.backend, self.state_text = pid, backend, "waiting"
        self.refresh_all()

    def step_running(self, step: str) -> None:
        self.state_text = f"running {step}"
        self.refresh_all()

    def step_done(self, e: StepDone) -> None:
        r = e.report
        self.results[r.step] = (r.ok, r.duration_ns)
        self.indices[r.step] = e.index
        self.worker_state = r.state
        self.state_text = (
            ("done" if r.step == "cleanup" else "waiting") if r.ok else f"failed at {r.step}"
        )
        self.refresh_all()

    def set_next(self, step: str | None) -> None:
        self.next_step = step
        self.refresh_all()

    def start_failed(self) -> None:
        """The session did not start (the teaching panel says why): no more "starting" forever."""
        self.state_text = (
            "failed to start (see below)"
            if self.pid is None
            else "stopped: the session did not start"
        )
        self.next_step = None
        self.refresh_all()

    def exited(self, e: WorkerExited) -> None:
        self.state_text = say.exit_state(e)
        self.refresh_all()

    # -- rendering ---------------------------------------------------------------------------------
    def refresh_all(self) -> None:
        if not self.is_mounted:
            return
        d = self.fmt
        head = Text.assemble(
            ("pid ", "dim"),
            (d.pid(self.pid), "bold"),
            ("  ", ""),
            (self.backend or "…", "cyan"),
            ("  ", ""),
            (self.state_text, self._state_style()),
        )
        steps = role_steps(self.role, self.plan)
        done = sum(1 for ok, _ in self.results.values() if ok)
        s = self.worker_state
        if self.backend == "cuda" and s is not None and s.device is not None:
            head.append(f"  GPU {s.device}", "bold cyan")
            if s.peer_access:
                head.append(" (peer access to the producer's GPU)", "cyan")
        head.append(f"  {done}/{len(steps)} steps", "dim")
        nxt = Text(
            f"▶ {step_info(self.role, self.next_step, self.mechanism, self.transport).title}"
            if self.next_step
            else "",
            "bold yellow",
            no_wrap=True,
            overflow="ellipsis",
        )
        self.query_one(f"#{self.role}-head", Static).update(head)
        self.query_one(f"#{self.role}-next", Static).update(nxt)
        self.query_one(f"#{self.role}-steps", Static).update(self._steps())
        self.query_one(f"#{self.role}-card", Static).update(self._card())

    def _state_style(self) -> str:
        s = self.state_text
        return (
            "red"
            if s.startswith(("failed", "stopped", "exited: killed", "exited: code 1"))
            else ("green" if s == "done" else "yellow")
        )

    def _steps(self) -> Table:
        """One row a step; the duration has its own column, so it never wraps away from its unit."""
        t = Table.grid(padding=(0, 1), expand=True)
        t.add_column(no_wrap=True, width=1)
        t.add_column(ratio=1, overflow="ellipsis", no_wrap=True)
        t.add_column(justify="right", no_wrap=True, style="dim")
        for name in role_steps(self.role, self.plan):
            step = step_info(self.role, name, self.mechanism, self.transport)
            if name in self.results:
                ok, ns = self.results[name]
                mark, style = ("✓", "green") if ok else ("✗", "bold red")
                dur = self.fmt.ms(ns)
            elif name == self.next_step:
                mark, style, dur = "▶", "bold yellow", ""
            else:
                mark, style, dur = "·", "dim", ""
            t.add_row(
                Text(mark, style), Text(step.title, "bold" if name == self.next_step else ""), dur
            )
        return t

    def _card(self) -> Table:
        s, d = self.worker_state, self.fmt
        t = Table.grid(padding=(0, 1))
        t.add_column(style="dim", no_wrap=True)
        t.add_column()
        if s is None:
            s = WorkerState(self.role, 0, self.backend, self.mechanism, "", 0, "")
        m = s.mapping
        rows = [
            (
                "handle",
                d.addr(m.handle)
                if m.handle is not None and self.backend == "cuda"
                else (f"memfd fd {m.handle}" if m.handle is not None else "-"),
            ),
            (
                "VA range",
                f"{d.addr(m.va)} – {d.addr(m.va + s.alloc_size)}"
                if m.va is not None and s.alloc_size
                else "-",
            ),
            (
                "mapped",
                (
                    format_size(m.size)
                    + (f" of {s.device_name}" if s.device_name and self.backend != "cuda" else "")
                )
                if m.size
                else "-",
            ),
            ("granularity", format_size(s.granularity) if s.granularity else "-"),
            ("access", (m.access or "-") if m.va is not None else "-"),
        ]
        if m.ipc_handle:
            rows[0] = ("IPC handle", f"{m.ipc_handle[:24]}… (64 bytes, no fd)")
        if s.device is not None and self.backend == "cuda":
            rows.append(
                (
                    "device",
                    f"{s.device} {s.device_name or ''}".rstrip()
                    + (" (peer of the producer's)" if s.peer_access else ""),
                )
            )
        if s.slice:
            rows.append(("writes", f"integers [{s.slice[0]}, {s.slice[1]})"))
        for k, v in rows:
            t.add_row(k, v)
        return t
