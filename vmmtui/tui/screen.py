"""The one inspector screen: the live app, a replay and the browser view (serve) all show it.

It renders a ``ScreenState`` (``vmmtui.view``) and holds nothing of a session: the app sets
``state`` (and ``where``, ``mark``, ``queued``, ``show_all_fds``) and every widget repaints the
parts of it that changed. The layout tiers (``-compact``, ``-medium``, ``-tiny``) keep each
worker's own fds on screen from 80×24 up.
"""

from __future__ import annotations

from itertools import pairwise

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.css.query import NoMatches
from textual.message import Message
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Header, Static

from vmmtui.plan.steps import PRODUCER
from vmmtui.tui.widgets.event_log import EventLog
from vmmtui.tui.widgets.footer import KeysFooter
from vmmtui.tui.widgets.process_panel import ProcessPanel
from vmmtui.tui.widgets.status import StatusLine
from vmmtui.tui.widgets.step_bar import StepBar
from vmmtui.tui.widgets.teaching import TeachingPanel
from vmmtui.tui.widgets.wire import VerdictsPanel, WirePanel
from vmmtui.view import Display, ScreenState

#: the smallest terminal the inspector is drawn on; below it, one centred line says so
MIN_WIDTH, MIN_HEIGHT = 80, 24
#: below these sizes the layout gives up parts to keep the fd tables on screen
COMPACT_WIDTH, COMPACT_HEIGHT = 120, 36
MEDIUM_HEIGHT = 46
TINY_HEIGHT = 30
#: a trace's process panel is never narrower than this (``.program``'s min-width in the tcss)
PANEL_MIN_WIDTH = 26
#: a trace's event log holds its newest lines (search reaches every line; a match scrolls there)
LOG_WINDOW = 40


