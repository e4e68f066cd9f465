"""What the live inspector and the replay share: frames of states, one InspectorScreen showing one
of them, going back and forth, autoplay, the cast, screenshots, help, and the signals.

The app is a ``FrameStates`` (the state at every frame, cached) and the frame on show; ``show(i)``
puts that state on the screen. A cast gets one frame per state shown. SIGINT, SIGTERM and SIGHUP
end the app cleanly at any moment: ``stop(signum)`` (the live app closes its session first), exit
status 128 + signal (``interrupts.exit_status``); Ctrl-C, a key to the app, is SIGINT's.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import App
from textual.css.query import NoMatches

from vmmtui.system.interrupts import handled_by, heard
from vmmtui.tui.commands import InspectorCommands
from vmmtui.tui.keys import REPLAY
from vmmtui.tui.messages import Interrupted, StepChosen
from vmmtui.tui.screen import InspectorScreen
from vmmtui.tui.widgets.event_log import EventLog
from vmmtui.tui.widgets.step_bar import BarFrame, StepBar, bar_frames
from vmmtui.view import Display, FrameStates, ScreenState

if TYPE_CHECKING:  # --cast and search (/) alone need them: imported there
    from textual.notifications import SeverityLevel

    from vmmtui.record.notes import Notes
    from vmmtui.tui.cast import CastWriter
    from vmmtui.view.search import LogSearch

PACES = (0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 5.0)
#: actions on priority keys (they would scroll the log or move in a list otherwise)
FRAME_ACTIONS = ("step", "back", "forward", "first", "last", "live")
#: the longest Textual's own shutdown may take before the process ends anyway
SHUTDOWN_S = 2.0
#: the shortest autoplay interval: below about a microsecond Textual's timer never yields (it
#: skips missed ticks in a loop that cannot catch up) and the app stops answering anything
MIN_PACE_S = 0.01


def terminal_gone() -> bool:
    """The controlling terminal hung up (closed window, dropped SSH): its reads and writes fail."""
    try:
        import termios  # POSIX only (a Windows console does not hang up this way)
    except ImportError:
        return False
    try:
        termios.tcgetattr(0 if sys.__stdin__ is None else sys.__stdin__.fileno())
    except termios.error as exc:
        return exc.args[0] == errno.EIO
    except (OSError, ValueError, AttributeError):
        return False
    return False


class Viewer(App[int]):
    CSS_PATH = "vmmtui.tcss"
    TITLE = "vmmtui"
    COMMANDS = App.COMMANDS | {InspectorCommands}
    #: "live" or "replay" (the keys of vmmtui.tui.keys.TABLE)
    MODE = "live"

    def __init__(
        self,
        frames: FrameStates,
        *,
        autoplay: bool = False,
        pace: float = 1.0,
        stable: bool = False,
        cast: str | None = None,
    ):
        super().__init__()
        self.display_mode = frames.display = Display(stable)
        self.frames = frames
        #: the frame on show; None: the latest (live)
        self.shown: int | None = None
        self.autoplay = autoplay
        self.pace = max(pace, MIN_PACE_S)
        self.cast_path = cast
        self.cast: CastWriter | None = None
        #: the signal that ended the app (its exit status is 128 + it)
        self.signalled: int | None = None
        #: exit() was called: nothing more is drawn
        self.ending = False
        #: the event loop took the last signal's message (if it does not, the loop is stuck)
        self.signal_heard = False
        self.watchdog: threading.Timer | None = None
        self._signals = contextlib.ExitStack()
        self._last_painted: ScreenState | None = None
        #: the event log's search (/): the query, and the line of its last match
        self.search: LogSearch | None = None
        self.search_at: int | None = None
        self._bar_cache: list[BarFrame] = []
        #: a trace whose program has ended (the bar says ENDED, not LIVE)
        self.ended = False
        #: the teacher's notes by frame (replay --notes)
        self.teacher_notes: Notes | None = None
        #: where a screenshot goes (None: the current directory)
        self.screenshots: Path | None = None
        #: files that could not be written, one line each with the cause: said again after the
        #: screen closes, and the command then exits 1 (``lost``)
        self.lost_files: list[str] = []
        #: each toast on show: its words, and when it goes (time.monotonic)
        self._toasts: dict[tuple[str, str], float] = {}

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """A toast, once while it shows: a key pressed again (space past the plan's end, a search
        repeated) would stack the same words until they cover the verdict at 80x24."""
        now = time.monotonic()
        key = (message, severity)
        if self._toasts.get(key, 0.0) > now:
            return
        shown = self.NOTIFICATION_TIMEOUT if timeout is None else timeout
        self._toasts = {k: end for k, end in self._toasts.items() if end > now}
        self._toasts[key] = now + shown
        super().notify(message, title=title, severity=severity, timeout=shown, markup=markup)

    # -- the screen --------------------------------------------------------------------------------
    def get_default_screen(self) -> InspectorScreen:
        """The app's one screen (pickers and help are modals above it)."""
        return InspectorScreen(self.state_shown(), self.display_mode, replay=self.MODE == "replay")

    @property
    def inspector(self) -> InspectorScreen:
        return self.screen_stack[0]  # type: ignore[return-value]

    def on_mount(self) -> None:
        self.autoplay_timer = self.set_interval(
            self.pace, self.tick_autoplay, pause=not self.autoplay
        )
        if self.cast_path:  # --cast alone needs its writer
            from vmmtui.tui.cast import CastWriter

            self.cast = CastWriter(self, self.cast_path)
        self._loop = asyncio.get_running_loop()
        if not self.is_headless:  # a terminal's app (a headless one is driven by its caller)
            self._signals.enter_context(handled_by(self._on_signal))
        self.paint()
        self.begin()

    def begin(self) -> None:
        """What the app starts once the signals are its own (the live app: its session)."""

    def on_unmount(self) -> None:
        if self.cast is not None:
            self.cast.close()
        self._signals.close()  # the handlers that were there come back

    def on_inspector_screen_ready(self) -> None:
        self._last_painted = None  # the first state the screen can show: the cast's first frame
        self.paint()

    def state_shown(self) -> ScreenState:
        return self.live_state() if self.shown is None else self.frames.at(self.shown)

    def live_state(self) -> ScreenState:
        """The newest state the screen draws: every event's (a live trace: those folded so far,
        so that no paint folds a backlog the repaints are folding a share at a time)."""
        return self.frames.latest()

    def paint(self, state: ScreenState | None = None) -> None:
        """Put the state of the frame on show on the screen; the cast gets a frame of it."""
        state = state or self.state_shown()
        screen = self.inspector
        screen.state = state
        screen.where = self.where()
        screen.aside = self.aside()
        if screen.ready and not self.ending:  # the header exists (and is not being taken down)
            self.sub_title = self.subtitle(state)
            self._paint_timeline(screen)
        if self.cast is not None and state is not self._last_painted:
            self.call_after_refresh(self.cast.capture)
        self._last_painted = state

    def _paint_timeline(self, screen: InspectorScreen) -> None:
        """The bar of every step: where the frame on show is, and the mode."""
        timeline = self.frames.timeline
        index = self.frames.last if self.shown is None else self.shown
        frame = timeline.frames[index]
        mode = "REPLAY" if self.MODE == "replay" else ("LIVE" if self.shown is None else "AS OF")
        if mode == "LIVE" and self.ended:  # a trace whose program has ended
            mode = "ENDED"
        try:
            bar = screen.query_one(StepBar)
        except NoMatches:  # the app is ending and its widgets are being removed
            return
        if timeline.unit == "call":  # a trace's (vmmtui.record.calls)
            bar.unit = "call"
            bar.show(self._call_bar(timeline), index, frame.steps, timeline.frames[-1].steps, mode)
            return
        frames = bar_frames(timeline, ahead=self.MODE != "replay")
        bar.show(frames, index, frame.steps, len(timeline.plan), mode)

    def _call_bar(self, timeline) -> list[BarFrame]:
        """A trace's bar: a cell per call, coloured by its process, findings marked; extended as
        calls come (kept between paints: a 100,000-call trace is not rebuilt 20 times a second)."""
        from vmmtui.tui.widgets.programs import pid_style  # a trace's widgets: not the demo's

        bar = self._bar_cache
        v = self.live_state().programs
        if bar:  # the last frame cached may have had a finding since (it comes after the call)
            bar.pop()
        for k in range(len(bar), len(timeline.frames)):
            f = timeline.frames[k]
            bar.append(BarFrame(f.label, "", f.failed, pid_style(v, timeline.pids[k])))
        return bar

    @on(StepBar.Jump)
    def _jumped(self, message: StepBar.Jump) -> None:
        """A click or a drag on the timeline: that frame (live: the latest frame, or a step not run
        yet, is live)."""
        self.go(None if message.frame >= self.frames.last else message.frame)

    # -- search in the event log -------------------------------------------------------------------
    def action_search(self) -> None:
        from vmmtui.tui.screens.search import SearchPrompt

        last = self.search.query if self.search else ""
        self.push_screen(SearchPrompt(last), self._searched)

    def _searched(self, query: str | None) -> None:
        if query:
            from vmmtui.view.search import LogSearch  # asked for after the first frame

            self.search, self.search_at = LogSearch(query), None
            self.find()

    def action_step(self) -> None:
        """The next step: the live app runs it, the replay shows it; a trace runs by itself."""

    def action_search_next(self) -> None:
        if self.search is None and self.MODE != "replay":  # live: n is the next step, as before
            self.action_step()
            return
        self.find()

    def action_search_previous(self) -> None:
        self.find(backward=True)

    def find(self, backward: bool = False) -> None:
        """The next match of the search (wrapping around), the panels at the step of its line."""
        if self.search is None:
            self.notify("search the event log with / first", timeout=3)
            return
        latest = self.live_state()
        lines = [line for line in latest.log_lines() if line.era == latest.era]
        first = len(latest.log_lines()) - len(
            lines
        )  # lines of earlier sessions (ctrl+r) are skipped
        from vmmtui.words.log import log_text

        texts = [log_text(line).plain for line in lines]
        # a new search starts at the top of the whole log (N: at its end); n and N go on from the match
        start = self.search_at if self.search_at is not None else (len(texts) if backward else -1)
        found = self.search.next(texts, start, backward)
        if found is None:
            self.search_at = None
            self.notify(f"“{self.search.query}” is nowhere in the event log", timeout=4)
            return
        self.search_at = found
        steps = lines[found].steps
        if steps is not None:
            frame = self.frames.timeline.frame_of_step(steps)
            self.go(None if frame >= self.frames.last else frame)
        matches = self.search.matches(texts)
        where = "" if steps is None else f", step {steps}"
        rank, total = matches.index(found) + 1, len(matches)
        self.inspector.query_one(EventLog).show_found(first + found)
        self.notify(f"/{self.search.query}: match {rank} of {total}{where}", timeout=3)

    def where(self) -> str:
        """What the status line says first (REPLAY · step N/M, as of a past step)."""
        return ""

    def aside(self) -> str:
        """What the status line says last: what the frames leave out (a trace's calls)."""
        timeline = self.frames.timeline
        unframed = timeline.unframed  # a trace's calls that are no frame
        if not unframed:
            return ""
        from vmmtui.words.status import calls_not_drawn

        return calls_not_drawn(unframed)

    def subtitle(self, state: ScreenState) -> str:
        return state.subtitle

    # -- frames ------------------------------------------------------------------------------------
    @on(StepChosen)
    def _chosen(self, message: StepChosen) -> None:
        """A click on a done step or an event-log line: the panels as of that step."""
        self.go(self.frames.timeline.frame_of_step(message.steps))

    # -- going back and forth: written once for the live app, the replay and a live trace ------
    @property
    def here(self) -> int:
        """The frame on show (live: the latest)."""
        return self.frames.last if self.shown is None else self.shown

    def go(self, index: int | None) -> None:
        """Show frame ``index``. While frames still come (the live app, a live trace), None or the
        latest frame is live and an earlier one is marked "as of"; a replay has no live: None is
        its last frame and an index past either end stops there."""
        if self.MODE == REPLAY:
            self.shown = self.frames.last if index is None else max(0, min(index, self.frames.last))
        elif index is None or index >= self.frames.last:
            if self.shown is None:  # live already: nothing changes
                return
            self.shown = None
            self.inspector.mark = ""
        else:
            self.shown = max(0, index)
            unit = self.frames.timeline.unit
            self.inspector.mark = f"as of {unit} {self.frames.frames[self.shown].steps}"
        self.arrived()
        self.paint()

    def arrived(self) -> None:
        """What a mode does on reaching a frame, before it is painted (the live app pauses or
        resumes autoplay, the replay puts the frame's note up)."""

    async def action_back(self) -> None:  # App.action_back is a coroutine: same kind here
        self.go(self.here - 1)

    def action_forward(self) -> None:
        if self.shown is not None:
            self.go(self.shown + 1)

    def action_first(self) -> None:
        self.go(0)

    def action_last(self) -> None:
        self.go(self.frames.last)

    def action_live(self) -> None:
        self.search = None  # live, n is the next step again
        self.go(None)

    def action_chapter(self, direction: int) -> None:
        """``]``/``[``: the next/previous frame with a teacher's note (replay --notes), else, in a
        trace, the next/previous call with a finding (marked ✗ on the timeline)."""
        notes = self.teacher_notes
        marks = sorted(notes.by_frame) if notes else []
        what = "note"
        if not marks and self.frames.timeline.unit == "call":
            marks, what = [k for k, f in enumerate(self.frames.frames) if f.failed], "finding"
            if not marks:
                self.notify(
                    "no finding to go to" + (" (and no --notes)" if self.MODE == REPLAY else ""),
                    timeout=3,
                )
                return
        ahead = [k for k in marks if (k - self.here) * direction > 0]
        if not ahead:
            self.notify(
                f"no further {what} that way" if marks else "no notes: --notes NOTES.md", timeout=3
            )
            return
        self.go(min(ahead) if direction > 0 else max(ahead))

    def action_goto(self) -> None:
        from vmmtui.tui.screens.steps import StepPicker

        self.push_screen(
            StepPicker(self.frames.frames, self.here), lambda i: None if i is None else self.go(i)
        )

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The frame keys (priority bindings) belong to a picker or the help while one is open;
        forward and live mean nothing while live (the keys scroll the log instead)."""
        if action in ("forward", "live") and self.shown is None:
            return False
        if action not in ("quit", "interrupt") and self._too_small():
            return False  # nothing on screen to act on: only q (and Ctrl-C) mean anything
        return not (action in FRAME_ACTIONS and self.screen.is_modal)

    def _too_small(self) -> bool:
        """The terminal is under 80x24: the screen says so and shows nothing else."""
        try:
            return self.inspector.has_class("-too-small")
        except IndexError:  # no screen yet
            return False

    # -- autoplay ----------------------------------------------------------------------------------
    def tick_autoplay(self) -> None:
        raise NotImplementedError

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
            self.pace, self.tick_autoplay, pause=not self.autoplay
        )
        self.notify(f"pace {self.pace:g} s", timeout=2)

    def action_faster(self) -> None:
        self._set_pace(max([p for p in PACES if p < self.pace] or [PACES[0]]))

    def action_slower(self) -> None:
        self._set_pace(min([p for p in PACES if p > self.pace] or [PACES[-1]]))

    # -- the rest of the keys ----------------------------------------------------------------------
    def action_fold(self) -> None:
        self.inspector.show_all_fds = not self.inspector.show_all_fds

    def action_sort(self) -> None:
        """``o`` (a trace): the focused process's memory by time, size or who pins it."""
        panel = self.inspector.focused_program()
        if panel is None:
            self.notify("no process to sort (a trace's processes have panels)", timeout=3)
            return
        self.notify(f"{panel.pid}: memory sorted by {panel.cycle_sort()}", timeout=2)

    def action_more(self) -> None:
        """``m`` (a trace): open or close the list of the processes folded out of the panels."""
        from vmmtui.tui.widgets.more import MoreProcesses

        more = next(iter(self.inspector.query(MoreProcesses)), None)
        if more is None or not more.display:
            self.notify("every process has its panel: none is folded", timeout=3)
            return
        more.toggle()

    def action_help(self) -> None:
        # Markdown and its parser load only when help is asked for
        from vmmtui.tui.screens.help import HelpScreen

        self.push_screen(HelpScreen(trace=self.inspector.state.programs is not None))

    def lost(self) -> list[str]:
        """Every file this app could not write (the cast's last frame included): for the command
        to say after the screen, and exit 1 (``interrupts.exit_status``'s ``own``)."""
        cast = [self.cast.error] if self.cast is not None and self.cast.error else []
        return [*self.lost_files, *(c for c in cast if c not in self.lost_files)]

    def write_failed(self, message: str) -> None:
        """A file could not be written (screenshot, transcript): a toast and a line in the log."""
        if message not in self.lost_files:
            self.lost_files.append(message)
        self.note(Text(message, style="bold red"))
        self.notify(message, severity="error", timeout=8)

    def note(self, text: Text) -> None:
        """A line in the log that no event carries."""
        raise NotImplementedError

    def action_screenshot(self, filename: str | None = None, path: str | None = None) -> None:
        from vmmtui.stream.names import screenshot_name
        from vmmtui.system.lifeline import served_shots

        served, shots = served_shots()
        if served and shots is None:  # a page of `vmmtui serve`: nothing lands where it runs
            self.notify(
                "screenshots are off in this page (the server's --shots DIR turns them on)",
                timeout=5,
            )
            return
        where = shots or str(self.screenshots or os.getcwd())
        try:
            path = self.save_screenshot(
                filename=filename or screenshot_name(self.title), path=where
            )
        except OSError as exc:
            self.write_failed(
                f"screenshot not saved in {where}: {exc.strerror} (fix: start vmmtui in a "
                "writable directory, or pass --screenshots DIR)"
            )
            return
        self.notify(f"saved {path}", timeout=3)

    def save_frame(self, directory: Path, name: str) -> bool:
        """``name``.svg in ``directory``; False (and said once) when it cannot be written."""
        try:
            directory.mkdir(parents=True, exist_ok=True)
            from vmmtui.stream.names import file_name

            self.save_screenshot(filename=f"{file_name(name)}.svg", path=str(directory))
        except OSError as exc:
            self.write_failed(
                f"--screenshots {directory}: {exc.strerror}; no more screenshots this run"
            )
            return False
        return True

    # -- the end -----------------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame) -> None:
        """In the main thread, between any two bytecodes: hand the signal to the event loop. While
        the app is being taken down, Textual may wait on a terminal that is gone: then end now."""
        heard()  # the terminal's watcher sends no SIGHUP of its own after this one
        if self.ending:
            if self.signalled is None:
                self.signalled = signum
            if terminal_gone():
                self.last_words()
                os._exit(128 + (self.signalled or signum))
            return
        # into the app's message queue, from the loop (not from inside whatever the signal cut)
        with contextlib.suppress(RuntimeError):  # the loop is closing: the app ends anyway
            if self._loop is not None:
                self._loop.call_soon_threadsafe(self.post_message, Interrupted(signum))
        # a loop that does not take the message in time is stuck: the signal still ends the process
        self.signal_heard = False
        unheard = threading.Timer(SHUTDOWN_S, self._unheard, (signum,))
        unheard.daemon = True
        unheard.start()

    def _unheard(self, signum: int) -> None:
        """(A timer's thread) The loop never took the signal's message: end the process now."""
        if self.signal_heard or self.ending:
            return
        self.last_words()
        with contextlib.suppress(Exception):  # give the terminal back (keys, screen) if it is there
            if self._driver is not None:
                self._driver.stop_application_mode()
        with contextlib.suppress(OSError):
            name = signal.Signals(signum).name
            os.write(
                2,
                f"vmmtui: interrupted by {name}; the screen did not answer, so it ended at once; {self.stopped()}\n".encode(),
            )
        os._exit(128 + signum)

    def stopped(self) -> str:
        """What an interruption stopped, for its one line (the live app: its workers and directory)."""
        return "nothing else was running"

    def on_interrupted(self, message: Interrupted) -> None:
        self.signal_heard = True
        self.stop(message.signum)

    def last_words(self) -> None:
        """Files complete before an exit that skips Textual's own shutdown (the terminal is gone)."""
        if self.cast is not None:
            self.cast.close()

    def stop(self, signum: int) -> None:
        """A signal: end now, cleanly (the live app closes its session first)."""
        if self.signalled is None:
            self.signalled = signum
        self.finish(128 + signum)

    def finish(self, code: int) -> None:
        """Exit with ``code``, the cast complete."""
        self.ending = True
        if self.cast is not None:
            self.cast.close()
        if not self.is_headless:
            if terminal_gone():  # no one to draw for, and Textual's shutdown would write to it
                self.last_words()
                os._exit(code)
            if self.signalled is not None:
                # after a signal the process ends however the shutdown goes: a write stuck on a
                # terminal that is going away cannot keep it alive
                self.watchdog = threading.Timer(SHUTDOWN_S, os._exit, (code,))
                self.watchdog.daemon = True
                self.watchdog.start()
        self.exit(code, return_code=code)

    async def action_quit(self) -> None:
        self.finish(0)

    def action_interrupt(self) -> None:
        """Ctrl-C: the terminal gives it to the app as a key, not as SIGINT; it ends the app as
        SIGINT does (exit status 130), as in every other command."""
        self.stop(signal.SIGINT)
