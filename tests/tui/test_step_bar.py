"""The timeline bar on its own: a frame per step coloured by role, the failed step marked, where one
is; a click or a drag asks for a frame (Pilot)."""

import pytest
from textual.app import App, ComposeResult

from vmmtui.record import Timeline, gallery
from vmmtui.tui.widgets.step_bar import StepBar, bar_frames
from vmmtui.words import narration as say


class BarApp(App):
    def __init__(self, timeline: Timeline):
        super().__init__()
        self.timeline = timeline
        self.frames = bar_frames(timeline)
        self.jumps: list[int] = []

    def compose(self) -> ComposeResult:
        yield StepBar()

    def on_mount(self) -> None:
        self.go(0)

    def go(self, index: int) -> None:
        f = self.timeline.frames[index]
        self.query_one(StepBar).show(self.frames, index, f.steps, len(self.timeline.plan))

    def on_step_bar_jump(self, message: StepBar.Jump) -> None:
        self.jumps.append(message.frame)
        self.go(message.frame)


def bar_text(app) -> str:
    return app.query_one(StepBar).render().plain


@pytest.mark.asyncio
async def test_the_bar_shows_replay_where_one_is_and_every_frame_by_role():
    timeline = Timeline(gallery.resolve("h100-vmm-1mib").events)
    app = BarApp(timeline)
    async with app.run_test(size=(80, 3)) as pilot:
        bar = app.query_one(StepBar)
        assert bar_text(app).startswith(" REPLAY  step 0/23 ▕")
        assert len(bar_text(app)) == 80
        app.go(timeline.frame_of_step(14))
        await pilot.pause()
        text = bar_text(app)
        assert " step 14/23 " in text
        cells = text.split("▕")[1].rstrip("▏")
        columns = bar.column_frames(bar.bar_width())
        here = [x for x, frames in enumerate(columns) if 14 in frames]
        assert {cells[x] for x in here} == {"█"}
        assert set(cells[: here[0]]) == {"▆"} and set(cells[here[-1] + 1 :]) == {"▂"}
        # the colours: each role's own (narration's role styles, as in the event log)
        styles = {str(s.style) for s in bar.render().spans}
        assert {say.role_style("producer"), say.role_style("consumer-1")} <= styles
        app.go(len(timeline) - 1)
        await pilot.pause()
        assert bar_text(app).split("▕")[0].endswith(" step 23/23 · the end ")


@pytest.mark.asyncio
async def test_a_failed_step_is_marked_and_a_click_or_drag_jumps():
    timeline = Timeline(gallery.resolve("h100-scenario-consumer-dies").events)
    failed = next(k for k, f in enumerate(timeline.frames) if f.label.endswith("(failed)"))
    app = BarApp(timeline)
    async with app.run_test(size=(100, 3)) as pilot:
        bar = app.query_one(StepBar)
        assert "✗" in bar_text(app)
        start = bar.label().cell_len + 1
        columns = bar.column_frames(bar.bar_width())
        x_of = {frames[0]: start + x for x, frames in reversed(list(enumerate(columns)))}
        await pilot.click(StepBar, offset=(x_of[5], 0))
        assert app.jumps[-1] == 5 and " step 5/" in bar_text(app)
        # a drag from frame 5 to the failed frame passes through the frames between
        await pilot.mouse_down(StepBar, offset=(x_of[5], 0))
        for k in range(6, failed + 1):
            await pilot.hover(StepBar, offset=(x_of[k], 0))
        await pilot.mouse_up(StepBar, offset=(x_of[failed], 0))
        assert app.jumps[-1] == failed and len(app.jumps) >= failed - 5
        assert bar.index == failed
        # a click on the label is no jump
        before = len(app.jumps)
        await pilot.click(StepBar, offset=(2, 0))
        assert len(app.jumps) == before


def test_a_growing_bar_marks_each_column_with_a_failed_frame():
    """A trace's bar grows a call at a time and its last frame may be marked failed after it came
    (the finding follows the call): every span of frames is marked exactly where one of them
    failed, as the bar grows, its last frame changes, and another list of frames replaces it."""
    import random

    from vmmtui.tui.widgets.step_bar import BarFrame

    rng = random.Random(5)
    bar = StepBar("LIVE")
    frames: list[BarFrame] = []
    bar.frames = frames
    for n in range(1, 120):
        frames.append(BarFrame(f"call {n}", "", rng.random() < 0.05))
        if rng.random() < 0.2:  # the last call's finding came
            frames[-1] = BarFrame(frames[-1].label, "", True)
        for _ in range(20):
            a = rng.randrange(n)
            span = range(a, rng.randrange(a, n) + 1)
            assert bar._any_failed(span) == any(frames[k].failed for k in span), (n, span)
    bar.frames = [BarFrame("other", "", False), BarFrame("other", "", True)]
    assert not bar._any_failed(range(0, 1)) and bar._any_failed(range(0, 2))
