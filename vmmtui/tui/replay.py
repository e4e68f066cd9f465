"""``vmmtui replay``: the inspector on a recording. No workers, no driver: the same screen, showing
the state of each frame of the recorded events, forward and back."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text

from vmmtui.pipeline.replay import trace_timeline
from vmmtui.plan.config import SessionConfig
from vmmtui.record import Recording, Timeline
from vmmtui.record.calls import CallTimeline, is_trace
from vmmtui.record.timeline import Frames
from vmmtui.stream.events import SessionStarted
from vmmtui.tui.keys import REPLAY, bindings
from vmmtui.tui.viewer import Viewer
from vmmtui.view import FrameStates, ScreenState

if TYPE_CHECKING:  # --notes and --transcript alone need them: imported there
    from vmmtui.record.notes import Notes
    from vmmtui.render.transcript import Transcript


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


def is_trace_recording(recording: Recording) -> bool:
    """A ``vmmtui trace --record`` recording (or a polling's): its frames are calls."""
    return recording.header.backend == "trace" or is_trace(recording.events)


def write_with_notes(transcript: Transcript, timeline: Frames, notes: Notes | None) -> None:
    """The recording's events, each teacher's note after the events of the frame it is on."""
    ends = {} if notes is None else {timeline.frames[n.frame].end: n for n in notes.chapters()}
    if 0 in ends:
        transcript.note(ends[0].label, ends[0].text)
    for i, e in enumerate(timeline.events, 1):
        transcript.write(e)
        if i in ends:
            transcript.note(ends[i].label, ends[i].text)


class ReplayApp(Viewer):
    TITLE = "vmmtui replay"
    BINDINGS = bindings(REPLAY)
    MODE = REPLAY

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
        folded: CallTimeline | None = None,
    ):
        """``folded``: a trace recording's one fold (``trace_timeline``), where the caller has
        made it already (``vmmtui replay`` makes it once for the screen, --step and --notes)."""
        config = config_of(recording)
        if is_trace_recording(recording):  # a trace's calls are its frames
            timeline = folded or trace_timeline(recording.events)
            frames = FrameStates(timeline, ScreenState.for_programs())
        else:
            blank = ScreenState.blank(
                config.consumers, config.scenario, config.mechanism, config.direction
            )
            frames = FrameStates(Timeline(recording.events), blank)
        super().__init__(
            frames,
            autoplay=autoplay,
            pace=pace,
            stable=stable,
            cast=cast,
        )
        self.config = config
        self.recording = recording
        #: the teacher's notes (--notes), by frame
        self.teacher_notes = notes
        self.shown = 0
        self.start_at = start_at
        self.shot_dir = Path(screenshots) if screenshots else None
        self.shot_taken: set[int] = set()
        self.transcript_path = transcript
        self.notes: list[Text] = []
        h = recording.header
        self.title = f"vmmtui REPLAY · {h.where} · {h.when}"
        if isinstance(self.timeline, CallTimeline) and h.title:
            self.title = f"vmmtui REPLAY · {h.title} · {h.where} · {h.when}"

    @property
    def timeline(self) -> Frames:
        return self.frames.timeline

    @property
    def unit(self) -> str:
        """What a frame is: a "step" of a session, a "call" of a trace."""
        return self.timeline.unit

    @property
    def frame(self) -> int:
        return self.shown or 0

    @property
    def roles(self) -> list[str]:
        return list(self.frames.at(0).roles)

    def panel(self, role: str):
        return self.inspector.panel(role)

    def on_mount(self) -> None:  # after Viewer.on_mount (handlers run for each class)
        if self.transcript_path:  # the transcript of a replay is the recording's, whole
            from vmmtui.render.transcript import Transcript

            transcript = Transcript(self.transcript_path)
            write_with_notes(transcript, self.timeline, self.teacher_notes)
            transcript.close()
            if transcript.error:
                self.write_failed(transcript.error)
        if self.recording.note:
            self.notify(f"older recording: {self.recording.note}", timeout=10)
        if self.recording.cut:
            self.notify(self.recording.cut, severity="warning", timeout=10)
        self.go(self.timeline.frame_of_step(self.start_at) if self.start_at else 0)

    def state_shown(self) -> ScreenState:
        state = super().state_shown()
        for text in self.notes:
            state = state.noted(text)
        return state

    def note(self, text: Text) -> None:
        self.notes.append(text)
        self.paint()

    def stopped(self) -> str:
        return "the replay closed (it runs no workers and has no session directory)"

    @property
    def total(self) -> int:
        """The plan's length: the one step total of every place (a failed run stops short of
        it: "step 12/17", not "12/12" beside the timeline's "12/17"); a trace: its calls."""
        return len(self.timeline.plan) or self.frames.frames[-1].steps

    def where(self) -> str:
        from vmmtui.words.status import replay_where

        at = self.frames.frames[self.frame].steps
        return replay_where(self.unit, at, self.total)

    def subtitle(self, state: ScreenState) -> str:
        frame = self.frames.frames[self.frame]
        return f"as of {frame.label} (of {self.total})" + (
            ""
            if self.frame < self.frames.last
            else (" · cut short here" if self.recording.cut else " · the end")
        )

    # -- frames ------------------------------------------------------------------------------------
    def arrived(self) -> None:
        note = self.teacher_notes.at(self.frame) if self.teacher_notes else None
        self.inspector.note = None if note is None else (note.label, note.shown)
        if self.shot_dir and self.frame not in self.shot_taken:
            self.shot_taken.add(self.frame)
            self.call_after_refresh(self._frame_screenshot, self.frame)

    goto = Viewer.go  # the flipbook (--html) draws every frame through it

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
        name = "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-")
        if self.shot_dir is not None and not self.save_frame(self.shot_dir, f"{index:02d}-{name}"):
            self.shot_dir = None

    def action_step(self) -> None:
        if self.frame >= self.frames.last:
            self.notify("The recording ends here: home goes back to the start.", timeout=3)
            return
        self.go(self.frame + 1)

    def tick_autoplay(self) -> None:
        if self.frame >= self.frames.last:
            self.autoplay_timer.pause()
            return
        self.go(self.frame + 1)
