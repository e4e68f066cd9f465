"""The inspector: a Textual app that steps both workers and shows every step, fd, address and check.

Session work (steps, start, close) and the 4 Hz fd refresh run in thread workers and come back as
messages. The app hands each event to every widget that renders events (``SessionEvent``, one
queue per widget, in the session's order); each widget handles the events it owns. The app itself
only keeps its title, its toasts, autoplay and the transcript.
"""

from __future__ import annotations

import asyncio
import dataclasses
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

from textual import work
from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widget import Widget
from textual.widgets import Footer, Header, TabbedContent, TabPane

from vmmtui import narration as say
from vmmtui.backends import Choice
from vmmtui.config import SEED_SHAPE, SessionConfig
from vmmtui.events import (
    Event,
    ScenarioOutcome,
    SessionClosed,
    SessionFailed,
    SessionStarted,
    StepDone,
)
from vmmtui.steps import CONSUMER, PRODUCER, consumer_names
from vmmtui.transcript import Transcript
from vmmtui.tui.commands import InspectorCommands
from vmmtui.tui.keys import KEYS
from vmmtui.tui.messages import Drain, EventView, FdRefresh, Reset, SessionEvent, SessionEvents
from vmmtui.tui.outputs import Outputs
from vmmtui.tui.widgets.display import Display
from vmmtui.tui.widgets.event_log import EventLog
from vmmtui.tui.widgets.fd_table import FdTableView
from vmmtui.tui.widgets.process_panel import ProcessPanel
from vmmtui.tui.widgets.status import StatusLine
from vmmtui.tui.widgets.teaching import TeachingPanel
from vmmtui.tui.widgets.wire import VerificationPanel, WirePanel

if TYPE_CHECKING:
    from vmmtui.session import Session

REFRESH_S = 0.25
PACES = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0)
#: how long the screenshot waits for the widgets to render a step's events
DRAIN_S = 5.0


