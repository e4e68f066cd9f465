"""The live inspector with a memory: step back to any past step while the session stays where it is,
``--record FILE`` and ``--cast FILE.cast``.

Every event the app shows is kept in a Timeline (the live 4 Hz fd refreshes only when they
changed, as a recording keeps them). ``←``, ``g``, or a click on a done step in a step list or on
a line of the event log shows the panels as they were just after a past step, marked "as of step
N"; meanwhile the session's new events are kept, not drawn, and ``end`` (or ``escape``) draws
everything again: back to live.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual import on
from textual.binding import Binding

from vmmtui.events import Event, FdSnapshot, KcmpVerdict, WorkerExited
from vmmtui.record.timeline import Timeline
from vmmtui.tui import rewind
from vmmtui.tui.app import InspectorApp
from vmmtui.tui.cast import CastWriter
from vmmtui.tui.messages import StepChosen
from vmmtui.tui.screens.steps import StepPicker

if TYPE_CHECKING:
    from vmmtui.record.recording import Recorder

PAST_ACTIONS = ("back", "forward", "live")


class LiveInspector(InspectorApp):
    BINDINGS = [
        *InspectorApp.BINDINGS,
        Binding(
            "left",
            "back",
            "Back",
            tooltip="step back: the panels as they were after the previous step "
            "(the session stays where it is)",
            priority=True,
        ),
        Binding(
            "right",
            "forward",
            "Forward",
            show=False,
            tooltip="looking back: one step forward",
            priority=True,
        ),
        Binding("g", "goto", "Go to", tooltip="show the panels as they were after any past step"),
        Binding(
            "end,escape",
            "live",
            "Live",
            show=False,
            tooltip="back to live after looking back",
            priority=True,
        ),
    ]

    def __init__(self, *args, record: str | None = None, cast: str | None = None, **kw):
        super().__init__(*args, **kw)
        self.timeline = Timeline()
        #: the frame on show while looking back; None: live
        self.as_of: int | None = None
        self.record_path = record
        self.recorder: Recorder | None = None
        self.cast_path = cast
        self.cast: CastWriter | None = None
        self._last_live: dict[tuple[str, str], Event] = {}

    def on_mount(
        self,
    ) -> None:  # Textual calls InspectorApp.on_mount too (handlers run for each class)
        if self.cast_path:
            self.cast = CastWriter(self, self.cast_path)

    # -- every event is kept -----------------------------------------------------------------------
    def show(self, events: list[Event], *, live: bool = False, closing: bool = False) -> None:
        kept = [e for e in events if not live or self._changed(e)]
        self._record(kept)
        self.timeline.extend(kept)
        if self.as_of is None:
            super().show(events, live=live, closing=closing)
        elif self.transcript and not live:
            for e in events:
                self.transcript.write(e)

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
        if not self.record_path or not events:
            return
        if self.recorder is None:
            from vmmtui.record.recording import start_recording

            choice = (
                self.session.choice
                if self.session is not None and self.session.choice
                else self.choice
            )
            self.recorder = start_recording(
                self.record_path,
                self.config,
                choice.name if choice else "",
                choice.reason if choice else "",
            )
        self.recorder.write_all(events)

    def _reset_widgets(self) -> None:
        """ctrl+r: a fresh session, a fresh timeline, and the recording starts again with it."""
        self.timeline = Timeline()
        self.as_of = None
        rewind.mark_panels(self, "")
        if self.recorder is not None:
            self.recorder.close()
            self.recorder = None
        super()._reset_widgets()

    def _show_next(self) -> None:
        if self.as_of is None:
            super()._show_next()

    # -- looking back ------------------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # the keys scroll the log (or move in a picker) when not looking back
        return not (
            action in PAST_ACTIONS
            and (len(self.screen_stack) > 1 or (action != "back" and self.as_of is None))
        )

    def _live_frame(self) -> int:
        """The frame the session is at now."""
        return len(self.timeline) - 1

    def look_back(self, index: int) -> None:
        """Draw the panels as of frame ``index``; the session's own position does not move."""
        live = self._live_frame()
        if index >= live:
            self.action_live()
            return
        index = max(0, index)
        self.autoplay_timer.pause()
        frame = rewind.draw(self, self.timeline, index, self.as_of)
        self.as_of = index
        note = f"as of step {frame.steps}"
        rewind.mark_panels(self, note)
        self.sub_title = (
            f"AS OF {frame.label.upper()} · the session is at step {self.timeline.frames[live].steps}"
            " · end: back to live"
        )

    @on(StepChosen)
    def _chosen(self, message: StepChosen) -> None:
        """A click on a done step or an event-log line: the panels as of that step (the latest: live)."""
        self.look_back(self.timeline.frame_of_step(message.steps))

    def action_back(self) -> None:
        self.look_back((self.as_of if self.as_of is not None else self._live_frame()) - 1)

    def action_forward(self) -> None:
        if self.as_of is not None:
            self.look_back(self.as_of + 1)

    def action_goto(self) -> None:
        frames = self.timeline.frames
        self.push_screen(
            StepPicker(frames, self.as_of if self.as_of is not None else len(frames) - 1),
            lambda i: None if i is None else self.look_back(i),
        )

    def action_live(self) -> None:
        if self.as_of is None:
            return
        self.as_of = None
        rewind.draw(self, self.timeline, self._live_frame(), None)
        rewind.mark_panels(self, "")
        started = self.timeline.started()
        if started is not None:
            self._react(started)  # the subtitle
        if self.session is not None:
            self._show_next()
        if self.autoplay:
            self.autoplay_timer.resume()

    def action_step(self) -> None:
        self.action_live()  # stepping is live: the panels come back to the present first
        super().action_step()

    def action_run_all(self) -> None:
        self.action_live()
        super().action_run_all()

    # -- the end -----------------------------------------------------------------------------------
    def _finish(self, events: list[Event]) -> None:
        self.action_live()
        if self.cast is not None:
            self.cast.close()
        super()._finish(events)
        if self.recorder is not None:
            self.recorder.close()

    def on_unmount(self) -> None:  # and InspectorApp.on_unmount after it
        if self.recorder is not None:
            self.recorder.close()
        if self.cast is not None:
            self.cast.close()
