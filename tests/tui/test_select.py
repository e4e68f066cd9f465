"""Selecting a past step with the mouse: a done step in a step list, or a line of the event log, shows the
panels as of that step; the live session stays where it is, and ``end`` returns to live."""

import pytest
from driving import MEMFD, wait_for

from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import build_plan, role_steps
from vmmtui.record import gallery
from vmmtui.tui.app import InspectorApp as LiveInspector
from vmmtui.tui.replay import ReplayApp
from vmmtui.tui.widgets.event_log import EventLog

#: the slow tier: left out of the default run (README), run by .ci/run after it
pytestmark = pytest.mark.slow

PLAN = build_plan()


async def click_step(pilot, app, role: str, step: str) -> None:
    """Click the row of ``step`` in ``role``'s step list."""
    row = role_steps(role, app.panel(role).plan).index(step)
    await pilot.click(f"#{role}-steps", offset=(4, row))
    await pilot.pause()


async def click_log_line(pilot, log: EventLog, want) -> int:
    """Click the first line on screen whose step passes ``want``; returns that step."""
    top = log.scroll_offset.y
    for y in range(top, min(len(log.lines), top + log.scrollable_content_region.height)):
        steps = log.step_at(y)
        if steps is not None and want(steps):
            inner = log.scrollable_content_region.y - log.region.y
            await pilot.click(log, offset=(6, inner + y - top))
            await pilot.pause()
            return steps
    raise AssertionError("no such line on screen")


def as_of_steps(app) -> int | None:
    return None if app.as_of is None else app.timeline.frames[app.as_of].steps


@pytest.mark.asyncio
async def test_live_click_on_a_step_and_on_a_log_line_shows_the_past_while_the_session_stays(
    tmp_path,
):
    app = LiveInspector(SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp_path)), MEMFD)
    receive = PLAN.index(("consumer", "receive")) + 1
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        while app.session.position < receive:
            before = app.session.position
            await pilot.press("space")
            await wait_for(pilot, lambda b=before: app.session.position > b and not app.busy)
        await app.rendered()
        await pilot.pause()
        live = app.session.position

        await click_step(pilot, app, "producer", "map")
        n = PLAN.index(("producer", "map")) + 1
        assert as_of_steps(app) == n
        assert app.panel("producer").border_subtitle == f"as of step {n}"
        assert app.panel("consumer").border_subtitle == f"as of step {n}"
        assert f"AS OF STEP {n}" in app.sub_title
        assert (
            "map" in app.panel("producer").results and "export" not in app.panel("producer").results
        )
        assert app.session.position == live  # the session stayed where it was

        await click_step(pilot, app, "consumer", "verify")  # not run yet: nothing happens
        assert as_of_steps(app) == n

        await pilot.press("end")
        assert app.as_of is None and app.panel("producer").border_subtitle == ""
        assert "send" in app.panel("producer").results

        log = app.query_one(EventLog)
        await app.rendered()
        picked = await click_log_line(pilot, log, lambda s: 0 < s < live)
        assert as_of_steps(app) == picked
        assert app.panel("producer").border_subtitle == f"as of step {picked}"
        assert app.session.position == live
        await pilot.pause(0.6)  # live fd refreshes land meanwhile: kept, not drawn
        assert as_of_steps(app) == picked

        await pilot.press("end")
        assert app.as_of is None and app.panel("consumer").border_subtitle == ""
        assert app.session.position == live
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)


@pytest.mark.asyncio
async def test_replay_click_on_a_step_and_on_a_log_line_goes_to_it():
    app = ReplayApp(gallery.resolve("cpu-memfd-1mib"))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("end")
        last = app.frame
        await click_step(pilot, app, "consumer", "import")
        n = PLAN.index(("consumer", "import")) + 1
        assert app.timeline.frames[app.frame].steps == n
        assert f"as of step {n}: consumer · import" in app.sub_title
        assert (
            "import" in app.panel("consumer").results
            and "reserve" not in app.panel("consumer").results
        )

        picked = await click_log_line(pilot, app.query_one(EventLog), lambda s: 0 < s < n)
        assert app.timeline.frames[app.frame].steps == picked
        await pilot.press("end")
        assert app.frame == last
