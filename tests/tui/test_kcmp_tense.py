"""kcmp's answer on the screen of a real memfd session: "same open file description" while both fds
are open, and once the cleanup has closed them, what it was and when, beside fd tables that show
them closed (a screen never says "are" of fds no process holds)."""

import html
import re
from collections import defaultdict

import pytest
from driving import MEMFD, step_to, text_of, wait_for

from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import build_plan
from vmmtui.tui.app import InspectorApp
from vmmtui.tui.widgets.fd_table import FdTableView
from vmmtui.tui.widgets.wire import WirePanel

SAME = "same open file description"


def screen_lines(app) -> list[str]:
    """The screen as drawn, one string per terminal row (each run of text put at its column)."""
    svg = app.export_screenshot()
    runs = re.findall(
        r'<text[^>]*x="([\d.]+)" y="[\d.]+" textLength="([\d.]+)" '
        r'clip-path="url\(#terminal-\d+-line-(\d+)\)"[^>]*>(.*?)</text>',
        svg,
        re.S,
    )
    width = min(float(n) / len(html.unescape(t)) for _, n, _, t in runs if t)
    rows: dict[int, list[str]] = defaultdict(list)
    for x, _, line, text in runs:
        row, col = rows[int(line)], round(float(x) / width)
        text = html.unescape(text).replace("\xa0", " ")
        row.extend(" " * (col + len(text) - len(row)))
        row[col : col + len(text)] = text
    return ["".join(rows[k]) for k in sorted(rows)]


@pytest.mark.asyncio
@pytest.mark.slow
@pytest.mark.parametrize("consumers", [1, 3])
@pytest.mark.parametrize("size", [(80, 24), (160, 48)], ids=["80x24", "160x48"])
async def test_kcmp_is_said_in_the_present_while_the_fds_are_open_and_in_the_past_once_closed(
    tmp_path, consumers, size
):
    config = SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp_path), consumers=consumers)
    app = InspectorApp(config, MEMFD, stable=True)
    plan = build_plan(consumers=consumers)
    last = "consumer" if consumers == 1 else f"consumer-{consumers}"
    first_cleanup = next(i for i, (_, step) in enumerate(plan) if step == "cleanup")
    # the last consumer's fd closes at its cleanup: kcmp last answered at the step before it
    asked = plan.index((last, "cleanup"))
    wide = size[0] >= 120  # the wire panel is drawn from 120 columns
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        await step_to(pilot, app, first_cleanup)  # every consumer holds its fd, none has closed it
        exported = app.panel("producer").worker_state.exported_fd
        received = app.panel(last).worker_state.received_fd
        pair = f"producer fd {exported} ≡ {last} fd {received}"
        screen = "\n".join(screen_lines(app))
        assert f"{pair}: {SAME}" in screen, screen
        assert "(kcmp; closed)" not in screen and " were " not in screen
        if wide:
            wire = " ".join(text_of(app.query_one(WirePanel)).split())
            assert (
                f"{pair}: {SAME}" in wire
                if consumers == 1
                else f"{consumers}/{consumers} consumers' fds are the producer's open file" in wire
            ), wire

        await pilot.press("r")
        await wait_for(pilot, lambda: app.session.stopped and not app.busy, timeout=60)
        await pilot.pause(0.5)
        # the fd tables on show: the pair is gone from both processes' tables
        for role, fd in (("producer", exported), (last, received)):
            table = app.query_one(f"#{role}-fds", FdTableView).snapshot
            assert fd not in {r.fd for r in table.rows}, role
        lines = screen_lines(app)
        screen = "\n".join(lines)
        for fd in (exported, received):  # struck through on screen
            assert re.search(rf"│\s+{fd}\s+\S+\s+closed", screen), screen
        assert f": {SAME}" not in screen and "fds are the producer's" not in screen, screen
        status = next((line for line in lines if "(kcmp; closed)" in line), "")
        assert f"{pair} at step {asked} (kcmp; closed)" in status and "VERIFIED" in status, screen
        if wide:
            wire = " ".join(text_of(app.query_one(WirePanel)).split())
            assert (
                f"{pair} were the {SAME} (at step {asked})"
                if consumers == 1
                else f"{consumers}/{consumers} consumers' fds were the producer's open file "
                "description (before cleanup)"
            ) in wire, wire
            # the log's end line (wrapped where its counts make it longer than a row)
            assert re.search(r"description[\s│]+\(before[\s│]+cleanup\)", screen), screen
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)
