"""NO_COLOR=1 (https://no-color.org): every full-screen app draws without colour and keeps its
layout, at the sizes people use. Textual then passes every row through its monochrome filter,
which reads each segment's style: a widget that hands it an unstyled segment ends the app."""

from __future__ import annotations

from pathlib import Path

import pytest
from driving import make_app, wait_for

from tests.commands import screen_text
from vmmtui.pipeline.replay import read
from vmmtui.record import gallery
from vmmtui.tui.replay import ReplayApp
from vmmtui.tui.trace import TraceApp

#: the slow tier: left out of the default run (README), run by .ci/run after it
pytestmark = pytest.mark.slow
SIZES = [(120, 40), (160, 48)]
TRACES = Path(__file__).parent.parent / "data" / "traces"


async def tour(pilot, steps: int = 6) -> str:
    """Step, open the keys (?) and close them: every panel and the log drawn more than once."""
    for _ in range(steps):
        await pilot.press("space")
        await pilot.pause(0.1)
    await pilot.press("question_mark")
    await pilot.pause(0.2)
    await pilot.press("escape")
    await pilot.pause(0.2)
    return screen_text(pilot.app)


async def replay_text(size) -> tuple[str, int | None]:
    app = ReplayApp(gallery.resolve("h100-vmm-1mib"))
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.3)
        text = await tour(pilot)
        await pilot.press("q")
    return text, app.return_code


@pytest.mark.asyncio
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_replay_without_colour_keeps_its_layout(monkeypatch, size):
    coloured, _ = await replay_text(size)
    monkeypatch.setenv("NO_COLOR", "1")
    plain, code = await replay_text(size)
    assert code == 0
    assert plain == coloured and "step 6/" in plain


class Played:
    """A tracer that gives the events a real trace recorded (tests/data/traces), as the tracer's
    thread would: the app under test is the trace inspector, not the probes."""

    command = None
    exit = None
    proc = None
    tree = None
    pids: list[int] = []

    def __init__(self, events):
        self.recorded = events
        self.stopping = False

    def events(self, on_batch):
        yield from self.recorded


@pytest.mark.asyncio
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_trace_inspector_without_colour(monkeypatch, size):
    monkeypatch.setenv("NO_COLOR", "1")
    app = TraceApp(Played(read(TRACES / "scm_pair.jsonl.gz").events))
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.ended, timeout=20)
        await pilot.pause(0.2)
        await pilot.press("left")
        text = await tour(pilot, steps=0)
        assert "AS OF CALL" in text and "event log" in text
        await pilot.press("q")
    assert app.return_code == 0


@pytest.mark.asyncio
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_live_inspector_without_colour(monkeypatch, tmp_path, size):
    monkeypatch.setenv("NO_COLOR", "1")
    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        for _ in range(6):
            before = app.session.position
            await pilot.press("space")
            await wait_for(pilot, lambda b=before: app.session.position > b and not app.busy)
        text = await tour(pilot, steps=0)
        assert "event log" in text and "6/" in text
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)
    assert app.return_code == 0
