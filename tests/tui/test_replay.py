"""The replay app on the shipped memfd recording, the live inspector's step back, --record and --cast."""

import json
import os
import re

import pytest
from driving import MEMFD, wait_for

from vmmtui.pipeline.replay import read
from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import build_plan
from vmmtui.record import Timeline, gallery
from vmmtui.tui.app import InspectorApp as LiveInspector
from vmmtui.tui.replay import ReplayApp
from vmmtui.tui.widgets.event_log import EventLog
from vmmtui.tui.widgets.fd_table import FdTableView
from vmmtui.tui.widgets.wire import VerdictsPanel, WirePanel

#: the slow tier: left out of the default run (README), run by .ci/run after it
pytestmark = pytest.mark.slow

PLAN = build_plan()
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def text_of(widget) -> str:
    from rich.console import Console

    with open(os.devnull, "w") as sink:
        console = Console(width=200, record=True, file=sink)
        console.print(
            widget.content
            if not isinstance(widget, EventLog)
            else "\n".join(s.text for s in widget.lines)
        )
        return console.export_text()


def panels(app) -> dict[str, str]:
    """Everything the panels say, with the fd tables' contents (not their momentary highlights)."""
    out = {w.id: text_of(w) for w in app.query("#wire, #verification, #teaching, #status")}
    for role in app.roles:
        panel = app.panel(role)
        out[role] = (
            str(panel.results)
            + str(panel.next_step)
            + panel.state_text
            + text_of(app.query_one(f"#{role}-card"))
        )
        snap = app.query_one(f"#{role}-fds", FdTableView).snapshot
        out[f"{role}-fds"] = "" if snap is None else json.dumps([r.fd for r in snap.rows])
    out["log"] = text_of(app.query_one(EventLog))
    return out


def recording():
    return gallery.resolve("cpu-memfd-1mib")


@pytest.mark.asyncio
async def test_back_and_forth_draws_each_step_as_it_was():
    app = ReplayApp(recording())
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        assert "REPLAY" in app.title and "CPU memory (memfd) · " in app.title and "20" in app.title
        forward = {}
        for k in range(len(app.timeline)):
            forward[k] = panels(app)
            await pilot.press("space")
        assert app.frame == len(app.timeline) - 1 and "PASSED" in text_of(
            app.query_one(VerdictsPanel)
        )
        for k in reversed(range(len(app.timeline) - 1)):
            await pilot.press("left")
            assert app.frame == k
            assert panels(app) == forward[k], f"frame {k} differs after stepping back"
        assert "not yet verified" in text_of(app.query_one(VerdictsPanel))
        await pilot.press("end")
        assert panels(app) == forward[len(app.timeline) - 1]
        await pilot.press("home")
        assert app.frame == 0 and panels(app) == forward[0]


@pytest.mark.asyncio
async def test_go_to_a_step_by_number_and_from_the_list():
    app = ReplayApp(recording())
    receive = PLAN.index(("consumer", "receive")) + 1
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("g")
        await pilot.press(*str(receive), "enter")
        await pilot.pause()
        assert app.timeline.frames[app.frame].steps == receive
        assert "arrived as consumer fd" in text_of(app.query_one(WirePanel))
        assert f"as of step {receive}: consumer · receive" in app.sub_title
        await pilot.press("g")
        await pilot.pause()
        await pilot.press(
            "tab", "down", "down", "enter"
        )  # the list, from the current step: two further
        await pilot.pause()
        assert app.timeline.frames[app.frame].steps == receive + 2


@pytest.mark.asyncio
async def test_autoplay_to_the_end_writes_a_cast_whose_last_frame_holds_passed(tmp_path):
    cast = tmp_path / "replay.cast"
    shots = tmp_path / "shots"
    app = ReplayApp(
        recording(),
        autoplay=True,
        pace=0.25,
        cast=str(cast),
        screenshots=str(shots),
        stable=True,
        transcript=str(tmp_path / "t.md"),
    )
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.frame == len(app.timeline) - 1, timeout=60)
        await pilot.pause(0.5)
        await pilot.press("q")
    lines = cast.read_text().splitlines()
    header = json.loads(lines[0])
    assert header["version"] == 2 and (header["width"], header["height"]) == (120, 40)
    assert isinstance(header["timestamp"], int)
    frames = [json.loads(line) for line in lines[1:]]
    assert len(frames) >= 5 and all(f[1] == "o" and isinstance(f[2], str) for f in frames)
    times = [f[0] for f in frames]
    assert times == sorted(times) and times[0] >= 0
    assert "PASSED" in ANSI.sub("", frames[-1][2]) and "PASSED" not in ANSI.sub("", frames[0][2])
    assert len(list(shots.glob("*.svg"))) == len(app.timeline)
    assert "## Result" in (tmp_path / "t.md").read_text()


