"""``--screenshots``: each picture holds its own step's events (none lags the event log by a step)."""

import html
import re

import pytest

from vmmtui.backends import Choice
from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import build_plan
from vmmtui.tui.app import InspectorApp

#: the slow tier: left out of the default run (README), run by .ci/run after it
pytestmark = pytest.mark.slow

PLAN = build_plan()
MEMFD = Choice("memfd", "memfd backend requested (CPU memory, not GPU memory)")


def svg_text(path) -> str:
    """The words an SVG screenshot shows, one string (spans joined, non-breaking spaces as spaces)."""
    raw = path.read_text(encoding="utf-8")
    spans = re.findall(r"<text[^>]*>(.*?)</text>", raw, flags=re.S)
    return html.unescape("".join(spans)).replace("\xa0", " ")


@pytest.mark.asyncio
async def test_each_screenshot_shows_its_own_steps_log_lines(tmp_path):
    shots = tmp_path / "shots"
    app = InspectorApp(
        SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp_path)),
        MEMFD,
        screenshots=str(shots),
        autoplay=True,
        pace=0.25,
    )
    async with app.run_test(size=(160, 48)) as pilot:
        for _ in range(1200):
            if (
                app.session is not None
                and app.session.finished
                and not app.busy
                and app.shots >= len(PLAN)
            ):
                break
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        await pilot.press("q")
        for _ in range(200):
            if app.return_code is not None:
                break
            await pilot.pause(0.05)
    receive = PLAN.index(("consumer", "receive")) + 1
    verify = PLAN.index(("consumer", "verify")) + 1
    received = svg_text(shots / f"{receive:02d}-consumer-receive.svg")
    assert "recvmsg(" in received
    verified = svg_text(shots / f"{verify:02d}-consumer-verify.svg")
    assert "Data verification PASSED" in verified  # in the log, not only in the verification panel
    assert "PASSED 262144 integers verified" in verified
    first = svg_text(shots / "01-producer-init.svg")
    assert "Initialise the driver" in first and "Data verification PASSED" not in first
