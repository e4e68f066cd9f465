"""The problem on screen first: a fan-out of 30 workers of which one leaks the memfd it received
(tests/fixtures/fanout_leak.py, traced for real into tests/data/traces/fanout_leak.jsonl.gz).
Where there is room for few panels, the leaking worker has one before the healthy sharers, and
the folded line names what the others are (sharers without room), never wrappers or helpers;
``m`` lists a folded process with its finding. Before, the panels went to the parent and two
healthy workers, and the leaker was one of "+28 more processes (… wrappers, helpers)"."""

from __future__ import annotations

import pytest
from test_trace_inspector import TRACES, screen_text

from vmmtui.pipeline.replay import read
from vmmtui.tui.replay import ReplayApp
from vmmtui.tui.widgets.process_panel import ProcessPanel


def leaker(app: ReplayApp) -> int:
    v = app.frames.at(app.frames.last).programs
    assert v is not None
    found = [f for f in v.finding_list() if f.kind == "fd-never-closed"]
    assert len(found) == 1
    return found[0].pid


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
async def test_the_leaking_worker_of_thirty_has_a_panel(size):
    app = ReplayApp(read(TRACES / "fanout_leak.jsonl.gz"))
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        await pilot.press("end")
        await pilot.pause()
        await pilot.pause()
        pid = leaker(app)
        panels = [p.pid for p in app.screen.query(ProcessPanel) if p.display]
        assert pid in panels, panels
        text = screen_text(app)
        assert f"[{pid}]" in text
        assert "wrappers" not in text and "helpers" not in text
        assert "that share, without room" in text


def test_a_panel_counts_the_closed_fds_it_does_not_keep():
    """The parent closes 60 fds (a memfd and a socket per worker): the view keeps the newest
    closed ones and counts the rest, which the panel says (it dropped them without a count)."""
    from vmmtui.tui.widgets.programs import program_rows
    from vmmtui.view.programs import CLOSED_KEPT

    app = ReplayApp(read(TRACES / "fanout_leak.jsonl.gz"))
    v = app.frames.at(app.frames.last).programs
    assert v is not None
    parent = min(v.procs.values(), key=lambda p: p.first)
    assert len(parent.closed) == CLOSED_KEPT and parent.closed_dropped >= 30
    rows = program_rows(v, parent, "", height=60)
    assert f"… {parent.closed_dropped} earlier closed fds" in rows.plain
