"""One worker's panel: who it is, its steps with ✓ ▶ ✗ and durations, its mapping card, its fds."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from vmmtui.events import StepDone, WorkerExited
from vmmtui.sizes import format_size
from vmmtui.steps import PLAN, role_steps, step_info
from vmmtui.widgets.display import Display
from vmmtui.widgets.fd_table import FdTableView


class ProcessPanel(Vertical):
    """Producer or consumer: header, step list, mapping card and live fd table."""

    def __init__(self, role: str, display: Display, **kw):
        super().__init__(id=role, classes="process", **kw)
        self.role = role
        self.fmt = display
        self.border_title = role
        self.pid: int | None = None
        self.backend = ""
        self.state_text = "starting"
        self.results: dict[str, tuple[bool, int]] = {}
        self.next_step: str | None = None
        self.worker_state: dict = {}
        self.plan: list[tuple[str, str]] = list(PLAN)
        self.mechanism = "vmm"

    def configure(self, plan: list[tuple[str, str]], mechanism: str) -> None:
        """The session's plan and mechanism decide this worker's step list and their titles."""
        self.plan, self.mechanism = plan, mechanism
        self.refresh_all()

    def compose(self) -> ComposeResult:
        yield Static(id=f"{self.role}-head", classes="head")
        with VerticalScroll(classes="upper"):
            yield Static(id=f"{self.role}-steps", classes="steps")
            yield Static(id=f"{self.role}-card", classes="card")
        yield FdTableView(self.role, self.fmt, id=f"{self.role}-fds")

    def on_mount(self) -> None:
        self.refresh_all()

    def reset(self) -> None:
        self.pid, self.backend, self.state_text = None, "", "starting"
        self.results.clear()
        self.next_step = None
        self.worker_state = {}
        self.refresh_all()

    # -- events ------------------------------------------------------------------------------------
    def started(self, pid: int, backend: str) -> None:
        self.pid, self.backend, self.state_text = pid, backend, "waiting"
        self.refresh_all()

    def step_running(self, step: str) -> None:
        self.state_text = f"running {step}"
        self.refresh_all()

    def step_done(self, e: StepDone) -> None:
        r = e.report
        self.results[r.step] = (r.ok, r.duration_ns)
        self.worker_state = r.state
        self.state_text = ("done" if r.step == "cleanup" else "waiting") if r.ok else f"failed at {r.step}"
        self.refresh_all()

    def set_next(self, step: str | None) -> None:
        self.next_step = step
        self.refresh_all()

    def exited(self, e: WorkerExited) -> None:
        self.state_text = f"exited: {'killed by ' + e.signal if e.signal else f'code {e.returncode}'}"
        self.refresh_all()

    # -- rendering ---------------------------------------------------------------------------------
    def refresh_all(self) -> None:
        if not self.is_mounted:
            return
        d = self.fmt
        head = Text.assemble(("pid ", "dim"), (d.pid(self.pid), "bold"), ("  ", ""),
                             (self.backend or "…", "cyan"), ("  ", ""), (self.state_text, self._state_style()))
        steps = role_steps(self.role, self.plan)
        done = sum(1 for ok, _ in self.results.values() if ok)
        if self.backend == "cuda" and self.worker_state.get("device") is not None:
            head.append(f"  GPU {self.worker_state['device']}", "bold cyan")
            if self.worker_state.get("peer_access"):
                head.append(" (peer access to the producer's GPU)", "cyan")
        head.append(f"  {done}/{len(steps)} steps", "dim")
        if self.next_step:
            head.append(f"\n▶ {step_info(self.role, self.next_step, self.mechanism).title}", "bold yellow")
        elif self.worker_state.get("device_name"):
            head.append(f"\n{self.worker_state['device_name']}", "dim")
        self.query_one(f"#{self.role}-head", Static).update(head)
        self.query_one(f"#{self.role}-steps", Static).update(self._steps())
        self.query_one(f"#{self.role}-card", Static).update(self._card())

    def _state_style(self) -> str:
        s = self.state_text
        return "red" if s.startswith(("failed", "exited: killed", "exited: code 1")) else (
            "green" if s == "done" else "yellow")

    def _steps(self) -> Text:
        text = Text()
        for name in role_steps(self.role, self.plan):
            step = step_info(self.role, name, self.mechanism)
            if name in self.results:
                ok, ns = self.results[name]
                mark, style = ("✓", "green") if ok else ("✗", "bold red")
                dur = self.fmt.ms(ns)
            elif name == self.next_step:
                mark, style, dur = "▶", "bold yellow", ""
            else:
                mark, style, dur = "·", "dim", ""
            text.append(f"{mark} ", style)
            text.append(f"{step.title}", "bold" if name == self.next_step else "")
            if dur:
                text.append(f"  {dur}", "dim")
            text.append("\n")
        text.rstrip()
        return text

    def _card(self) -> Table:
        s, d = self.worker_state, self.fmt
        t = Table.grid(padding=(0, 1))
        t.add_column(style="dim", no_wrap=True)
        t.add_column()
        handle = s.get("handle")
        va = s.get("va")
        size = s.get("alloc_size")
        rows = [
            ("handle", d.addr(handle) if handle is not None and self.backend == "cuda" else
             (f"memfd fd {handle}" if handle is not None else "-")),
            ("VA range", f"{d.addr(va)} – {d.addr(va + size)}" if va is not None and size else "-"),
            ("mapped", format_size(s["mapped_size"]) if s.get("mapped_size") else "-"),
            ("granularity", format_size(s["granularity"]) if s.get("granularity") else "-"),
            ("access", s.get("access", "-") if va is not None else "-"),
        ]
        if s.get("ipc_handle"):
            rows[0] = ("IPC handle", f"{s['ipc_handle'][:24]}… (64 bytes, no fd)")
        if s.get("device") is not None and self.backend == "cuda":
            rows.append(("device", str(s["device"]) + (" (peer of the producer's)" if s.get("peer_access") else "")))
        if s.get("slice"):
            rows.append(("writes", f"integers [{s['slice'][0]}, {s['slice'][1]})"))
        if s.get("exported_fd") is not None:
            rows.append(("exported fd", str(s["exported_fd"])))
        if s.get("received_fd") is not None:
            rows.append(("received fd", str(s["received_fd"])))
        for k, v in rows:
            t.add_row(k, v)
        return t