class InspectorApp(Outputs, App[int]):
    CSS_PATH = "vmmtui.tcss"
    TITLE = "vmmtui"
    COMMANDS = App.COMMANDS | {InspectorCommands}
    BINDINGS = KEYS

    def __init__(
        self,
        config: SessionConfig,
        choice: Choice | None = None,
        *,
        autoplay: bool = False,
        pace: float = 1.0,
        screenshots: str | None = None,
        transcript: str | None = None,
        stable: bool = False,
        start_session: bool = True,
        probing: Future | None = None,
    ):
        """``start_session=False``: no workers; events arrive through ``show()`` (tests, recordings).

        ``probing``: the backend choice still being made (the capability probe runs while the first
        frame is drawn); the session thread waits for it when ``choice`` is None.
        """
        super().__init__()
        self.config = config
        self.choice = choice
        self.probing = probing
        #: why the first session was refused (bad input found by the probe): the CLI prints it, exit 2
        self.refused: str | None = None
        #: why the last session could not start (shown in the panels and the status line)
        self.start_error: str | None = None
        self.ever_started = False
        self.display_mode = Display(stable)
        self.autoplay = autoplay
        self.pace = pace
        self.screenshots = Path(screenshots) if screenshots else None
        self.transcript = Transcript(transcript) if transcript else None
        self.start_session = start_session
        self.session: Session | None = None
        self.generation = 0
        self.busy = False
        self.refreshing = False
        self.shots = 0
        self._views: list[Widget] = []

    @property
    def views(self) -> list[Widget]:
        """The widgets that render events, in the main screen (a modal on top must not swallow events)."""
        if not self._views:
            self._views = [w for w in self.screen_stack[0].query("*") if isinstance(w, EventView)]
        return self._views

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
        yield StatusLine(id="status")
        yield TeachingPanel(id="teaching")
        yield EventLog(self.display_mode, id="log")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(StatusLine).scenario = self.config.scenario
        self._compact(self.size.width, self.size.height)
        self.autoplay_timer = self.set_interval(
            self.pace, self._tick_autoplay, pause=not self.autoplay
        )
        if self.start_session:
            self.set_interval(REFRESH_S, self._tick_refresh)
            # after the first frame: the session's imports (psutil...) in a thread would hold the
            # interpreter's lock while Textual lays the screen out
            self.call_after_refresh(self._start_session, self.generation)

    def on_resize(self, event) -> None:
        self._compact(event.size.width, event.size.height)

    def _compact(self, width: int, height: int) -> None:
        self.screen.set_class(width < 120 or height < 36, "-compact")

    def panel(self, role: str) -> ProcessPanel:
        return self.query_one(f"#{role}", ProcessPanel)

    # -- events to the widgets ---------------------------------------------------------------------
    def show(self, events: list[Event], *, live: bool = False, closing: bool = False) -> None:
        """Send each event to every widget that renders events, in order; the transcript gets it too."""
        for e in events:
            for view in self.views:
                view.post_message(SessionEvent(e, live, closing))
            self._react(e)
            if self.transcript and not live:
                self.transcript.write(e)
                if self.transcript.error:
                    self.write_failed(self.transcript.error)
                    self.transcript = None

    async def rendered(self) -> None:
        """Wait until every widget has handled the events sent so far (each queue is in order)."""
        waits = []
        for view in self.views:
            done = asyncio.Event()
            if view.post_message(Drain(done)):
                waits.append(asyncio.ensure_future(done.wait()))
        if waits:
            await asyncio.wait(waits, timeout=DRAIN_S)
            for w in waits:
                w.cancel()

    def _react(self, e: Event) -> None:
        """What the app itself does on an event: its subtitle, toasts and autoplay."""
        match e:
            case SessionStarted():
                self.sub_title = e.reason
                if (e.mechanism, len(e.consumers), e.direction) != SEED_SHAPE:
                    self.sub_title += (
                        f" · {e.mechanism} · {len(e.consumers)} consumer(s) · {e.direction}"
                    )
                if self.config.scenario:
                    self.sub_title += f" · scenario {self.config.scenario}"
            case SessionFailed():
                self.autoplay_timer.pause()
            case ScenarioOutcome():
                self.notify(
                    say.outcome(e).plain,
                    severity="information" if e.as_expected else "error",
                    timeout=6,
                )
            case SessionClosed(clean=False):
                self.notify(say.closed(e).plain, severity="error")

    # -- session work in threads -------------------------------------------------------------------
    @work(thread=True, group="session")
    def _start_session(self, generation: int) -> None:
        from vmmtui.session import (  # only an app that drives workers needs it
            ConfigError,
            Session,
            SessionError,
        )

        if self.choice is None and self.probing is not None:
            try:
                self.choice = self.probing.result()
            except Exception as exc:  # the probe itself broke: say so, as for any start failure
                self.call_from_thread(self._start_failed, f"the capability probe failed: {exc}")
                return
        session = Session(self.config, self.choice)
        self.session = session
        try:
            events = session.start()
        except ConfigError as exc:
            events = session.close()
            if (
                not self.ever_started
            ):  # bad input on the command line: one line and exit 2, like run
                self.refused = str(exc)
                self.call_from_thread(self.exit, 2, 2)
                return
            self.call_from_thread(self._start_failed, str(exc))
        except SessionError as exc:
            events = session.close()
            self.call_from_thread(self._start_failed, str(exc))
        except Exception as exc:  # noqa: BLE001 - any reason at all: shown, never a traceback
            events = session.close()
            self.call_from_thread(self._start_failed, f"{type(exc).__name__}: {exc}")
        else:
            self.ever_started = True
            self.start_error = None
        self.post_message(SessionEvents(events, generation))

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
                self.post_message(
                    FdRefresh(session.snapshot(count=False) + session.poll_exits(), generation)
                )
        finally:
            self.refreshing = False

    @work(thread=True, group="session", exclusive=False)
    def _close_session(self, then: str, generation: int) -> None:
        session = self.session
        events = session.close() if session is not None else []
        if then == "quit":
            # handled before exiting, so the transcript and log get the close events
            self.call_from_thread(self._finish, events)
            return
        self.post_message(
            SessionEvents(events, generation, closing=True, restart=then == "restart")
        )

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

    # -- messages from the threads -----------------------------------------------------------------
    async def on_session_events(self, message: SessionEvents) -> None:
        self.show(message.events, closing=message.closing)
        if message.restart:
            self._reset_widgets()
            if self.start_session:
                self._start_session(self.generation)
            return
        if message.generation == self.generation:
            self._show_next()
        done = [e for e in message.events if isinstance(e, StepDone) and e.index >= 0]
        if self.screenshots and done:
            await self.rendered()  # the picture holds this step's events
            # named from the event, not from the session's position, which autoplay may have moved on
            step = done[-1]
            self.call_after_refresh(
                self._auto_screenshot, f"{step.index + 1:02d}-{step.role}-{step.step}"
            )

    def on_fd_refresh(self, message: FdRefresh) -> None:
        if message.generation == self.generation:
            self.show(message.events, live=True)

    def _show_next(self) -> None:
        s = self.session
        nxt = s.next_step if s else None
        for role in self.roles:
            self.panel(role).set_next(nxt[1] if nxt and nxt[0] == role else None)
        if (
            nxt and nxt[0] != PRODUCER and len(self.roles) > 2
        ):  # bring the consumer that acts next to the front
            self.query_one("#consumers", TabbedContent).active = f"tab-{nxt[0]}"
        if s is not None and s.failure is None:
            self.query_one(TeachingPanel).show_step(nxt, finished=s.finished)

    def _reset_widgets(self) -> None:
        """Queued behind the last session's events, so that nothing of it lands after the reset."""
        self.query_one(StatusLine).scenario = self.config.scenario
        for view in self.views:
            view.post_message(Reset())

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
        self.notify(
            f"autoplay {'on' if self.autoplay else 'off'} (pace {self.pace:g} s)", timeout=2
        )

    def _set_pace(self, pace: float) -> None:
        self.pace = pace
        self.autoplay_timer.stop()
        self.autoplay_timer = self.set_interval(
            self.pace, self._tick_autoplay, pause=not self.autoplay
        )
        self.notify(f"pace {self.pace:g} s", timeout=2)

    def action_faster(self) -> None:
        self._set_pace(max([p for p in PACES if p < self.pace] or [PACES[0]]))

    def action_slower(self) -> None:
        self._set_pace(min([p for p in PACES if p > self.pace] or [PACES[-1]]))

    def action_restart(self) -> None:
        self.generation += 1
        self.busy = False
        self._close_session("restart", self.generation)

    def action_fold(self) -> None:
        for view in self.query(FdTableView):
            view.toggle_fold()

    def action_scenario(self) -> None:
        if self.config.shape != SEED_SHAPE:
            self.notify(
                "Scenarios run with the VMM mechanism, one consumer and the producer writing: "
                "start vmmtui without --mechanism/--consumers/--direction to use them.",
                timeout=6,
            )
            return
        backend = (
            self.session.choice.name
            if self.session and self.session.choice
            else (self.choice.name if self.choice else "memfd")
        )
        # screens are imported when first opened: not on the first frame's path
        from vmmtui.tui.screens.scenarios import ScenarioScreen

        self.push_screen(ScenarioScreen(backend, self.config.scenario), self._pick_scenario)

    def _pick_scenario(self, name: str | None) -> None:
        if name is None:
            return
        from vmmtui.tui.screens.scenarios import NORMAL

        self.config = dataclasses.replace(self.config, scenario=None if name == NORMAL else name)
        self.action_restart()

    def action_help(self) -> None:
        # Markdown and its parser load only when help is asked for
        from vmmtui.tui.screens.help import HelpScreen

        self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        self.generation += 1
        self._close_session("quit", self.generation)

    def _finish(self, events: list[Event]) -> None:
        self.show(events, closing=True)
        if self.transcript:
            self.transcript.close()
        code = 1 if self.start_error else 0
        self.exit(code, return_code=code)

    def on_unmount(self) -> None:
        if self.session is not None and not self.session.closed:
            self.session.close()
        if self.transcript:
            self.transcript.close()