@pytest.mark.asyncio
async def test_live_step_back_shows_the_past_while_the_session_stays(tmp_path):
    record = tmp_path / "live.jsonl"
    app = LiveInspector(
        SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp_path)),
        MEMFD,
        record=str(record),
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        verify = PLAN.index(("consumer", "verify")) + 1
        while app.session.position < verify + 1:
            before = app.session.position
            await pilot.press("space")
            await wait_for(pilot, lambda b=before: app.session.position > b and not app.busy)
        await pilot.pause(0.5)
        await app.rendered()
        assert "PASSED" in text_of(app.query_one(VerdictsPanel))
        await pilot.press("left", "left")
        assert app.as_of is not None and app.timeline.frames[app.as_of].steps == verify - 1
        assert app.panel("producer").border_subtitle.startswith(f"as of step {verify - 1}")
        assert f"AS OF STEP {verify - 1}" in app.sub_title
        assert "not yet verified" in text_of(app.query_one(VerdictsPanel))
        assert app.session.position == verify + 1  # the session stayed where it was
        await pilot.pause(0.6)  # live fd refreshes land meanwhile: kept, not drawn
        assert "not yet verified" in text_of(app.query_one(VerdictsPanel))
        await pilot.press("end")
        assert app.as_of is None and app.panel("producer").border_subtitle == ""
        assert "PASSED" in text_of(app.query_one(VerdictsPanel))
        await pilot.press("r")
        await wait_for(pilot, lambda: app.session.finished and not app.busy)
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)
    assert sorted(os.listdir(tmp_path)) == ["live.jsonl"], [
        (p, os.listdir(tmp_path / p)) for p in os.listdir(tmp_path) if p != "live.jsonl"
    ]
    rec = read(record)
    assert rec.header.backend == "memfd" and rec.note == ""
    assert Timeline(rec.events).frames[-1].closing and len(Timeline(rec.events)) == len(PLAN) + 2


@pytest.mark.asyncio
async def test_the_cast_has_a_frame_for_every_state_shown_forward_and_back(tmp_path):
    """A 0.2 s sample lost steps 3, 11 and 15 and recorded 16 twice at pace 0.5."""
    from vmmtui.tui.cast import plain

    cast = tmp_path / "replay.cast"
    app = ReplayApp(recording(), cast=str(cast), stable=True)
    shown = []
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        shown.append(app.frame)
        for key in ["right"] * 9 + ["left"] * 4 + ["right"] * 2:  # faster than any sampling
            await pilot.press(key)
            shown.append(app.frame)
        await pilot.pause(0.3)
        await pilot.press("q")
    frames = [json.loads(line) for line in cast.read_text().splitlines()[1:]]
    last = app.timeline.frames[-1].steps
    steps = [int(re.search(rf"REPLAY · step (\d+)/{last}", plain(f[2])).group(1)) for f in frames]
    want = [app.timeline.frames[i].steps for i in shown]
    assert steps[: len(want)] == want, (steps, want)


@pytest.mark.asyncio
async def test_a_replay_at_80x24_says_replay_and_the_step(tmp_path):
    app = ReplayApp(recording())
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        last = app.timeline.frames[-1].steps
        assert f"REPLAY · step 0/{last}" in text_of(app.query_one("#status"))
        await pilot.press("right", "right")
        assert f"REPLAY · step 2/{last}" in text_of(app.query_one("#status"))
        assert app.query_one("#status").region.height == 1  # on screen, not cut away


@pytest.mark.asyncio
async def test_a_replays_failure_box_offers_no_restart():
    rec = gallery.resolve("cpu-memfd-1mib")
    from vmmtui.record.recording import Recording
    from vmmtui.stream.events import SessionFailed
    from vmmtui.stream.failures import Failure

    failed = SessionFailed("consumer", "import", Failure("EBADF", "import", "bad fd", "c", "f"))
    events = [*rec.events[:40], failed]
    app = ReplayApp(Recording(rec.header, events, rec.path, rec.note))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("end")
        teaching = text_of(app.query_one("#teaching"))
        assert "EBADF" in teaching and "ctrl+r" not in teaching
