"""``vmmtui replay``: the inspector on a recording. No workers, no driver: the same panels, drawn
from the recorded events, frame by frame, forward and back."""

from __future__ import annotations

from pathlib import Path

from textual import on
from textual.binding import Binding

from vmmtui.config import SessionConfig
from vmmtui.events import SessionStarted
from vmmtui.record import Recording, Timeline
from vmmtui.record.notes import Notes
from vmmtui.transcript import Transcript
from vmmtui.tui import rewind
from vmmtui.tui.app import InspectorApp
from vmmtui.tui.cast import CastWriter
from vmmtui.tui.messages import StepChosen
from vmmtui.tui.screens.steps import StepPicker
from vmmtui.tui.widgets.status import StatusLine
from vmmtui.tui.widgets.teaching import TeachingPanel


def config_of(recording: Recording) -> SessionConfig:
    """The options the recording was made with; from its SessionStarted when the header lacks them."""
    config = recording.header.config()
    if config is not None:
        return config
    started = next((e for e in recording.events if isinstance(e, SessionStarted)), None)
    if started is None:
        return SessionConfig()
    return SessionConfig(
        backend=started.backend,
        size=started.requested_size,
        mechanism=started.mechanism,
        consumers=len(started.consumers),
        direction=started.direction,
    )


def write_with_notes(transcript: Transcript, timeline: Timeline, notes: Notes | None) -> None:
    """The recording's events, each teacher's note after the events of the frame it is on."""
    ends = {} if notes is None else {timeline.frames[n.frame].end: n for n in notes.chapters()}
    if 0 in ends:
        transcript.note(ends[0].label, ends[0].text)
    for i, e in enumerate(timeline.events, 1):
        transcript.write(e)
        if i in ends:
            transcript.note(ends[i].label, ends[i].text)


#: actions on priority keys (the event log would scroll with them otherwise)
FRAME_ACTIONS = ("step", "back", "first", "last")


