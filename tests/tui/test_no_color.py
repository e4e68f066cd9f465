"""NO_COLOR=1: the inspector draws in grey, and never ends in Textual's traceback (its monochrome
filter read the colour of a segment that had no style at all)."""

from __future__ import annotations

import pytest
from test_trace_inspector import TRACES, screen_text

from vmmtui.record import read
from vmmtui.record.gallery import find
from vmmtui.tui.colours import SafeMonochrome
from vmmtui.tui.replay import ReplayApp


@pytest.mark.asyncio
@pytest.mark.parametrize("path", [TRACES / "wrapped_share.jsonl.gz", "cpu-memfd-1mib"])
async def test_no_color_draws_the_trace_and_the_demo(monkeypatch, path):
    monkeypatch.setenv("NO_COLOR", "1")
    app = ReplayApp(read(path if not isinstance(path, str) else find(path)))
    assert any(isinstance(f, SafeMonochrome) for f in app._filters)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        await pilot.press("end")
        await pilot.pause()
        await pilot.pause()
        assert "call" in screen_text(app) or "step" in screen_text(app)
    assert app._exception is None
