"""A replay's files and its timer: screenshots get portable ASCII names (Textual's own name is the
title, with its spaces and middle dots), and no --pace can starve the event loop."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vmmtui.pipeline.replay import resolve
from vmmtui.tui.replay import ReplayApp


@pytest.mark.asyncio
async def test_screenshots_of_a_replay_have_ascii_names(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where the s key saves
    shots = tmp_path / "shots"
    app = ReplayApp(resolve("h100-vmm-1mib"), screenshots=str(shots), stable=True)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        await pilot.press("right", "right")
        await pilot.press("s")
        await pilot.pause(0.5)
        await pilot.press("q")
    names = [p.name for p in [*tmp_path.glob("*.svg"), *shots.glob("*.svg")]]
    assert len(names) >= 3 and any(p.parent == tmp_path for p in tmp_path.glob("*.svg")), names
    odd = [n for n in names if not n.isascii() or " " in n]
    assert odd == [], odd


#: a replay at an autoplay interval far below what Textual's timer can keep: q must still end it
STARVED = """
import asyncio
from vmmtui.pipeline.replay import resolve
from vmmtui.tui.replay import ReplayApp

async def main():
    app = ReplayApp(resolve("h100-vmm-1mib"), autoplay=True, pace=1e-9)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.5)
        await pilot.press("q")
        await pilot.pause(0.2)
    print("ended", app.return_code)

asyncio.run(main())
"""


def test_an_autoplay_interval_below_the_timers_floor_still_answers_q():
    """At 1e-9 s Textual's timer skipped missed ticks in a loop that never yielded: a blank screen
    that ignored q, Ctrl-C and every signal. Run apart: a hang here is a timeout, not a stuck suite."""
    try:
        res = subprocess.run(
            [sys.executable, "-c", STARVED], capture_output=True, text=True, timeout=90
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the replay at --pace 1e-9 did not answer q within 90 s")
    assert res.stdout.strip() == "ended 0", res.stderr[-2000:]
