"""Below 80×24 the inspector says so, centred, with the size it needs and the size it has, and
draws itself again when the terminal grows back (it showed empty borders)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.commands import screen_text
from vmmtui.pipeline.replay import read
from vmmtui.record import gallery
from vmmtui.tui.replay import ReplayApp

TRACE = Path(__file__).parent.parent / "data" / "traces" / "scm_pair.jsonl.gz"


def words(app) -> list[str]:
    """The screen's lines that say something, the screenshot's title left out."""
    lines = screen_text(app).splitlines()[1:]
    return [line.strip() for line in lines if line.strip()]


@pytest.mark.asyncio
@pytest.mark.parametrize("recording", ["session", "trace"])
async def test_a_terminal_below_80x24_says_so_and_the_screen_comes_back(recording):
    app = ReplayApp(read(TRACE) if recording == "trace" else gallery.resolve("cpu-memfd-1mib"))
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause(0.2)
        assert words(app) == ["too small: 80×24 needed, this is 40×10", "q quits"]
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.3)
        back = screen_text(app)
        assert "too small" not in back and "event log" in back
        await pilot.resize_terminal(100, 23)  # one row short is too small too
        await pilot.pause(0.3)
        assert words(app) == ["too small: 80×24 needed, this is 100×23", "q quits"]
        await pilot.press("q")
    assert app.return_code == 0


@pytest.mark.asyncio
async def test_the_footer_shows_each_key_whole_or_not_at_all():
    """At 80 columns the footer's row was cut at the palette's key: "a▏", "^r Restar▏"."""
    from textual.widgets._footer import FooterKey

    app = ReplayApp(gallery.resolve("cpu-memfd-1mib"))
    async with app.run_test(size=(80, 24)) as pilot:
        for size in [(80, 24), (120, 40), (80, 24)]:
            await pilot.resize_terminal(*size)
            for _ in range(4):
                await pilot.pause()
            keys = list(app.screen.query(FooterKey))
            [palette] = [k for k in keys if k.has_class("-command-palette")]
            shown = [k for k in keys if k is not palette and k.display]
            assert shown and all(k.region.right <= palette.region.x for k in shown), size
            assert all(k.region.width for k in shown), size
            said = " ".join(k.description for k in shown)
            assert "Next" in said and "Quit" in said and "Help" in said, said
            if size == (80, 24):
                assert len(shown) < len(keys) - 1  # some did not fit, and are not drawn


@pytest.mark.asyncio
async def test_keys_do_nothing_behind_the_too_small_screen_but_q():
    """Space and → advanced the replay behind "too small" (at 40×10): nothing on screen to act
    on, so nothing moves; q still quits."""
    app = ReplayApp(gallery.resolve("cpu-memfd-1mib"))
    async with app.run_test(size=(40, 10)) as pilot:
        await pilot.pause(0.2)
        before = app.shown
        for key in ("space", "right", "end", "g"):
            await pilot.press(key)
        await pilot.pause(0.2)
        assert app.shown == before and len(app.screen_stack) == 1
        await pilot.press("q")
        await pilot.pause(0.2)
    assert app.return_code == 0
