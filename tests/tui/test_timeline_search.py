"""The timeline and the search in the replay and in the live inspector's step back (Pilot)."""

import pytest
from driving import make_app, step_to, wait_for

from vmmtui.record import gallery
from vmmtui.tui.replay import ReplayApp
from vmmtui.tui.widgets.event_log import EventLog
from vmmtui.tui.widgets.step_bar import StepBar
from vmmtui.words.log import log_text

#: the slow tier: left out of the default run (README), run by .ci/run after it
pytestmark = pytest.mark.slow


def bar_text(app) -> str:
    return app.inspector.query_one(StepBar).render().plain


def x_of(bar: StepBar, frame: int) -> int:
    start = bar.label().cell_len + 1
    return start + next(x for x, f in enumerate(bar.column_frames(bar.bar_width())) if frame in f)


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(80, 24), (160, 48)])
async def test_replay_and_the_step_count_are_always_on_screen(size):
    app = ReplayApp(gallery.resolve("h100-vmm-1mib"))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        bar = app.inspector.query_one(StepBar)
        assert bar.region.height == 1 and bar.region.bottom <= size[1] - 1  # above the footer
        assert bar_text(app).startswith(" REPLAY  step 0/23 ")
        for _ in range(14):
            await pilot.press("right")
        assert " step 14/23 " in bar_text(app) and bar.index == app.frame
        await pilot.press("end")
        assert " step 23/23 · the end " in bar_text(app)


@pytest.mark.asyncio
async def test_a_click_and_a_drag_on_the_timeline_jump_the_replay():
    app = ReplayApp(gallery.resolve("h100-scenario-consumer-dies"))
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        bar = app.inspector.query_one(StepBar)
        assert "✗" in bar_text(app)  # the failed step is marked before one gets there
        failed = next(k for k, f in enumerate(app.timeline.frames) if f.label.endswith("(failed)"))
        await pilot.click(StepBar, offset=(x_of(bar, 5), 0))
        await pilot.pause()
        assert app.frame == 5 and " step 5/" in bar_text(app)
        await pilot.mouse_down(StepBar, offset=(x_of(bar, 6), 0))
        for k in range(7, failed + 1):
            await pilot.hover(StepBar, offset=(x_of(bar, k), 0))
        await pilot.mouse_up(StepBar, offset=(x_of(bar, failed), 0))
        await pilot.pause()
        assert app.frame == failed
        assert "FAILED" in str(app.inspector.query_one("#teaching").border_title)


@pytest.mark.asyncio
async def test_search_jumps_the_panels_to_the_step_of_the_match():
    app = ReplayApp(gallery.resolve("h100-vmm-1mib"))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        # every line of the whole log that names cuMemMap, and the step each belongs to
        lines = app.frames.latest().log_lines()
        hits = [k for k, line in enumerate(lines) if "cumemmap" in log_text(line).plain.lower()]
        steps = [lines[k].steps for k in hits]
        assert len(hits) >= 2 and steps[0] < steps[-1]
        await pilot.press("slash", *"cumemmap", "enter")
        await pilot.pause()
        log = app.inspector.query_one(EventLog)
        assert (app.search_at, app.timeline.frames[app.frame].steps) == (hits[0], steps[0])
        assert log.found == hits[0] and "cuMemMap" in log_text(log.entries[log.found]).plain
        await pilot.press("n")
        await pilot.pause()
        assert (app.search_at, app.timeline.frames[app.frame].steps) == (hits[1], steps[1])
        assert " step " + str(steps[1]) + "/23" in bar_text(app)
        await pilot.press("N")
        await pilot.pause()
        assert (app.search_at, app.timeline.frames[app.frame].steps) == (hits[0], steps[0])
        await pilot.press("N")  # wraps around to the last match
        await pilot.pause()
        assert app.search_at == hits[-1]
        # a capital letter makes it exact: nothing found says so and the panels stay
        shown = app.frame
        await pilot.press("slash", "ctrl+a", "ctrl+k", *"CUMEMMAP", "enter")
        await pilot.pause()
        assert app.frame == shown and app.search_at is None


@pytest.mark.asyncio
async def test_live_step_back_by_the_timeline_and_search_then_end_is_live(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        await step_to(pilot, app, 9)
        bar = app.inspector.query_one(StepBar)
        assert bar_text(app).startswith(" LIVE  step 9/23 ▕") and "the end" not in bar_text(app)
        # live, the bar is the whole plan: the steps not run yet are drawn low, after the frame on show
        assert len(bar.frames) == 24 and bar.index == app.frames.last
        cells = bar_text(app).split("▕")[1]
        assert cells.rstrip("▏").endswith("▂▂▂")
        await pilot.click(StepBar, offset=(x_of(bar, 20), 0))  # a step not run yet: live
        await pilot.pause()
        assert app.shown is None and app.session.position == 9
        await pilot.click(StepBar, offset=(x_of(bar, 3), 0))
        await pilot.pause()
        assert app.shown == 3 and bar_text(app).startswith(" AS OF  step 3/23 ")
        assert app.session.position == 9  # the workers stay where they are
        await pilot.press("end")
        await pilot.pause()
        assert app.shown is None and bar_text(app).startswith(" LIVE ")
        await pilot.press("slash", *"memfd_create", "enter")
        await pilot.pause()
        assert app.shown is not None and app.frames.frames[app.shown].steps == 3
        assert bar_text(app).startswith(" AS OF  step 3/23 ")
        await pilot.press("escape")
        await pilot.pause()
        assert app.shown is None and app.session.position == 9 and app.search is None
        await pilot.press("n")  # with no search, n is the next step again
        await wait_for(pilot, lambda: app.session.position == 10 and not app.busy)
