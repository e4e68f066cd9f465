"""The inspector: a Textual app that steps every worker and shows every step, fd, address and check.

The session lives in thread workers that only post messages (its events, the 4 Hz fd reads, the
step it is running); the app owns every widget. Every event the app is given is kept in a
Timeline, folded into states (``vmmtui.view``) and the InspectorScreen shows the latest, or, after
``←``/``g``/a click, a past frame while the session stays where it is (``end``: back to live).
``--record FILE`` writes the kept events, ``--cast FILE`` a frame for every state shown.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import work
from textual.message import Message

from vmmtui.backends import Choice
from vmmtui.plan.config import SEED_SHAPE, SessionConfig
from vmmtui.record.timeline import Frames, Timeline
from vmmtui.stream.events import (
    Event,
    FdSnapshot,
    KcmpVerdict,
    ScenarioOutcome,
    SessionClosed,
    SessionFailed,
    StepDone,
    WorkerExited,
)
from vmmtui.tui.keys import LIVE, bindings
from vmmtui.tui.messages import (
    FdRefresh,
    SessionError,
    SessionEvents,
    StartFailed,
    StepRunning,
)
from vmmtui.tui.viewer import Viewer
from vmmtui.view import FrameStates, ScreenState
from vmmtui.words import narration as say
from vmmtui.words.troubleshooting import with_words

if TYPE_CHECKING:
    from vmmtui.record.recording import Recorder
    from vmmtui.render.transcript import Transcript
    from vmmtui.session import Session
    from vmmtui.tui.widgets.process_panel import ProcessPanel

REFRESH_S = 0.25
#: how long a signal or a quit waits for the session's own close before stopping it by force
CLOSE_GRACE_S = 1.5


def _post(app: InspectorApp, message: Message) -> None:
    """From a thread: the app may be gone (a signal, a closed terminal); then there is no one to tell."""
    with contextlib.suppress(RuntimeError):  # the event loop is closed
        app.post_message(message)


class InspectorApp(Viewer):
    BINDINGS = bindings(LIVE)
    MODE = LIVE

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
        record: str | None = None,
        cast: str | None = None,
    ):
        """``start_session=False``: no workers; events arrive through ``show()`` (tests, recordings).

        ``probing``: the backend choice still being made (the capability probe runs while the first
        frame is drawn); the session thread waits for it when ``choice`` is None.
        """
        super().__init__(
            FrameStates(Timeline(), self._blank(config)),
            autoplay=autoplay,
            pace=pace,
            stable=stable,
            cast=cast,
        )
        self.config = config
        self.choice = choice
        self.probing = probing
        #: why the first session was refused (bad input found by the probe): the CLI prints it, exit 2
        self.refused: str | None = None
        #: why the last session could not start (shown in the panels and the status line)
        self.start_error: str | None = None
        self.ever_started = False
        self.screenshots = Path(screenshots) if screenshots else None
        self.transcript: Transcript | None = None
        if transcript:  # --transcript alone needs the writer (and its words for each step)
            from vmmtui.render.transcript import Transcript

            self.transcript = Transcript(transcript)
        self.record_path = record
        self.recorder: Recorder | None = None
        self.start_session = start_session
        self.session: Session | None = None
        self.generation = 0
        #: a step runs (in the session thread); ``epoch`` counts the steps launched
        self.busy = False
        self.epoch = 0
        self.refreshing = False
        #: space presses waiting for the running step (shown on the status line)
        self.queued = 0
        self.shots = 0
        self.quitting = False
        #: (role, step) the session runs now, before its events arrive
        self.running: tuple[str, str] | None = None
        self.notes: list[Text] = []
        self._overlaid: tuple[tuple, ScreenState] | None = None

    @staticmethod
    def _blank(config: SessionConfig, after: ScreenState | None = None) -> ScreenState:
        return ScreenState.blank(
            config.consumers, config.scenario, config.mechanism, config.direction, after=after
        )

    # -- what tests and scripts read -----------------------------------------------------------------
    @property
    def timeline(self) -> Frames:
        return self.frames.timeline

    @property
    def as_of(self) -> int | None:
        return self.shown

    @property
    def roles(self) -> list[str]:
        return list(self.frames.latest().roles)

    def panel(self, role: str) -> ProcessPanel:
        return self.inspector.panel(role)

    async def rendered(self) -> None:
        """Wait until the screen shows what was given so far (it paints as events arrive)."""
        await self.inspector.wait_for_refresh()

    # -- the state on show -------------------------------------------------------------------------
    def state_shown(self) -> ScreenState:
        state = super().state_shown()
        if self.shown is not None:
            return state
        key = (id(state), self.running, len(self.notes), self.start_error)
        if self._overlaid is not None and self._overlaid[0] == key:
            return self._overlaid[1]
        if self.running is not None:
            state = state.running(*self.running)
        for text in self.notes:
            state = state.noted(text)
        if self.start_error is not None:
            state = state.could_not_start(self.start_error)
        self._overlaid = (key, state)
        return state

    def where(self) -> str:
        if self.shown is None:
            return ""
        from vmmtui.words.status import session_where  # not on the first frame's path

        return session_where(self.frames.frames[self.shown].steps)

    def subtitle(self, state: ScreenState) -> str:
        if self.shown is None:
            return state.subtitle
        frame, live = self.frames.frames[self.shown], self.frames.frames[self.frames.last]
        return (
            f"AS OF {frame.label.upper()} · the session is at step {live.steps} · end: back to live"
        )

    def note(self, text: Text) -> None:
        self.notes.append(text)
        self.paint()

    # -- lifecycle ---------------------------------------------------------------------------------
    def begin(self) -> None:  # Viewer.on_mount, once the signals are the app's
        if self.start_session:
            self.set_interval(REFRESH_S, self._tick_refresh)
            # after the first frame: the session's imports (psutil...) in a thread would hold the
            # interpreter's lock while Textual lays the screen out
            self.call_after_refresh(self._start_session, self.generation)

    # -- events in ---------------------------------------------------------------------------------
    def show(self, events: list[Event], *, live: bool = False, closing: bool = False) -> None:
        """Keep ``events`` (a live read only when it changed something), write them to the
        transcript and the recording, and paint the latest state unless a past one is on show."""
        kept = [e for e in events if not live or self._changed(e)]
        if not kept:
            return
        self._record(kept)
        self.frames.extend(kept)
        for e in kept:
            self._react(e)
            if self.transcript and not live:
                self.transcript.write(e)
                if self.transcript.error:
                    self.write_failed(self.transcript.error)
                    self.transcript = None
        if self.shown is None:
            self.paint()

    def _changed(self, e: Event) -> bool:
        """A live read worth keeping: an exit, or an fd table or kcmp verdict unlike the last kept."""
        if isinstance(e, WorkerExited):
            return True
        key = (
            ("fds", e.role)
            if isinstance(e, FdSnapshot)
            else (("kcmp", e.consumer) if isinstance(e, KcmpVerdict) else None)
        )
        if key is None:
            return False
        from vmmtui.record.recording import Recorder  # not before the first frame

        last = next((x for x in reversed(self.timeline.events) if Recorder._key(x) == key), None)
        return last != e

    def _record(self, events: list[Event]) -> None:
        if not self.record_path:
            return
        if self.recorder is None:
            from vmmtui.record.recording import start_recording

            choice = (
                self.session.choice
                if self.session is not None and self.session.choice
                else self.choice
            )
            from vmmtui.words.findings import json_line

            self.recorder = start_recording(
                self.record_path,
                self.config,
                choice.name if choice else "",
                choice.reason if choice else "",
                json_line,
            )
        self.recorder.write_all(events)
        if self.recorder.failed and self.recorder.failed not in self.lost_files:
            self.write_failed(self.recorder.failed)  # said now, and again after the screen

    def _react(self, e: Event) -> None:
        """What the app itself does on an event: toasts and autoplay."""
        match e:
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

    def on_session_events(self, message: SessionEvents) -> None:
        if message.started:
            self.ever_started = True
        if message.generation == self.generation and message.last:
            self.busy = False
            self.running = None
        self.show(message.events, closing=message.closing)
        if message.then == "quit":
            self._finish_quit()
            return
        if message.then == "restart":
            self._restart_now()
            return
        done = [e for e in message.events if isinstance(e, StepDone) and e.index >= 0]
        if self.screenshots and done:
            # named from the event, not from the session's position, which autoplay may have moved on
            step = done[-1]
            self.call_after_refresh(
                self._auto_screenshot, f"{step.index + 1:02d}-{step.role}-{step.step}"
            )
        session = self.session
        if message.generation == self.generation and self.queued and not self.busy:
            self.queued -= 1
            self.inspector.queued = self.queued
            if session is not None and session.started and not session.stopped:
                self.action_step()
            else:
                self.queued = self.inspector.queued = 0

    def on_step_running(self, message: StepRunning) -> None:
        if message.generation == self.generation and self.busy:
            self.running = (message.role, message.step)
            if self.shown is None:
                self.paint()

    def on_session_error(self, message: SessionError) -> None:
        self.write_failed(message.text)

    def on_fd_refresh(self, message: FdRefresh) -> None:
        self.refreshing = False
        # a read that overlapped a step belongs to no frame: the step's own read comes with its events
        if message.generation == self.generation and message.epoch == self.epoch and not self.busy:
            self.show(message.events, live=True)

    def on_start_failed(self, message: StartFailed) -> None:
        if message.generation != self.generation:
            return
        if message.refused:  # bad input on the command line: one line and exit 2, like run
            self.refused = message.text
            self.call_after_refresh(self.finish, 2)  # after the header has taken its title
            return
        self.start_error = self.display_mode.text(message.text)  # --stable: no pids or addresses
        self.notify(message.text, severity="error", timeout=10)
        self.paint()

    def _auto_screenshot(self, name: str) -> None:
        """Save ``name``.svg (``NN-role-step``: the plan step whose events the screen now holds)."""
        self.shots += 1
        if self.screenshots is not None and not self.save_frame(self.screenshots, name):
            self.screenshots = None

    # -- session work in threads: they only post messages --------------------------------------------
    def _start_session(self, generation: int) -> None:
        """A Session made here (the app holds it from the start: a quit meanwhile closes it), started
        in a thread."""
        from vmmtui.session import Session  # only an app that drives workers needs it

        self.session = Session(self.config, self.choice)
        self._start(self.session, generation)

    @work(thread=True, group="session", exit_on_error=False)
    def _start(self, session: Session, generation: int) -> None:
        from vmmtui.session import ConfigError, SessionError

        if session.choice is None and self.probing is not None:
            try:
                session.choice = self.probing.result()
            except Exception as exc:  # noqa: BLE001 - the probe broke: shown like any start failure
                _post(self, StartFailed(f"the capability probe failed: {exc}", generation))
                return
        failed: StartFailed | None = None
        try:
            events = session.start()
        except ConfigError as exc:
            events = session.close()
            failed = StartFailed(str(exc), generation, refused=not self.ever_started)
        except SessionError as exc:
            events = session.close()
            failed = StartFailed(with_words(str(exc), exc.failure), generation)
        except Exception as exc:  # noqa: BLE001 - any reason at all: shown, never a traceback
            events = session.close()
            failed = StartFailed(f"{type(exc).__name__}: {exc}", generation)
        _post(self, SessionEvents(events, generation, started=failed is None))
        if failed is not None:
            _post(self, failed)

    @work(thread=True, group="session", exit_on_error=False)
    def _drive(self, session: Session, generation: int, steps: int | None) -> None:
        done = 0
        events: list[Event] = []
        try:
            while not session.stopped and (steps is None or done < steps):
                nxt = session.next_step
                if nxt:
                    _post(self, StepRunning(nxt[0], nxt[1], generation))
                batch = session.step()
                done += 1
                if steps is None and not session.stopped:
                    _post(self, SessionEvents(batch, generation, last=False))
                else:
                    events = batch
        except Exception as exc:  # noqa: BLE001 - shown on screen, never a traceback
            _post(self, SessionError(f"the step broke: {type(exc).__name__}: {exc}", generation))
        _post(self, SessionEvents(events, generation))

    @work(thread=True, group="refresh", exit_on_error=False)
    def _refresh(self, session: Session, generation: int, epoch: int) -> None:
        events: list[Event] = []
        try:
            if not session.closed and session.workers:
                events = session.snapshot(count=False) + session.poll_exits()
        except Exception:  # noqa: BLE001 - a read racing the close: the next one tells
            events = []
        _post(self, FdRefresh(events, generation, epoch))

    @work(thread=True, group="close", exclusive=False, exit_on_error=False)
    def _close_session(self, session: Session | None, generation: int, then: str) -> None:
        events: list[Event] = []
        try:
            events = session.close() if session is not None else []
        except Exception as exc:  # noqa: BLE001 - shown on screen, never a traceback
            _post(self, SessionError(f"the close broke: {type(exc).__name__}: {exc}", generation))
        _post(self, SessionEvents(events, generation, closing=True, then=then))

    def _tick_refresh(self) -> None:
        # stable mode (snapshots, recorded lectures) shows the tables read after each step only,
        # so the picture does not depend on when a live read happened to land
        if self.display_mode.stable or self.refreshing or self.busy or self.quitting:
            return
        session = self.session
        if session is not None and not session.closed:
            self.refreshing = True
            self._refresh(session, self.generation, self.epoch)

    # -- actions -----------------------------------------------------------------------------------
    def _can_step(self) -> bool:
        session = self.session
        if session is None or not session.started or self.quitting:
            return False
        if session.stopped:
            self.notify("The plan has ended: ctrl+r restarts.", timeout=3)
            return False
        return True

    def action_step(self) -> None:
        if self.shown is not None:
            self.go(None)  # stepping is live: the panels come back to the present first
        session = self.session
        starting = self.start_session and (session is None or not session.started)
        waits = (self.busy or starting) and not self.quitting and self.start_error is None
        if waits and (session is None or not session.stopped):
            # one step at a time: the press waits its turn, counted on the status line
            self.queued += 1
            self.inspector.queued = self.queued
            return
        if self._can_step():
            self._launch(1)

    def action_run_all(self) -> None:
        if self.shown is not None:
            self.go(None)
        if self.busy:  # refused, and said so
            self.notify("A step is running: press r again once it is done.", timeout=2)
            return
        if self._can_step():
            self._launch(None)

    def _launch(self, steps: int | None) -> None:
        self.busy = True
        self.epoch += 1
        self._drive(self.session, self.generation, steps)

    def tick_autoplay(self) -> None:
        session = self.session
        if session is None or self.busy or self.shown is not None:
            return
        if session.stopped:
            self.autoplay_timer.pause()
            return
        self.action_step()

    def action_restart(self) -> None:
        self.generation += 1
        self.busy, self.queued, self.running = False, 0, None
        self.inspector.queued = 0
        self._close_session(self.session, self.generation, "restart")

    def _restart_now(self) -> None:
        """ctrl+r: a fresh session, fresh frames (the log stays: it is the history across restarts)."""
        last = self.frames.latest()
        for text in self.notes:
            last = last.noted(text)
        self.notes, self.start_error, self.shown = [], None, None
        self.frames = FrameStates(
            Timeline(), self._blank(self.config, after=last), self.display_mode
        )
        self.inspector.mark = ""
        if self.recorder is not None:
            self.recorder.close()
            if self.recorder.failed and self.recorder.failed not in self.lost_files:
                self.lost_files.append(self.recorder.failed)
            self.recorder = None
        self.paint()
        if self.start_session:
            self._start_session(self.generation)

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

    # -- looking back ------------------------------------------------------------------------------
    def arrived(self) -> None:
        """Looking back pauses autoplay; back to live, it goes on."""
        if self.shown is not None:
            self.autoplay_timer.pause()
        elif self.autoplay:
            self.autoplay_timer.resume()

    # -- the end -----------------------------------------------------------------------------------
    async def action_quit(self) -> None:
        self._quit(0)

    def stop(self, signum: int) -> None:
        if self.signalled is None:
            self.signalled = signum
        self._quit(128 + signum)

    def _quit(self, code: int) -> None:
        """Close the session (in its thread), then exit; by force if it takes too long."""
        if self.quitting:
            if self.signalled is not None:  # a second signal: no more waiting
                self._hard_stop()
                self.finish(128 + self.signalled)
            return
        self.quitting = True
        self.exit_code = code
        self.generation += 1
        self.autoplay_timer.pause()
        self._close_session(self.session, self.generation, "quit")
        self.set_timer(CLOSE_GRACE_S, self._close_overdue)

    def _close_overdue(self) -> None:
        self._hard_stop()
        self._finish_quit()

    def stopped(self) -> str:
        session = self.session
        if session is None:
            return "no session had started: nothing was left running"
        ending = session.closed_event
        if ending is not None and not ending.clean:
            return "left behind: " + "; ".join(ending.leftovers)
        return "the workers were stopped and the session directory removed"

    def _hard_stop(self) -> None:
        """The session's close is stuck behind a step: stop its workers and remove its directory."""
        session = self.session
        if session is None or session.closed:
            return
        for w in list(session.workers.values()):
            if w.proc.poll() is None:
                w.proc.kill()
                w.proc.wait()
        if session.dir:
            shutil.rmtree(session.dir, ignore_errors=True)

    def last_words(self) -> None:
        super().last_words()
        if self.transcript:
            self.transcript.close()
            if self.transcript.error and self.transcript.error not in self.lost_files:
                self.lost_files.append(self.transcript.error)
        if self.recorder is not None:
            self.recorder.close()
            if self.recorder.failed and self.recorder.failed not in self.lost_files:
                self.lost_files.append(self.recorder.failed)

    def _finish_quit(self) -> None:
        if not self.is_running or self.ending:
            return
        self.last_words()
        code = self.exit_code
        if code == 0 and self.start_error:
            code = 1
        self.finish(code)

    def on_unmount(self) -> None:
        session = self.session
        if session is not None and not session.closed:
            session.close()  # the app ends without its quit (a test leaving, say)
        if self.transcript:
            self.transcript.close()
            if self.transcript.error and self.transcript.error not in self.lost_files:
                self.lost_files.append(self.transcript.error)
        if self.recorder is not None:
            self.recorder.close()
            if self.recorder.failed and self.recorder.failed not in self.lost_files:
                self.lost_files.append(self.recorder.failed)
