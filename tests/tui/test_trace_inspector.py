"""The inspector on recorded traces of real programs (tests/data/traces, recorded with
``vmmtui trace --record`` of the fixtures): the same screen as the demo's, a panel per process,
the wire, the verdicts; the frames are the calls. Assertions are on the rendered screen's text."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from vmmtui.record import read
from vmmtui.tui.replay import ReplayApp
from vmmtui.view.programs import ProgramsView
from vmmtui.words.sizes import format_size

TRACES = Path(__file__).parent.parent / "data" / "traces"
SIZES = [(80, 24), (120, 40), (160, 48)]
slow = pytest.mark.slow
#: the fds each process must show where they exist (how they came to it)
SHOWN_HOW = ("created", "exported", "received", "taken")
SHOWN_MEMS = ("allocation", "pool", "import", "pool import", "mapping")


def screen_text(app) -> str:
    """The words on the screen, one string (spans joined, non-breaking spaces as spaces)."""
    raw = app.export_screenshot()
    spans = re.findall(r"<text[^>]*>(.*?)</text>", raw, flags=re.S)
    return html.unescape("".join(spans)).replace("\xa0", " ")


def app_of(name: str) -> ReplayApp:
    return ReplayApp(read(TRACES / f"{name}.jsonl.gz"))


async def at(pilot, app: ReplayApp, frame: int) -> str:
    app.go(frame)
    await pilot.pause()
    await pilot.pause()
    return screen_text(app)


def programs(app: ReplayApp, frame: int) -> ProgramsView:
    v = app.frames.at(frame).programs
    assert v is not None
    return v


@pytest.mark.asyncio
async def test_a_memfd_share_made_and_closed_within_a_millisecond():
    app = app_of("quick_share")
    async with app.run_test(size=(160, 48)) as pilot:
        last = app.frames.last
        v = programs(app, last)
        [t] = v.transfer_list()
        assert t.latency_ms is not None and t.latency_ms < 1.0  # as recorded
        # the frame of the receive: both ends on screen, the wire with both fd numbers
        k = next(i for i in range(last + 1) if programs(app, i).transfers_len)
        text = await at(pilot, app, k)
        assert re.search(r"fd 4\s+created( \(closed\))? memfd:quick-0", text)  # closed once sent
        assert re.search(rf"fd 3\s+received memfd:quick-0 ← {t.from_pid} fd 4 \(SCM_RIGHTS\)", text)
        assert f"SCM_RIGHTS {t.from_pid} fd 4 → {t.to_pid} fd 3" in text
        assert "1 shared/imported · 0 to look at" in text
        # the next calls close both: struck through, said closed
        text = await at(pilot, app, last)
        assert "closed" in text and "exited with code 0" in text


@pytest.mark.asyncio
async def test_a_pidfd_getfd_refused_across_uids_shows_cause_and_fix():
    app = app_of("pidfd_refused")
    async with app.run_test(size=(160, 48)) as pilot:
        v = programs(app, app.frames.last)
        [f] = v.finding_list()
        k = next(i for i in range(app.frames.last + 1) if programs(app, i).findings_len)
        text = await at(pilot, app, k)
        assert f"✗ refused: pid {f.pid} pidfd_getfd refused (EPERM)" in text
        assert "fix: give the caller CAP_SYS_PTRACE" in text
        assert "cause: pidfd_getfd needs ptrace access" in text
        assert "1 to look at" in text
        assert "✗" in str(app.inspector.query_one("#timeline").render())  # marked on the bar


@pytest.mark.asyncio
async def test_a_kept_memfd_is_to_look_at_and_a_kept_socket_and_pipe_are_folded_facts():
    """keeps_received: the receiver exits holding a socket, a pipe and a memfd. The verdicts
    list the memfd with its fix; the socket and the pipe are one dim line of facts."""
    app = app_of("keeps_received")
    async with app.run_test(size=(160, 48)) as pilot:
        v = programs(app, app.frames.last)
        assert (v.bad_findings, v.quiet_findings) == (1, 2)
        assert v.quiet_by == {"socket": 1, "pipe": 1}
        text = await at(pilot, app, app.frames.last)
        assert "3 shared/imported · 1 to look at" in text
        assert "2 other received fds held until exit: 1 pipe, 1 socket" in text
        assert re.search(r"⚠ fd-never-closed: pid \d+ fd 6 \(memfd\) held until exit", text)
        assert "⚠ fd-closed-by-exit" not in text
        # the timeline marks the one call with something to look at, named by it (] and [ go there)
        marked = [f.label for f in app.frames.frames if f.failed]
        assert len(marked) == 1 and marked[0].endswith("(fd-never-closed)"), marked


@pytest.mark.asyncio
async def test_a_thousand_shares_step_back_to_call_10_and_to_the_last():
    app = app_of("shares_1000")
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        await pilot.press("end")
        await pilot.pause()
        text = screen_text(app)
        total = app.frames.frames[-1].steps
        assert f"call {total}/{total}" in text and "1000 shared/imported" in text
        app.go(10)
        await pilot.pause()
        text = screen_text(app)
        assert f"REPLAY · call 10/{total}" in text
        v = programs(app, 10)
        assert v.calls_len == 10
        await pilot.press("left")
        await pilot.pause()
        assert f"REPLAY · call 9/{total}" in screen_text(app)
        await pilot.press("end")
        await pilot.pause()
        text = screen_text(app)
        assert f"call {total}/{total}" in text and "exited with code 0" in text


@pytest.mark.asyncio
async def test_a_process_that_exits_mid_trace():
    app = app_of("pidfd_refused")
    async with app.run_test(size=(160, 48)) as pilot:
        last = programs(app, app.frames.last)
        child = next(p for p in last.shown_procs() if p.ppid in last.procs)
        k = next(
            i for i in range(app.frames.last + 1) if not programs(app, i).proc(child.pid).alive
        )
        text = await at(pilot, app, k)
        assert re.search(r"exited with code 0 · \d+ calls", text) and "running ·" in text
        parent = programs(app, k).proc(child.ppid)
        assert parent.alive
        assert re.search(rf"fd {parent.fds and min(parent.fds)}\s+created memfd:refused", text)


def _expected(v: ProgramsView) -> list[str]:
    """What must be on screen: each shown process's fds of interest and its live memory rows."""
    out = []
    for p in v.shown_procs():
        for f in p.fds.values():
            if f.how in SHOWN_HOW:
                out.append(rf"fd {f.fd}\s+{f.how}")
        for m in p.mems.values():
            if m.kind in SHOWN_MEMS and m.released_at is None:
                size = f" {format_size(m.size)}" if m.size else ""
                out.append(re.escape(m.kind + size))
    return out


