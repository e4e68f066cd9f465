"""One process's panel, for every source: who it is and what it holds.

A worker of the session: its header, its steps with ✓ ▶ ✗ and durations (the plan over it), its
mapping card and its fd table, each part repainted only when what it shows changed. A program
vmmtui did not start: its fds of interest, its memory and its last calls (``programs.py``'s rows),
focusable, its memory sorted by ``o``. Both draw one ``ProcessPanelView`` (``view.panels``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text
from textual import events
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Static

from vmmtui.plan.steps import build_plan, role_steps, step_info
from vmmtui.stream.sizes import format_size
from vmmtui.stream.state import WorkerState
from vmmtui.tui.messages import StepChosen
from vmmtui.tui.widgets.fd_table import FdTableView
from vmmtui.view import Display, PanelView, ScreenState
from vmmtui.view.budget import Window, share, window
from vmmtui.view.model import PanelState
from vmmtui.view.panels import ProcessPanelView, process_view
from vmmtui.words import narration as say

if TYPE_CHECKING:
    from vmmtui.view.programs import ProcView

#: how a program's memory can be sorted (``o`` cycles)
SORTS = ("time", "size", "pins")


class _Rows(Static):
    """A program's rows: as many as its height holds, drawn again when it is resized."""

    def on_resize(self) -> None:
        panel = self.parent
        if isinstance(panel, ProcessPanel):
            panel.again()


