"""The timeline: one line with "REPLAY", where one is ("step 14/23") and a bar of every frame of
the session, coloured by the role that acted (narration's role colours), the failed step marked
✗, the frame on show marked; a click or a drag on the bar asks for that frame (``StepBar.Jump``).

Self-contained: it is fed the frames (``show(frames, index)``) and knows nothing of how the app
goes to a frame. Where there are more frames than columns, a column stands for several frames
(the failed one and the one on show still win their column).
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widget import Widget

from vmmtui.record.timeline import Frame, Frames
from vmmtui.words import narration as say

#: what a frame looks like in the bar: done (at or before the one on show) and still to come
DONE, AHEAD, HERE = "▆", "▂", "█"
NEUTRAL = "grey50"


@dataclass(frozen=True)
class BarFrame:
    """One frame as the bar shows it."""

    label: str
    #: the role that acted in it ("" for the start and the close)
    role: str
    failed: bool = False
    #: its colour where no role gives one (a trace's frame: the colour of its process)
    style: str = ""


def bar_frames(timeline: Frames, ahead: bool = False) -> list[BarFrame]:
    """The bar's frames of a timeline: each step's role from the plan, its failure from the frame.
    ``ahead`` (a live session): the plan's steps not run yet follow, so the bar is the whole plan."""
    out = []
    for f in timeline.frames:
        role = timeline.plan[f.steps - 1][0] if f.steps and not f.closing else ""
        out.append(BarFrame(f.label, role, _failed_here(f)))
    last = timeline.frames[-1] if timeline.frames else None
    if ahead and last is not None and not (last.failed or last.closing):
        for k in range(last.steps, len(timeline.plan)):
            role, step = timeline.plan[k]
            out.append(BarFrame(f"step {k + 1}: {role} · {step}", role))
    return out


def _failed_here(f: Frame) -> bool:
    return f.label.endswith("(failed)")


class StepBar(Widget):
    """``REPLAY step 14/23 ▕▆▆▆▆█▂▂▂▂▏``: ``show()`` feeds it; ``Jump`` asks for a frame."""

    DEFAULT_CSS = """
    StepBar { height: 1; width: 1fr; }
    """

    class Jump(Message):
        """A click or a drag on the bar: show frame ``frame``."""

        def __init__(self, frame: int):
            super().__init__()
            self.frame = frame

    def __init__(self, mode: str = "REPLAY", **kw):
        super().__init__(**kw)
        #: "REPLAY", or "LIVE" / "AS OF" in the live inspector
        self.mode = mode
        self.frames: list[BarFrame] = []
        self.index = 0
        #: the plan's length (the "23" of "step 14/23")
        self.steps = 0
        #: how many plan steps frame ``index`` had run
        self.done = 0
        #: what a frame is: a demo's "step", a trace's "call"
        self.unit = "step"
        self._count = 0
        self._dragging = False
        #: failed frames before each frame (``[k]``: among frames[:k]), of every frame but the
        #: last (frames only grow and only the last one still changes): a column's mark is read
        #: in constant time, not by looking at every frame it stands for at every repaint
        self._failed_before: list[int] = [0]
        self._failed_of: list[BarFrame] | None = None

    def show(
        self,
        frames: list[BarFrame],
        index: int,
        done: int,
        steps: int,
        mode: str | None = None,
    ) -> None:
        """Frame ``index`` of ``frames`` is on show, ``done`` of the plan's ``steps`` steps run."""
        key = (len(frames), index, done, steps, mode or self.mode)
        if key == (self._count, self.index, self.done, self.steps, self.mode) and (
            frames is self.frames or frames == self.frames
        ):
            return
        self.frames, self.index, self.done, self.steps = frames, index, done, steps
        self._count = len(frames)
        self.mode = mode or self.mode
        self.refresh()

    # -- drawing -----------------------------------------------------------------------------------
    def label(self) -> Text:
        last = self.frames and self.index == len(self.frames) - 1
        end = " · the end" if last and self.mode == "REPLAY" else ""
        return Text.assemble(
            (f" {self.mode} ", "bold black on yellow"),
            (f" {self.unit} {self.done}/{self.steps}{end} ", "bold"),
        )

    def bar_width(self) -> int:
        return max(0, self.size.width - self.label().cell_len - 2)

    def column_frames(self, width: int) -> list[range]:
        """The frames each of the bar's ``width`` columns stands for: with fewer frames than
        columns a frame spans several columns, with more a column stands for several frames."""
        n = len(self.frames)
        if n == 0 or width <= 0:
            return []
        return [
            range(x * n // width, max(x * n // width + 1, (x + 1) * n // width))
            for x in range(width)
        ]

    def render(self) -> Text:
        text = self.label()
        width = self.bar_width()
        text.append("▕", NEUTRAL)
        for frames in self.column_frames(width):
            text.append(*self._cell(frames))
        text.append("▏", NEUTRAL)
        return text

    def _any_failed(self, frames: range) -> bool:
        """Whether any of ``frames`` is marked failed."""
        every = self.frames
        last = len(every) - 1
        before = self._failed_before
        if every is not self._failed_of or len(before) > last + 1:
            self._failed_of, before = every, [0]  # another list of frames: counted again
            self._failed_before = before
        for k in range(len(before) - 1, last):
            before.append(before[-1] + every[k].failed)
        stop = min(frames.stop, last)
        if frames.start < stop and before[stop] - before[frames.start]:
            return True
        return frames.stop > last >= frames.start and every[last].failed

    def _cell(self, frames: range) -> tuple[str, str]:
        failed = self._any_failed(frames)  # findings marked, whatever the zoom
        if self.index in frames:
            return ("✗", "bold white on red") if failed else (HERE, "bold white")
        if failed:
            return "✗", "bold red"
        k = frames[0]
        style = self.frames[k].style or say.role_style(self.frames[k].role) or NEUTRAL
        return (DONE, style) if k <= self.index else (AHEAD, style)

    # -- the mouse ---------------------------------------------------------------------------------
    def frame_at(self, x: int) -> int | None:
        """The frame under column ``x`` of the widget (None: the label)."""
        start = self.label().cell_len + 1
        columns = self.column_frames(self.bar_width())
        if not columns or x < start - 1:
            return None
        col = min(max(x - start, 0), len(columns) - 1)
        return columns[col][0]

    def _jump(self, x: int) -> None:
        frame = self.frame_at(x)
        if frame is not None and frame != self.index:
            self.post_message(self.Jump(frame))

    def on_mouse_down(self, event: events.MouseDown) -> None:
        if self.frame_at(event.x) is None:
            return
        self._dragging = True
        self.capture_mouse()
        self._jump(event.x)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._dragging:
            self._jump(event.x)

    def on_mouse_up(self, event: events.MouseUp) -> None:
        if self._dragging:
            self._dragging = False
            self.release_mouse()