#: the smallest terminal with the most rows (two processes, a pool, imports) in the default run;
#: every road at every size in the slow tier
MATRIX = [
    pytest.param(name, size, marks=() if (name, size) == ("fake_pool_calls", (80, 24)) else slow)
    for name in ("scm_pair", "pidfd_pair", "made_and_sent", "fake_cuda_calls", "fake_pool_calls")
    for size in SIZES
]


@pytest.mark.asyncio
@pytest.mark.parametrize(
    ("name", "size"), MATRIX, ids=lambda x: x if isinstance(x, str) else f"{x[0]}x{x[1]}"
)
async def test_every_fd_and_allocation_is_on_screen_at_its_frames(name, size):
    app = app_of(name)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        frames = [
            k for k in range(app.frames.last + 1) if _expected(programs(app, k))
        ]  # the frames where something is held
        assert frames
        # every frame where what is held changes, and the last of them
        picked, before = [], None
        for k in frames:
            now = _expected(programs(app, k))
            if now != before:
                picked.append(k)
                before = now
        for k in picked[:12] + [frames[-1]]:
            text = await at(pilot, app, k)
            for pattern in _expected(programs(app, k)):
                assert re.search(pattern, text), f"frame {k} at {size}: no {pattern!r}"


@pytest.mark.asyncio
async def test_brackets_go_to_the_findings_of_a_trace():
    app = app_of("fake_pool_calls")
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        marked = [k for k, f in enumerate(app.timeline.frames) if f.failed]
        assert marked
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert app.frame == marked[0]
        assert "(" in app.timeline.frames[marked[0]].label  # the label names the finding's kind


def test_the_gallery_lists_a_trace_recording(tmp_path):
    import shutil

    from vmmtui.record.gallery import listing

    shutil.copy(TRACES / "pidfd_refused.jsonl.gz", tmp_path / "cpu-trace-pidfd-refused.jsonl.gz")
    text = listing(tmp_path)
    assert "a program traced (eBPF)" in text
    assert (
        "cpu-trace-pidfd-refused" in text
        and "trace of python3 tests/fixtures/pidfd_refused.py" in text
    )


@pytest.mark.asyncio
async def test_a_process_panel_takes_the_focus_and_sorts_its_memory():
    from vmmtui.tui.widgets.process_panel import ProcessPanel

    app = app_of("fake_pool_calls")
    async with app.run_test(size=(160, 48)) as pilot:
        before_exits = next(
            k
            for k in range(app.frames.last + 1)
            if programs(app, k).transfers_len == 3  # the pool and both pointers shared
        )
        await at(pilot, app, before_exits)
        await pilot.press("tab")
        await pilot.pause()
        panel = app.focused
        assert isinstance(panel, ProcessPanel)
        await pilot.press("o")
        await pilot.pause()
        assert panel.sort == "size" and "sorted by size" in screen_text(app)
        await pilot.press("o")
        await pilot.pause()
        assert panel.sort == "pins" and "sorted by pins" in screen_text(app)


@pytest.mark.asyncio
async def test_the_status_line_and_the_closing_line_give_one_count_of_calls():
    """The status line said "call 132/132" and the log "135 calls": the frames leave out closes of
    fds that never held a share, the tracer counts every call. The status line now says both, and
    the log's count is the one it says; its parts are separated by "·"."""
    app = app_of("scm_pair")
    async with app.run_test(size=(160, 48)) as pilot:
        text = await at(pilot, app, app.frames.last)
        logged = re.search(r"vmmtui trace: (\d+) calls in", text)
        status = re.search(r"REPLAY · call (\d+)/(\d+) · (\d+) traced · \d+ shared/imported", text)
        assert logged and status, text
        framed, traced = int(status.group(2)), int(status.group(3))
        assert traced == int(logged.group(1)) and framed < traced
        assert f"call {framed}/{framed}" in text  # the timeline's count is the frames'
    app = app_of("quick_share")  # no call left out: the frames' count alone
    async with app.run_test(size=(160, 48)) as pilot:
        text = await at(pilot, app, app.frames.last)
        assert "traced" not in text and re.search(r"REPLAY · call (\d+)/\1 · \d+ shared", text)