class ProcessPanel(Vertical):
    """One process, from the state shown: a worker (``who``: its role) or a program vmmtui did not
    start (``who``: its pid).

    ``show(state)`` repaints each part only when what it shows changed.
    """

    def __init__(self, who: str | int, display: Display, **kw):
        program = isinstance(who, int)
        role = f"pid-{who}" if program else str(who)
        super().__init__(id=role, classes="program" if program else "process", **kw)
        #: a program's panel takes the focus (tab), for ``o``; a worker's does not
        self.can_focus = program
        self.role = role
        #: the traced process's pid (None: a worker, whose pid is its view's)
        self.pid: int | None = who if isinstance(who, int) else None
        self.fmt = display
        self.border_title = role
        self.view = PanelView(role)
        self.next_step: str | None = None
        self.plan: tuple[tuple[str, str], ...] = tuple(build_plan())
        self.mechanism = "vmm"
        self.transport = "scm-rights"
        self.front: str | None = None
        self.show_all = False
        #: rows the step list may take (``budget.share``); None: all it needs
        self.step_room: int | None = None
        #: the step list as last drawn: which steps, which folded
        self.step_window = Window(0, 0, 0)
        self._shown: dict[str, tuple] = {}
        #: "as of step N" while a past step is shown (the screen sets it)
        self.mark = ""
        #: the rows of a mapping card left out for want of rows (0: shown, or nothing in it)
        self.card_left_out = 0
        #: a program's memory order (``o``), and what it was last drawn from
        self.sort = "time"
        self._key: tuple = ()
        self._last: tuple[ProcessPanelView, str] | None = None

    # what the tests and the app read
    @property
    def results(self) -> dict[str, tuple[bool, int]]:
        return self.view.results

    @property
    def worker_state(self) -> WorkerState | None:
        return self.view.worker_state

    @property
    def state_text(self) -> str:
        """The state as the head line says it: how the worker ended, once it has."""
        return say.panel_state(self.view)

    def compose(self) -> ComposeResult:
        if self.pid is not None:
            yield _Rows(classes="rows")
            return
        yield Static(id=f"{self.role}-head", classes="head")
        # the compact layout hides the step list, and shows the next step here instead
        yield Static(id=f"{self.role}-next", classes="next")
        yield Static(id=f"{self.role}-steps", classes="steps")
        yield FdTableView(self.role, self.fmt, id=f"{self.role}-fds")
        yield Static(id=f"{self.role}-card", classes="card")

    def show(self, state: ScreenState, show_all: bool = False, mark: str = "") -> None:
        view = process_view(state, self.role if self.pid is None else self.pid)
        if view.program is not None:
            self._show_program(view, mark)
            return
        assert view.worker is not None and view.plan is not None
        self.view, self.plan, self.mechanism = view.worker, view.plan.plan, view.plan.mechanism
        self.transport = view.plan.transport
        self.next_step = view.plan.next_step
        self.front = view.front
        self.show_all = show_all
        self._budget()
        w = self.view
        self._part("head", self._shown_head_key(), self._head)
        self._part("next", (self.next_step, self.mechanism, self.transport), self._next)
        self._part(
            "steps",
            (w.results, self.next_step, self.plan, self.mechanism, self.step_room),
            self._steps,
        )
        self._part("card", (w.worker_state, w.backend, self.mechanism), self._card)
        for table in self.query(FdTableView):
            table.show(w, show_all, self.front)

    # -- a program vmmtui did not start ------------------------------------------------------------
    def _show_program(self, view: ProcessPanelView, mark: str) -> None:
        self._last = (view, mark)
        p, v = view.program, view.programs
        assert p is not None and v is not None
        rows = next(iter(self.query(_Rows)), None)
        if rows is None:  # not composed yet (or being removed)
            return
        key = (p, v.transfers_len, rows.size, self.sort, mark, self.has_focus)
        if key == self._key:
            return
        self._key = key
        from vmmtui.tui.widgets.programs import pid_style, program_rows

        self.border_title = Text(p.name, pid_style(v, p.pid))
        self.border_subtitle = mark or self._program_state(p)
        self.set_class(not p.alive, "-gone")
        rows.update(program_rows(v, p, self.sort, max(1, rows.size.height)))

    def _program_state(self, p: ProcView) -> str:
        state = "running"
        if not p.alive:
            from vmmtui.words.programs import end_words  # with the first trace (not a demo's frame)

            state = end_words(p.end)
        sort = f" · sorted by {self.sort}" if self.sort != "time" else ""
        return f"{state} · {p.ncalls} call{'' if p.ncalls == 1 else 's'}{sort}"

    def again(self) -> None:
        """A program's panel drawn again from its last view (resized, focused, sorted)."""
        if self._last is not None:
            self._show_program(*self._last)

    def on_focus(self) -> None:
        self.again()

    def on_blur(self) -> None:
        self.again()

    def cycle_sort(self) -> str:
        """``o``: the program's memory by time, size or who pins it."""
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self.again()
        return self.sort

    # -- a worker of the session -------------------------------------------------------------------
    def on_resize(self) -> None:
        if self.pid is not None:
            self.again()
            return
        if self._shown.get("head") is not None:  # its "n/N steps" goes where the width has room
            self._shown.pop("head")
            self._part("head", self._shown_head_key(), self._head)
        room = self.step_room
        self._budget()
        if room != self.step_room:
            self._shown.pop("steps", None)
            for widget in self.query(f"#{self.role}-steps").results(Static):
                self._shown["steps"] = ()
                widget.update(self._steps())

    def _budget(self) -> None:
        """Share the panel's rows (``budget.share``): the header and the whole fd table first,
        then the step list, the card last; a step list that does not fit is folded."""
        height, width = self.content_region.height, self.content_region.width
        tables = list(self.query(FdTableView))
        if height <= 0 or width <= 0 or not tables:
            return
        table = tables[0]
        table.panel, table.front = self.view, self.front
        table.show_all = self.show_all
        fixed = self._rows(self._head(), width) + table.lines_needed(width)
        fixed += table.styles.margin.top
        nxt = self.query(f"#{self.role}-next").results(Static)
        fixed += sum(1 for w in nxt if w.styles.display != "none")
        # the step list and the card, where the screen's size tier shows them (-medium hides the
        # step list, -compact the card too)
        listed = any(w.styles.display != "none" for w in self.query(f"#{self.role}-steps"))
        names = len(role_steps(self.role, list(self.plan))) if listed else 0
        card_rows = sum(
            self._rows(self._card(), width) + w.styles.margin.top
            for w in self.query(f"#{self.role}-card")
        )
        compact = self.screen.has_class("-compact")  # the tier leaves the card out
        rows = share(height, fixed, names, 0 if compact else card_rows)
        self.set_class(not rows.card, "-no-card")
        self.step_room = rows.steps if listed else None
        # a card with something in it that is not drawn is said on the border (no row to spare)
        out = (compact or not rows.card) and self._card_has_content()
        self.card_left_out = card_rows if out else 0
        self.show_mark(self.mark)

    def show_mark(self, mark: str) -> None:
        """The border's subtitle: "as of step N" (``mark``) and the card left out, if it is."""
        self.mark = mark
        card = f"+ mapping card ({self.card_left_out} rows)" if self.card_left_out else ""
        subtitle = " · ".join(part for part in (mark, card) if part)
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle

    def _card_has_content(self) -> bool:
        s = self.view.worker_state
        if s is None:
            return False
        m = s.mapping
        return m.handle is not None or m.va is not None or bool(m.ipc_handle)

    def _rows(self, renderable, width: int) -> int:
        console = self.app.console
        return len(console.render_lines(renderable, console.options.update_width(width), pad=False))

    def _part(self, name: str, key: tuple, render) -> None:
        if self._shown.get(name) == key:
            return
        for widget in self.query(f"#{self.role}-{name}").results(Static):  # none while unmounting
            self._shown[name] = key
            widget.update(render())

    def on_click(self, event: events.Click) -> None:
        """A click on a done step of the list: the app shows the panels as of it."""
        if self.pid is not None:  # a program has no plan, no step list
            return
        steps = self.query_one(f"#{self.role}-steps", Static)
        offset = event.get_content_offset(steps) if event.widget is steps else None
        names = role_steps(self.role, list(self.plan))
        shown = self.step_window
        row = None if offset is None else offset.y - (shown.before > 0) + shown.start
        if row is None or not shown.start <= row < shown.stop or row >= len(names):
            return
        index = self.view.indices.get(names[row])
        if index is not None and index >= 0:
            event.stop()
            self.post_message(StepChosen(index + 1))

    # -- rendering ---------------------------------------------------------------------------------
    def _shown_head_key(self) -> tuple:
        w = self.view
        return (w.pid, w.backend, self.state_text, w.worker_state, w.results, self.plan, self.size)

    def _head(self) -> Text:
        d, v = self.fmt, self.view
        head = Text.assemble(
            ("pid ", "dim"),
            (d.pid(v.pid), "bold"),
            ("  ", ""),
            (v.backend or "…", "cyan"),
            ("  ", ""),
            (self.state_text, self._state_style()),
        )
        steps = role_steps(self.role, list(self.plan))
        done = sum(1 for ok, _ in v.results.values() if ok)
        s = v.worker_state
        if v.backend == "cuda" and s is not None and s.device is not None:
            head.append(f"  GPU {s.device}", "bold cyan")
            if s.peer_access:
                head.append(" (peer access to the producer's GPU)", "cyan")
        # "3/10 steps" is one unit: where it does not fit beside the rest it takes the next line
        # whole (a wrap between the two left "steps" alone, read as the title of an empty list)
        tail = f"{done}/{len(steps)} steps"
        width = self.content_region.width
        sep = "\n" if 0 < width < head.cell_len + 2 + len(tail) else "  "
        head.append(sep + tail, "dim")
        return head

    def _next(self) -> Text:
        return Text(
            f"▶ {step_info(self.role, self.next_step, self.mechanism, self.transport).title}"
            if self.next_step
            else "",
            "bold yellow",
            no_wrap=True,
            overflow="ellipsis",
        )

    def _state_style(self) -> str:
        v, ended = self.view, self.view.ended
        if ended is not None:  # killed, or an exit status that is not 0
            return "red" if ended.signal or ended.returncode != 0 else "yellow"
        bad = (PanelState.FAILED, PanelState.STOPPED, PanelState.NOT_STARTED)
        return "red" if v.state in bad else ("green" if v.state is PanelState.DONE else "yellow")

    def _steps(self) -> Table:
        """One row a step; the duration has its own column, so it never wraps away from its unit."""
        t = Table.grid(padding=(0, 1), expand=True)
        t.add_column(no_wrap=True, width=1)
        t.add_column(ratio=1, overflow="ellipsis", no_wrap=True)
        t.add_column(justify="right", no_wrap=True, style="dim")
        names = role_steps(self.role, list(self.plan))
        focus = next(
            (k for k, n in enumerate(names) if n == self.next_step or n not in self.view.results),
            len(names) - 1,
        )
        failed = [k for k, n in enumerate(names) if not self.view.results.get(n, (True, 0))[0]]
        room = len(names) if self.step_room is None else self.step_room
        shown = window(len(names), room, failed[0] if failed else focus)
        self.step_window = shown
        if room <= 0:  # no row left: the header's "n/N steps" counts them
            return t
        if not shown.stop - shown.start:
            t.add_row(
                "",
                Text(f"… {len(names)} steps folded (a taller window shows them)", "bold yellow"),
                "",
            )
            return t
        if shown.before:
            t.add_row("", Text(f"… {shown.before} earlier steps above", "bold yellow"), "")
        for name in names[shown.start : shown.stop]:
            step = step_info(self.role, name, self.mechanism, self.transport)
            if name in self.view.results:
                ok, ns = self.view.results[name]
                mark, style = ("✓", "green") if ok else ("✗", "bold red")
                dur = self.fmt.ms(ns)
            elif name == self.next_step:
                mark, style, dur = "▶", "bold yellow", ""
            else:
                mark, style, dur = "·", "dim", ""
            t.add_row(
                Text(mark, style), Text(step.title, "bold" if name == self.next_step else ""), dur
            )
        if shown.after:
            t.add_row("", Text(f"… {shown.after} more steps below", "bold yellow"), "")
        return t

    def _card(self) -> Table:
        s, d, backend = self.view.worker_state, self.fmt, self.view.backend
        t = Table.grid(padding=(0, 1))
        t.add_column(style="dim", no_wrap=True)
        t.add_column()
        if s is None:
            s = WorkerState(self.role, 0, backend, self.mechanism, "", 0, "")
        m = s.mapping
        rows = [
            (
                "handle",
                d.addr(m.handle)
                if m.handle is not None and backend == "cuda"
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
                    + (f" of {s.device_name}" if s.device_name and backend != "cuda" else "")
                )
                if m.size
                else "-",
            ),
            ("granularity", format_size(s.granularity) if s.granularity else "-"),
            ("access", (m.access or "-") if m.va is not None else "-"),
        ]
        if m.ipc_handle:
            rows[0] = ("IPC handle", f"{m.ipc_handle[:24]}… (64 bytes, no fd)")
        if s.device is not None and backend == "cuda":
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
            t.add_row(k, Text(v))  # recorded names (a device's): text, never markup
        return t
