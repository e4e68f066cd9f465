"""The inspector: a Textual app that steps both workers and shows every step, fd, address and check.

Session work (steps, start, close) and the 4 Hz fd refresh run in thread workers and come back as
messages; widgets only render events.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Footer, Header, Static, TabbedContent, TabPane

from vmmtui.backends import Choice
from vmmtui.commands import InspectorCommands
from vmmtui.events import (
    Event,
    FdSnapshot,
    KcmpVerdict,
    ScenarioOutcome,
    SessionClosed,
    SessionFailed,
    SessionFinished,
    SessionStarted,
    StepDone,
    WorkerExited,
    WorkerStarted,
)
from vmmtui.messages import FdRefresh, SessionEvents
from vmmtui.screens.help import HelpScreen
from vmmtui.screens.scenarios import NORMAL, ScenarioScreen
from vmmtui.session import Session, SessionConfig, SessionError
from vmmtui.steps import CONSUMER, PRODUCER, SEED_SHAPE, consumer_names
from vmmtui.transcript import Transcript
from vmmtui.widgets.display import Display
from vmmtui.widgets.event_log import EventLog
from vmmtui.widgets.fd_table import FdTableView
from vmmtui.widgets.process_panel import ProcessPanel
from vmmtui.widgets.teaching import TeachingPanel
from vmmtui.widgets.wire import VerificationPanel, WirePanel

REFRESH_S = 0.25
PACES = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0)


class InspectorApp(App[int]):
    CSS_PATH = "vmmtui.tcss"
    TITLE = "vmmtui"
    COMMANDS = App.COMMANDS | {InspectorCommands}
    BINDINGS = [
        Binding("space", "step", "Next step"),
        Binding("n", "step", "Next step", show=False),
        Binding("r", "run_all", "Run all"),
        Binding("a", "autoplay", "Autoplay"),
        Binding("plus", "faster", "Faster", show=False),
        Binding("minus", "slower", "Slower", show=False),
        Binding("ctrl+r", "restart", "Restart"),
        Binding("s", "screenshot", "Screenshot"),
        Binding("f", "fold", "All fds"),
        Binding("c", "scenario", "Scenario"),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, config: SessionConfig, choice: Choice | None = None, *, autoplay: bool = False,
                 pace: float = 1.0, screenshots: str | None = None, transcript: str | None = None,
                 stable: bool = False):
        super().__init__()
        self.config = config
        self.choice = choice
        self.display_mode = Display(stable)
        self.autoplay = autoplay
        self.pace = pace
        self.screenshots = Path(screenshots) if screenshots else None
        self.transcript = Transcript(transcript) if transcript else None
        self.session: Session | None = None
        self.generation = 0
        self.busy = False
        self.refreshing = False
        self.shots = 0
        self.status: dict[str, str] = {}

    @property
    def roles(self) -> list[str]:
        """Every worker's name: the producer, then one consumer or ``consumer-1`` … ``consumer-N``."""
        return [PRODUCER, *consumer_names(self.config.consumers)]

    # -- layout ------------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(show_clock=False)
        with Horizontal(id="main"):
            yield ProcessPanel(PRODUCER, self.display_mode)
            with Vertical(id="middle"):
                yield WirePanel(self.display_mode, id="wire")
                yield VerificationPanel(id="verification")
            consumers = consumer_names(self.config.consumers)
            if len(consumers) == 1:
                yield ProcessPanel(CONSUMER, self.display_mode)
            else:  # one tab per consumer: readable up to 8, each with its own fd table
                with TabbedContent(id="consumers"):
                    for name in consumers:
                        with TabPane(name, id=f"tab-{name}"):
                            yield ProcessPanel(name, self.display_mode)
        yield Static(id="status")
        yield TeachingPanel(id="teaching")
        yield EventLog(self.display_mode, id="log")
        yield Footer()

    def on_mount(self) -> None:
        if self.screenshots:
            self.screenshots.mkdir(parents=True, exist_ok=True)
        self._compact(self.size.width, self.size.height)
        self.set_interval(REFRESH_S, self._tick_refresh)
        self.autoplay_timer = self.set_interval(self.pace, self._tick_autoplay, pause=not self.autoplay)
        self._start_session(self.generation)

    def on_resize(self, event) -> None:
        self._compact(event.size.width, event.size.height)

    def _compact(self, width: int, height: int) -> None:
        self.screen.set_class(width < 120 or height < 36, "-compact")

    def panel(self, role: str) -> ProcessPanel:
        return self.query_one(f"#{role}", ProcessPanel)

    # -- session work in threads -------------------------------------------------------------------
    @work(thread=True, group="session")
    def _start_session(self, generation: int) -> None:
        session = Session(self.config, self.choice)
        self.session = session
        try:
            events = session.start()
        except SessionError as exc:
            events = session.close()
            self.call_from_thread(self._start_failed, str(exc))
        self.post_message(SessionEvents(events, generation))

    def _start_failed(self, message: str) -> None:
        self.query_one(TeachingPanel).update(Text(f"could not start: {message}", style="bold red"))
        self.notify(message, severity="error", timeout=10)

    @work(thread=True, group="session")
    def _drive(self, generation: int, steps: int | None) -> None:
        session = self.session
        done = 0
        try:
            while session is not None and not session.stopped and generation == self.generation:
                if steps is not None and done >= steps:
                    break
                nxt = session.next_step
                if nxt:
                    self.call_from_thread(self.panel(nxt[0]).step_running, nxt[1])
                self.post_message(SessionEvents(session.step(), generation))
                done += 1
        finally:
            self.busy = False

    @work(thread=True, group="refresh")
    def _refresh(self, generation: int) -> None:
        try:
            session = self.session
            if session is not None and not session.closed and session.workers:
                self.post_message(FdRefresh(session.snapshot(count=False) + session.poll_exits(), generation))
        finally:
            self.refreshing = False

    @work(thread=True, group="session", exclusive=False)
    def _close_session(self, then: str, generation: int) -> None:
        session = self.session
        events = session.close() if session is not None else []
        if then == "quit":
            # handled before exiting, so the transcript and log get the close events
            self.call_from_thread(self._finish, SessionEvents(events, generation))
            return
        self.post_message(SessionEvents(events, generation))
        if then == "restart":
            self.call_from_thread(self._reset_widgets)
            self.call_from_thread(self._start_session, self.generation)  # workers start on the UI thread

    def _tick_refresh(self) -> None:
        # stable mode (snapshots, recorded lectures) shows the tables read after each step only,
        # so the picture does not depend on when a live read happened to land
        if self.display_mode.stable:
            return
        if not self.refreshing and self.session is not None and not self.session.closed:
            self.refreshing = True
            self._refresh(self.generation)

    def _tick_autoplay(self) -> None:
        if self.session is None or self.busy:
            return
        if self.session.stopped:
            self.autoplay_timer.pause()
            return
        self.action_step()

    # -- event handling ----------------------------------------------------------------------------
    def on_session_events(self, message: SessionEvents) -> None:
        stepped = False
        for e in message.events:
            self.apply(e)
            if self.transcript:
                self.transcript.write(e)
            stepped |= isinstance(e, StepDone)
        if message.generation == self.generation:
            self._show_next()
        if stepped and self.screenshots:
            self.call_after_refresh(self._auto_screenshot)

    def on_fd_refresh(self, message: FdRefresh) -> None:
        if message.generation != self.generation:
            return
        for e in message.events:
            self.apply(e, live=True)

    def apply(self, e: Event, live: bool = False) -> None:
        log = self.query_one(EventLog)
        if not live or isinstance(e, (WorkerExited, KcmpVerdict)):
            log.log_event(e)
        if isinstance(e, SessionStarted):
            self.query_one(WirePanel).started(e)
            for role in self.roles:
                self.panel(role).configure(e.plan, e.mechanism)
            self.query_one(TeachingPanel).mechanism = e.mechanism
            self.sub_title = e.reason
            if (e.mechanism, len(e.consumers), e.direction) != SEED_SHAPE:
                self.sub_title += f" · {e.mechanism} · {len(e.consumers)} consumer(s) · {e.direction}"
            if self.config.scenario:
                self.sub_title += f" · scenario {self.config.scenario}"
                self.status["scenario"] = f"scenario {self.config.scenario}"
        elif isinstance(e, WorkerStarted):
            self.panel(e.role).started(e.pid, e.backend)
        elif isinstance(e, StepDone):
            self.panel(e.role).step_done(e)
            self.query_one(WirePanel).step_done(e)
            v = e.report.state.get("verification")
            if e.step == "verify" and v:
                self.query_one(VerificationPanel).set_result(v)
                self.status["verify"] = "PASSED" if v.get("passed") else "FAILED"
        elif isinstance(e, FdSnapshot):
            self.query_one(f"#{e.role}-fds", FdTableView).update_snapshot(e)
        elif isinstance(e, KcmpVerdict):
            for role in (PRODUCER, e.consumer):
                self.query_one(f"#{role}-fds", FdTableView).set_kcmp(e)
            self.query_one(WirePanel).set_kcmp(e)
            self.status["kcmp"] = e.describe()
        elif isinstance(e, SessionFailed):
            self.query_one(TeachingPanel).show_failure(e.role, e.step, e.failure)
            self.autoplay_timer.pause()
        elif isinstance(e, WorkerExited):
            self.panel(e.role).exited(e)
            if not e.expected and self.session and not self.session.closed and self.session.failure is None:
                self.query_one(TeachingPanel).update(Text(f"{e.describe()}: restart with ctrl+r", style="bold red"))
        elif isinstance(e, SessionFinished):
            self.status["done"] = "VERIFIED" if e.verified else "NOT VERIFIED"
        elif isinstance(e, ScenarioOutcome):
            verdict = "as expected" if e.as_expected else f"NOT as expected (expected {', '.join(e.expected)})"
            self.status["scenario"] = f"scenario {e.name}: {e.outcome} · {verdict}"
            self.notify(f"scenario {e.name} ended with {e.outcome}: {verdict}",
                        severity="information" if e.as_expected else "error", timeout=6)
        elif isinstance(e, SessionClosed) and not e.clean:
            self.notify("left behind: " + "; ".join(e.leftovers), severity="error")
        self._render_status()

    def _show_next(self) -> None:
        s = self.session
        nxt = s.next_step if s else None
        for role in self.roles:
            self.panel(role).set_next(nxt[1] if nxt and nxt[0] == role else None)
        if nxt and nxt[0] != PRODUCER and len(self.roles) > 2:  # bring the consumer that acts next to the front
            self.query_one("#consumers", TabbedContent).active = f"tab-{nxt[0]}"
        if s is not None and s.failure is None:
            self.query_one(TeachingPanel).show_step(nxt, finished=s.finished)

    def _render_status(self) -> None:
        parts = [v for k, v in self.status.items() if v]
        self.query_one("#status", Static).update(Text(" · ".join(parts) or "space: next step · ?: help", style="bold"))

    def _reset_widgets(self) -> None:
        for role in self.roles:
            self.panel(role).reset()
            self.query_one(f"#{role}-fds", FdTableView).reset()
        self.query_one(WirePanel).reset()
        self.query_one(VerificationPanel).set_result(None)
        self.status.clear()
        self._render_status()

    # -- actions -----------------------------------------------------------------------------------
    def _can_step(self) -> bool:
        if self.session is None or self.busy or not self.session.started:
            return False
        if self.session.stopped:
            self.notify("The plan has ended: ctrl+r restarts.", timeout=3)
            return False
        return True

    def action_step(self) -> None:
        if self._can_step():
            self.busy = True
            self._drive(self.generation, 1)

    def action_run_all(self) -> None:
        if self._can_step():
            self.busy = True
            self._drive(self.generation, None)

    def action_autoplay(self) -> None:
        self.autoplay = not self.autoplay
        if self.autoplay:
            self.autoplay_timer.resume()
        else:
            self.autoplay_timer.pause()
        self.notify(f"autoplay {'on' if self.autoplay else 'off'} (pace {self.pace:g} s)", timeout=2)

    def _set_pace(self, pace: float) -> None:
        self.pace = pace
        self.autoplay_timer.stop()
        self.autoplay_timer = self.set_interval(self.pace, self._tick_autoplay, pause=not self.autoplay)
        self.notify(f"pace {self.pace:g} s", timeout=2)

    def action_faster(self) -> None:
        self._set_pace(max([p for p in PACES if p < self.pace] or [PACES[0]]))

    def action_slower(self) -> None:
        self._set_pace(min([p for p in PACES if p > self.pace] or [PACES[-1]]))

    def action_restart(self) -> None:
        self.generation += 1
        self.busy = False
        self._close_session("restart", self.generation)

    def action_screenshot(self) -> None:
        path = self.save_screenshot(path=str(self.screenshots or os.getcwd()))
        self.notify(f"saved {path}", timeout=3)

    def _auto_screenshot(self) -> None:
        self.shots += 1
        s = self.session
        last = "start"
        if s is not None and s.position > 0:
            role, step = s.plan_step(s.position - 1)
            last = f"{role}-{step}"
        self.save_screenshot(filename=f"{self.shots:02d}-{last}.svg", path=str(self.screenshots))

    def action_fold(self) -> None:
        for role in self.roles:
            self.query_one(f"#{role}-fds", FdTableView).toggle_fold()

    def action_scenario(self) -> None:
        if (self.config.mechanism, self.config.consumers, self.config.direction) != SEED_SHAPE:
            self.notify("Scenarios run with the VMM mechanism, one consumer and the producer writing: "
                        "start vmmtui without --mechanism/--consumers/--direction to use them.", timeout=6)
            return
        backend = self.session.choice.name if self.session and self.session.choice else (
            self.choice.name if self.choice else "memfd")
        self.push_screen(ScenarioScreen(backend, self.config.scenario), self._pick_scenario)

    def _pick_scenario(self, name: str | None) -> None:
        if name is None:
            return
        self.config = dataclasses.replace(self.config, scenario=None if name == NORMAL else name)
        self.action_restart()

    def action_help(self) -> None:
        self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        self.generation += 1
        self._close_session("quit", self.generation)

    def _finish(self, closing: SessionEvents) -> None:
        self.on_session_events(closing)
        if self.transcript:
            self.transcript.close()
        self.exit(0)

    def on_unmount(self) -> None:
        if self.session is not None and not self.session.closed:
            self.session.close()
        if self.transcript:
            self.transcript.close()
