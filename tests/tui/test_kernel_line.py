"""The kernel's record beside the step (eBPF, as root): the live inspector's step panel and the
replay of a recording made with it, on real memfd sessions."""

import gzip
import os
import subprocess
import sys

import pytest
from driving import MEMFD, step_to, text_of, wait_for

from vmmtui.pipeline.replay import read
from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import build_plan
from vmmtui.session.kernel import OFF_ENV
from vmmtui.tui.app import InspectorApp
from vmmtui.tui.replay import ReplayApp
from vmmtui.tui.widgets.event_log import EventLog

#: the slow tier: whole sessions with the probe loaded (README)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ebpf")]

PLAN = build_plan()
RECEIVE = PLAN.index(("consumer", "receive")) + 1


@pytest.fixture(autouse=True)
def kernel_wanted(monkeypatch):
    """The suite turns eBPF off for the other tests (conftest): on here."""
    monkeypatch.delenv(OFF_ENV, raising=False)


def kernel_line(exported: int, received: int) -> str:
    return (
        f"kernel: producer sendmsg SCM_RIGHTS fd {exported} → consumer fd {received} (recvmsg), "
        "same struct file"
    )


@pytest.mark.asyncio
async def test_the_step_panel_shows_what_the_kernel_saw_in_the_step(tmp_path):
    config = SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp_path), kernel=True)
    app = InspectorApp(config, MEMFD)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        await step_to(pilot, app, RECEIVE)
        session = app.session
        exported = app.panel("producer").worker_state.exported_fd
        received = app.panel("consumer").worker_state.received_fd
        kcmp = session.kcmp["consumer"]
        assert kcmp.same and (kcmp.producer_fd, kcmp.consumer_fd) == (exported, received)
        teaching = text_of(app.query_one("#teaching"))
        assert kernel_line(exported, received) in " ".join(teaching.split()), teaching
        log = "\n".join(line.text for line in app.query_one(EventLog).lines)
        assert "kern eBPF follows producer pid" in log
        # the next step's own text is still there, above the kernel's line
        assert "next: consumer" in app.query_one("#teaching").border_title
        assert session.kernel.on
        await pilot.press("q")
        await wait_for(pilot, lambda: session.closed and app.return_code is not None)
    assert not session.kernel.on  # the probe is detached at the close
    assert session.closed_event is not None and session.closed_event.clean
    assert os.listdir(tmp_path) == []


@pytest.mark.asyncio
async def test_a_recording_made_with_it_replays_the_line(tmp_path):
    rec = tmp_path / "run.jsonl.gz"
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "run", "--backend", "memfd", "--record", str(rec)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    recording = read(rec)
    names = {type(e).__name__ for e in recording.events}
    assert {"TraceStarted", "FdsSent", "FdsReceived", "TraceFinished"} <= names
    assert recording.cut == ""
    # cut where the kernel's record ends, before the session's close: said cut short
    with gzip.open(rec, "rt") as f:
        lines = f.read().splitlines(keepends=True)
    end = next(k for k, line in enumerate(lines) if '"event":"TraceFinished"' in line)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[: end + 1]))
    assert read(cut).cut.startswith(f"cut short: it ends at line {end + 1}")
    sent = next(
        e
        for e in recording.events
        if type(e).__name__ == "FdsSent" and e.sock.name.endswith("vmmtui.sock")
    )
    got = next(e for e in recording.events if type(e).__name__ == "FdsReceived" and e.sock.name)
    app = ReplayApp(recording)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("g")
        await pilot.press(*str(RECEIVE), "enter")
        await pilot.pause()
        assert app.timeline.frames[app.frame].steps == RECEIVE
        teaching = " ".join(text_of(app.query_one("#teaching")).split())
        assert kernel_line(sent.fds[0], got.fds[0]) in teaching, teaching
        await pilot.press("left")  # the step before: the producer's send, as the kernel saw it
        await pilot.pause()
        teaching = " ".join(text_of(app.query_one("#teaching")).split())
        assert f"kernel: producer sendmsg SCM_RIGHTS fd {sent.fds[0]} over unix socket" in teaching


@pytest.mark.asyncio
async def test_the_kernel_line_is_shown_or_said_left_out_at_every_size(tmp_path):
    """At 80x24 the step panel has no row for the kernel's line: it went without a sign. Now the
    panel's border says which step's record the event log holds; where the line fits it is drawn
    whole and the border says nothing of it."""
    from vmmtui.words.trace import kernel_step_line

    config = SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp_path), kernel=True)
    app = InspectorApp(config, MEMFD)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        teaching = app.query_one("#teaching")
        seen = {}
        for step in (RECEIVE - 1, RECEIVE):  # the send, then the receive as the kernel saw them
            await step_to(pilot, app, step)
            line = kernel_step_line(app.state_shown().kernel_facts())
            assert line is not None
            log = " ".join(" ".join(e.text for e in app.query_one(EventLog).lines).split())
            assert f"kern {line.plain.removeprefix('kernel: ')}"[:50] in log, log
            for size in ((80, 24), (120, 40), (160, 48)):
                await pilot.resize_terminal(*size)
                await pilot.pause(0.3)
                drawn = " ".join(text_of(teaching).split())
                whole = " ".join(line.plain.split()) in drawn
                sign = f"+ kernel's record of step {step} (in the event log)"
                said = sign in str(teaching.border_subtitle)
                assert whole != said, (size, step, drawn, teaching.border_subtitle)
                seen[size, step] = whole
            await pilot.resize_terminal(80, 24)
            await pilot.pause(0.3)
        # 80x24 has no row for it, 160x48 has
        assert not seen[(80, 24), RECEIVE] and seen[(160, 48), RECEIVE], seen
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)
    assert os.listdir(tmp_path) == []