class ReplayApp(InspectorApp):
    TITLE = "vmmtui replay"
    BINDINGS = [
        Binding(
            "space,right", "step", "Next", tooltip="the next step of the recording", priority=True
        ),
        Binding(
            "left", "back", "Back", tooltip="one step back: the panels as they were", priority=True
        ),
        Binding("home", "first", "First", tooltip="back to the start", priority=True),
        Binding("end", "last", "Last", tooltip="the end of the recording", priority=True),
        Binding("r", "last", "Last", show=False, priority=True),
        Binding("ctrl+r", "first", "First", show=False, priority=True),
        Binding(
            "c",
            "scenario",
            "Scenario",
            show=False,
            tooltip="a replay shows the scenario it recorded",
        ),
        Binding(
            "g", "goto", "Go to", tooltip="go to any step: type its number or pick it from the list"
        ),
        Binding(
            "a", "autoplay", "Autoplay", tooltip="autoplay on/off: the steps play by themselves"
        ),
        Binding(
            "plus",
            "faster",
            "Faster",
            show=False,
            tooltip="autoplay: a shorter pause between steps",
        ),
        Binding(
            "minus",
            "slower",
            "Slower",
            show=False,
            tooltip="autoplay: a longer pause between steps",
        ),
        Binding("s", "screenshot", "Screenshot", tooltip="save an SVG screenshot"),
        Binding(
            "f",
            "fold",
            "All fds",
            tooltip="fold/unfold the fds that are not ours (/dev/nvidia*, stdio, pipes)",
        ),
        Binding("question_mark", "help", "Help", tooltip="keys and what the panels show"),
        Binding("q", "quit", "Quit", tooltip="quit"),
    ]

    def __init__(
        self,
        recording: Recording,
        *,
        autoplay: bool = False,
        pace: float = 1.0,
        screenshots: str | None = None,
        transcript: str | None = None,
        stable: bool = False,
        cast: str | None = None,
        start_at: int = 0,
        notes: Notes | None = None,
    ):
        super().__init__(
            config_of(recording),
            None,
            autoplay=autoplay,
            pace=pace,
            stable=stable,
            start_session=False,
        )
        self.recording = recording
        self.timeline = Timeline(recording.events)
        self.shown: int | None = None
        #: the teacher's notes (--notes), by frame
        self.teacher_notes = notes
        self.start_at = start_at
        self.shot_dir = Path(screenshots) if screenshots else None
        self.shot_taken: set[int] = set()
        self.transcript_path = transcript
        self.cast_path = cast
        self.cast: CastWriter | None = None
        h = recording.header
        self.title = f"vmmtui REPLAY · {h.where} · {h.when}"

    def on_mount(
        self,
    ) -> None:  # Textual calls InspectorApp.on_mount too (handlers run for each class)
        if self.shot_dir:
            self.shot_dir.mkdir(parents=True, exist_ok=True)
        if self.transcript_path:  # the transcript of a replay is the recording's, whole
            transcript = Transcript(self.transcript_path)
            write_with_notes(transcript, self.timeline, self.teacher_notes)
            transcript.close()
        if self.recording.note:
            self.notify(f"older recording: {self.recording.note}", timeout=10)
        if self.recording.cut:
            self.notify(self.recording.cut, severity="warning", timeout=10)
        self.goto(self.timeline.frame_of_step(self.start_at) if self.start_at else 0)
        if self.cast_path:
            self.cast = CastWriter(self, self.cast_path)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """The frame keys belong to a picker or the help while one is open (they are priority bindings)."""
        return not (action in FRAME_ACTIONS and len(self.screen_stack) > 1)

    # -- frames ------------------------------------------------------------------------------------
    @property
    def frame(self) -> int:
        return self.shown or 0

    def goto(self, index: int) -> None:
        index = max(0, min(index, len(self.timeline) - 1))
        frame = rewind.draw(self, self.timeline, index, self.shown)
        self.shown = index
        note = self.teacher_notes.at(index) if self.teacher_notes else None
        self.query_one(TeachingPanel).set_note(None if note is None else (note.label, note.shown))
        self.query_one(StatusLine).scenario = self.config.scenario
        last = self.timeline.frames[-1].steps
        self.sub_title = f"as of {frame.label} (of {last})" + (
            ""
            if index < len(self.timeline) - 1
            else (" · cut short here" if self.recording.cut else " · the end")
        )
        if self.shot_dir and index not in self.shot_taken:
            self.shot_taken.add(index)
            self.call_after_refresh(self._frame_screenshot, index)

    def _frame_screenshot(self, index: int) -> None:
        f = self.timeline.frames[index]
        name = (
            "start"
            if f.steps == 0
            else (
                "closed"
                if f.closing
                else f.label.split(": ", 1)[1].replace(" · ", "-").replace(" (failed)", "-failed")
            )
        )
        self.save_screenshot(filename=f"{index:02d}-{name}.svg", path=str(self.shot_dir))

    def action_step(self) -> None:
        if self.frame >= len(self.timeline) - 1:
            self.notify("The recording ends here: home goes back to the start.", timeout=3)
            return
        self.goto(self.frame + 1)

    def action_back(self) -> None:
        self.goto(self.frame - 1)

    def action_first(self) -> None:
        self.goto(0)

    def action_last(self) -> None:
        self.goto(len(self.timeline) - 1)

    action_run_all = action_last
    action_restart = action_first

    def action_goto(self) -> None:
        self.push_screen(StepPicker(self.timeline.frames, self.frame), self._picked)

    @on(StepChosen)
    def _chosen(self, message: StepChosen) -> None:
        """A click on a done step or an event-log line: the recording as of that step."""
        self.goto(self.timeline.frame_of_step(message.steps))

    def _picked(self, index: int | None) -> None:
        if index is not None:
            self.goto(index)

    def _tick_autoplay(self) -> None:
        if self.frame >= len(self.timeline) - 1:
            self.autoplay_timer.pause()
            return
        self.goto(self.frame + 1)

    def action_scenario(self) -> None:
        self.notify(
            "A replay shows what was recorded: record a scenario with `vmmtui run --scenario NAME "
            "--record FILE`.",
            timeout=5,
        )

    async def action_quit(self) -> None:
        if self.cast is not None:
            self.cast.close()
        self.exit(0)