def panels_that_fit(width: int) -> int:
    """How many process panels a trace shows side by side at ``width`` columns: each at least
    ``PANEL_MIN_WIDTH``, and the focused one (twice as wide) still inside the screen."""
    return max(1, (width - PANEL_MIN_WIDTH) // PANEL_MIN_WIDTH)


class InspectorScreen(Screen):
    """Panels for every worker, the wire, verification, status, teaching text and the event log."""

    state: reactive[ScreenState] = reactive(ScreenState.blank, always_update=True, init=False)
    #: where the screen is, first on the status line: "REPLAY · step 3/27", "AS OF STEP 4"
    where: reactive[str] = reactive("", init=False)
    #: last on the status line, after the verdicts: what the frames leave out (a trace's calls)
    aside: reactive[str] = reactive("", init=False)
    #: "as of step N" under each panel's border while a past step is shown
    mark: reactive[str] = reactive("", init=False)
    #: keys pressed during a step, waiting their turn (shown on the status line)
    queued: reactive[int] = reactive(0, init=False)
    show_all_fds: reactive[bool] = reactive(False, init=False)
    #: the teacher's note on the frame shown (replay --notes): (what it is on, its text)
    note: reactive[tuple[str, str] | None] = reactive(None, init=False)

    class Ready(Message):
        """The screen's widgets exist: the app can draw its part of a state."""

    def __init__(self, state: ScreenState, display: Display, replay: bool = False):
        super().__init__()
        self.display_mode = display
        self.replay = replay
        self.set_reactive(InspectorScreen.state, state)
        self.ready = False

    def compose(self) -> ComposeResult:
        """One body for every source: the processes, the wire and the verdicts, the status, the
        plan's teaching strip (only where there is a plan), the event log and the timeline."""
        yield Static(id="too-small")
        yield Header(show_clock=False, icon="◆")
        if self.state.programs is not None:  # programs vmmtui did not start: panels as they come
            from vmmtui.tui.widgets.more import MoreProcesses

            yield Horizontal(id="programs")
            yield MoreProcesses(id="more")
            with Horizontal(id="trace-middle"):
                from vmmtui.tui.widgets.gpu import GpuPanel

                yield WirePanel(self.display_mode, id="transfers")
                yield VerdictsPanel(id="verdicts")
                yield GpuPanel(id="gpu")
        else:
            yield from self._compose_workers()
        yield StatusLine(id="status")
        if self.state.plan:
            yield TeachingPanel(self.replay, self.display_mode, id="teaching")
        log = EventLog(id="log")
        if self.state.programs is not None:
            log.window = LOG_WINDOW
        yield log
        yield StepBar("REPLAY" if self.replay else "LIVE", id="timeline")
        yield KeysFooter()

    def _compose_workers(self) -> ComposeResult:
        """The session's workers: the producer, the wire and the verdicts between it and the
        consumers (one tab each where there are several)."""
        with Horizontal(id="main"):
            yield ProcessPanel(PRODUCER, self.display_mode)
            with Vertical(id="middle"):
                yield WirePanel(self.display_mode, id="wire")
                yield VerdictsPanel(id="verification")
            consumers = self.state.roles[1:]
            if len(consumers) == 1:
                yield ProcessPanel(consumers[0], self.display_mode)
            else:  # one tab per consumer: readable up to 8, each with its own fd table
                from textual.widgets import TabbedContent, TabPane  # not for one consumer's frame

                with TabbedContent(id="consumers"):
                    for name in consumers:
                        with TabPane(name, id=f"tab-{name}"):
                            yield ProcessPanel(name, self.display_mode)

    def on_mount(self) -> None:
        self.set_class(self.state.programs is not None, "-programs")
        if self.state.programs is not None:  # the log, as before any panel: the "+N more"
            self.query_one(EventLog).focus()  # line opens on the focus, not at the start
        self.ready = True  # the widgets exist from here on
        self._tiers(self.size.width, self.size.height)
        self.paint()
        self.post_message(self.Ready())  # the app's part: the title, the cast's first frame

    def on_resize(self, event) -> None:
        self._tiers(event.size.width, event.size.height)

    def _tiers(self, width: int, height: int) -> None:
        small = width < MIN_WIDTH or height < MIN_HEIGHT
        if small:  # borders with nothing in them told no one why: the screen says it instead
            self.query_one("#too-small", Static).update(
                f"too small: {MIN_WIDTH}×{MIN_HEIGHT} needed, this is {width}×{height}\nq quits"
            )
        self.set_class(small, "-too-small")
        self.set_class(width < COMPACT_WIDTH or height < COMPACT_HEIGHT, "-compact")
        self.set_class(height < MEDIUM_HEIGHT, "-medium")
        self.set_class(height < TINY_HEIGHT, "-tiny")
        self.call_after_refresh(self.paint)  # each panel's row budget under the new tier
        self.call_after_refresh(self._tab_labels)

    def _tab_labels(self) -> None:
        """Several consumers: each tab named in full where all fit, else ``c1`` … ``c8`` (the panel's
        border still names it in full); a tab row cut at the edge hid the last ones with no sign."""
        if len(self.state.roles) <= 2:  # one consumer: no tabs (nor their module) at all
            return
        from textual.widgets import TabbedContent

        for tabs in self.query("#consumers").results(TabbedContent):
            names = self.state.roles[1:]
            room = tabs.size.width
            full = sum(len(n) + 2 for n in names) <= room
            for name in names:
                label = name if full else name.replace("consumer-", "c")
                tab = tabs.get_tab(f"tab-{name}")
                if tab.label_text != label:
                    tab.label = label

    # -- the one way in --------------------------------------------------------------------------
    def watch_state(self) -> None:
        self.paint()

    def watch_where(self) -> None:
        self.paint()

    def watch_aside(self) -> None:
        self.paint()

    def watch_queued(self) -> None:
        self.paint()

    def watch_show_all_fds(self) -> None:
        self.paint()

    def watch_mark(self, mark: str) -> None:
        if self.state.programs is not None:
            self.paint()
            return
        for panel in self.query(ProcessPanel):
            panel.show_mark(mark)  # beside what the panel says it left out
        self.query_one(WirePanel).border_subtitle = mark
        for teaching in self.query(TeachingPanel).results(TeachingPanel):
            teaching.show_mark(mark)  # beside what its cut left out

    def panel(self, role: str) -> ProcessPanel:
        return self.query_one(f"#{role}", ProcessPanel)

    def paint(self) -> None:
        """Every widget shows ``state``; each repaints only what changed in its part."""
        if not self.ready:
            return
        try:
            self._paint(self.state)
        except NoMatches:  # the app is ending and its widgets are being removed: nothing to show
            return

    def _paint(self, state: ScreenState) -> None:
        with self.app.batch_update():
            if state.programs is not None:
                self._paint_programs(state)
                from vmmtui.tui.widgets.gpu import GpuPanel

                self.query_one(GpuPanel).show(state)
            else:
                self._paint_workers(state)
            self.query_one(WirePanel).show(state)
            self.query_one(VerdictsPanel).show(state)
            self.query_one(StatusLine).show(state, self.where, self.queued, self.aside)
            for teaching in self.query(TeachingPanel).results(TeachingPanel):
                teaching.show(state, self.note)
            self.query_one(EventLog).show(state)

    def _paint_workers(self, state: ScreenState) -> None:
        for panel in self.query(ProcessPanel):
            panel.show(state, self.show_all_fds)
        if len(state.roles) > 2:  # the consumer of this state in front (the first before any)
            from textual.widgets import TabbedContent

            tabs = self.query_one("#consumers", TabbedContent)
            front = f"tab-{state.front or state.roles[1]}"
            if tabs.active != front:
                tabs.active = front

    def _paint_programs(self, state: ScreenState) -> None:
        """A panel per process shown (``view.lineup``), made once and moved as the lineup
        changes; the rest folded into the "+N more" line."""
        from vmmtui.tui.widgets.more import MoreProcesses
        from vmmtui.view.lineup import lineup

        v = state.programs
        assert v is not None
        box = self.query_one("#programs", Horizontal)
        line = lineup(v, panels_that_fit(box.size.width or self.size.width))
        shown = list(line.panels)
        have = {p.pid: p for p in self.query(ProcessPanel) if p.pid is not None}
        new = {pid: ProcessPanel(pid, self.display_mode) for pid in shown if pid not in have}
        if new:
            box.mount_all(list(new.values()))
            have.update(new)
        order = [p.pid for p in box.query_children(ProcessPanel) if p.pid in shown]
        if order != shown:  # the lineup changed: the panels move, none is made again
            for before, after in pairwise(shown):
                box.move_child(have[after], after=have[before])
        for pid, panel in have.items():
            panel.display = pid in shown  # folded, or stepping back: not there yet
            if pid in shown:
                panel.show(state, mark=self.mark)
        self.query_one(MoreProcesses).show(v, line)

    def focused_program(self) -> ProcessPanel | None:
        """The program's panel that has the focus, or the first shown (None: a session's workers)."""
        panels = [p for p in self.query(ProcessPanel) if p.pid is not None]
        focused = self.focused
        if isinstance(focused, ProcessPanel) and focused.pid is not None:
            return focused
        return next((p for p in panels if p.display), None)
