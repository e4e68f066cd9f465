"""The processes that matter are on screen at every size: a replay of a bash wrapper that starts
a helper tree and two sharers (``tests/fixtures/wrapped_share.sh``, about 70 processes, traced
for real), and the gallery's trace of ``vmmtui run``. The rest are one "+N more" line that Tab
or ``m`` opens; Tab never lands on an empty area."""

from __future__ import annotations

import re

import pytest
from test_trace_inspector import SIZES, TRACES, screen_text

from vmmtui.pipeline.replay import read
from vmmtui.record.gallery import find
from vmmtui.tui.replay import ReplayApp
from vmmtui.tui.widgets.more import MoreProcesses
from vmmtui.tui.widgets.process_panel import ProcessPanel


def sharers(app: ReplayApp) -> set[int]:
    v = app.frames.at(app.frames.last).programs
    assert v is not None
    return {pid for t in v.transfer_list() for pid in (t.from_pid, t.to_pid)}


def on_screen(app, widget) -> bool:
    """Drawn whole inside the terminal, with room for a line of text."""
    r, screen = widget.region, app.screen.region
    return (
        widget.display
        and r.width > 2
        and r.height >= 1
        and r.x >= 0
        and r.y >= 0
        and r.right <= screen.right
        and r.bottom <= screen.bottom
    )


async def at_end(pilot) -> None:
    await pilot.pause()
    await pilot.press("end")
    await pilot.pause()
    await pilot.pause()


@pytest.mark.asyncio
@pytest.mark.parametrize("size", SIZES)
async def test_the_sharers_have_their_panels_and_the_rest_is_one_line(size):
    app = ReplayApp(read(TRACES / "wrapped_share.jsonl.gz"))
    async with app.run_test(size=size) as pilot:
        await at_end(pilot)
        pair = sharers(app)
        assert len(pair) == 2
        panels = {p.pid: p for p in app.screen.query(ProcessPanel) if p.display}
        assert pair <= set(panels)
        for pid in pair:
            assert on_screen(app, panels[pid])
        text = screen_text(app)
        for pid in pair:
            assert f"python3[{pid}]" in text
        v = app.frames.at(app.frames.last).programs
        assert v is not None
        folded = len(v.procs) - len(panels)
        assert folded > 40
        # each folded process said as what it is (here: the wrapper's helpers, none that shares)
        assert re.search(rf"\+{folded} more processes \((1 wrappers?; )?\d+ helpers\)", text)
        assert on_screen(app, app.screen.query_one(MoreProcesses))


@pytest.mark.asyncio
@pytest.mark.parametrize("size", SIZES)
async def test_the_gallery_trace_of_vmmtui_run_shows_producer_and_consumer(size):
    app = ReplayApp(read(find("h100-trace-vmmtui-run")))
    async with app.run_test(size=size) as pilot:
        await at_end(pilot)
        pair = sharers(app)
        text = screen_text(app)
        for pid in pair:
            assert f"python3[{pid}]" in text
        assert re.search(r"\+\d+ more process", text)  # the wrapper python3 -m vmmtui run
        # mid-run too: from the first export on, the producer's panel is on screen with it
        k = next(
            i
            for i in range(app.frames.last + 1)
            if (v := app.frames.at(i).programs) is not None
            and any(f.how == "exported" for p in v.procs.values() for f in p.fds.values())
        )
        app.go(k)
        await pilot.pause()
        await pilot.pause()
        assert re.search(r"fd \d+\s+exported", screen_text(app))


@pytest.mark.asyncio
@pytest.mark.parametrize("size", SIZES)
async def test_tab_never_lands_on_an_empty_area_and_reaches_the_folded(size):
    app = ReplayApp(read(TRACES / "wrapped_share.jsonl.gz"))
    async with app.run_test(size=size) as pilot:
        await at_end(pilot)
        more = app.screen.query_one(MoreProcesses)
        assert "m or tab lists them" in screen_text(app)
        landed = set()
        for _ in range(8):
            await pilot.press("tab")
            await pilot.pause()
            await pilot.pause()
            focused = app.focused
            assert focused is not None and on_screen(app, focused), focused
            text = screen_text(app)
            if isinstance(focused, ProcessPanel):
                v = app.frames.at(app.frames.last).programs
                assert v is not None and v.proc(focused.pid).name in text
                # every other shown panel is still on screen beside the wider focused one
                for panel in app.screen.query(ProcessPanel):
                    assert not panel.display or on_screen(app, panel)
            landed.add(type(focused).__name__)
            if focused is more:
                assert "m closes" in text and "helper · exited with code 0" in text
        assert {"ProcessPanel", "MoreProcesses"} <= landed


@pytest.mark.asyncio
async def test_m_opens_and_closes_the_list_of_the_folded():
    app = ReplayApp(read(TRACES / "wrapped_share.jsonl.gz"))
    async with app.run_test(size=(120, 40)) as pilot:
        await at_end(pilot)
        assert "helper · exited" not in screen_text(app)
        await pilot.press("m")
        await pilot.pause()
        text = screen_text(app)
        assert "m closes" in text and "helper · exited with code 0" in text
        assert re.search(r"… \d+ more not listed", text)
        await pilot.press("m")
        await pilot.pause()
        assert "helper · exited" not in screen_text(app)


@pytest.mark.asyncio
@pytest.mark.parametrize("name", ["h100-trace-vmmtui-run", "cpu-memfd-1mib"])
async def test_help_explains_the_panels_on_screen(name):
    """? in a trace explains the trace's panels; in the demo (a session's replay) the demo's."""
    from textual.widgets import Markdown

    from vmmtui.tui.screens.help import HelpScreen

    app = ReplayApp(read(find(name)))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        source = app.screen.query_one(Markdown).source
        trace_words = ("Process panels", "+N more processes", "**wire**", "**verdicts**", "`O`")
        demo_words = ("**producer**", "**consumer**", "fd tables")
        if name.startswith("h100-trace"):
            assert all(w in source for w in trace_words), source
            assert not any(w in source for w in demo_words)
        else:
            assert all(w in source for w in demo_words)
            assert not any(w in source for w in trace_words)
