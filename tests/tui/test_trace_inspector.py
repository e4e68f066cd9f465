"""The inspector on recorded traces of real programs (tests/data/traces, recorded with
``vmmtui trace --record`` of the fixtures): the same screen as the demo's, a panel per process,
the wire, the verdicts; the frames are the calls. Assertions are on the rendered screen's text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from driving import text_of

from tests.commands import screen_text
from vmmtui.pipeline.replay import read
from vmmtui.stream.sizes import format_size
from vmmtui.tui.replay import ReplayApp
from vmmtui.tui.widgets.wire import WirePanel
from vmmtui.view.programs import ProgramsView

TRACES = Path(__file__).parent.parent / "data" / "traces"
SIZES = [(80, 24), (120, 40), (160, 48)]
slow = pytest.mark.slow
#: the fds each process must show where they exist (how they came to it)
SHOWN_HOW = ("created", "exported", "received", "taken")
SHOWN_MEMS = ("allocation", "pool", "import", "pool import", "mapping")


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
async def test_a_kept_memfd_socket_and_pipe_are_facts_released_by_the_exit():
    """keeps_received: the receiver exits holding a socket, a pipe and a memfd. The exit released
    all three (``model/policy.py``): nothing to look at, the memfd counted as memory held until
    exit, the socket and the pipe by their kind, all in one dim line of facts; no call of the
    timeline is marked."""
    app = app_of("keeps_received")
    async with app.run_test(size=(160, 48)) as pilot:
        v = programs(app, app.frames.last)
        assert (v.bad_findings, v.quiet_findings) == (0, 3)
        assert v.quiet_by == {"socket": 1, "pipe": 1, "held until exit": 1}
        text = await at(pilot, app, app.frames.last)
        assert re.search(r"3 shared/imported[^·\n]* · nothing wrong", text), text
        assert "1 held until exit, released by it" in text
        assert "2 other received fds held until exit: 1 pipe, 1 socket" in text
        assert "⚠ fd-never-closed" not in text and "⚠ fd-closed-by-exit" not in text
        assert not [f.label for f in app.frames.frames if f.failed]


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
    """The status line said "call 132/132 · 135 traced" beside the log's "135 calls": two totals
    that read as two answers. The frames leave out closes of fds that never held a share, the
    tracer counts every call: the status line now counts the frames once and says how many calls
    it left out and which, and the two add up to the log's count."""
    app = app_of("scm_pair")
    async with app.run_test(size=(160, 48)) as pilot:
        text = await at(pilot, app, app.frames.last)
        logged = re.search(r"vmmtui trace: (\d+) calls in", text)
        status = re.search(
            r"REPLAY · call (\d+)/(\d+) · \d+ shared/imported · \d+ to look at · \+(\d+) calls not "
            r"drawn: close_range on fds with nothing shared",
            text,
        )
        assert logged and status, text
        framed, left_out = int(status.group(2)), int(status.group(3))
        assert framed + left_out == int(logged.group(1))
        assert "traced ·" not in text and f"call {framed}/{framed}" in text  # the timeline's too
        await at(pilot, app, 5)  # any frame: the same calls are left out
        assert f"· +{left_out} calls not drawn" in screen_text(app)
        assert f"REPLAY · call 5/{framed} ·" in screen_text(app)
    app = app_of("quick_share")  # no call left out: the frames' count alone
    async with app.run_test(size=(160, 48)) as pilot:
        text = await at(pilot, app, app.frames.last)
        assert "not drawn" not in text and re.search(r"REPLAY · call (\d+)/\1 · \d+ shared", text)


@pytest.mark.asyncio
async def test_a_process_panel_cut_short_says_what_it_left_out():
    """At 80x24 a panel showed its 6 last calls under "── last calls" beside "21 calls" on its
    border, and rows past its height went without a sign: each cut now says what it left out."""
    from vmmtui.tui.widgets.programs import program_rows

    app = app_of("scm_pair")
    async with app.run_test(size=(80, 24)) as pilot:
        text = await at(pilot, app, app.frames.last)
        v = programs(app, app.frames.last)
        p = max(v.shown_procs(), key=lambda p: p.ncalls)
        assert p.ncalls == 21 and "· 21 calls" in text
        shown = re.search(r"── last (\d+) of 21 calls", text)
        assert shown and 0 < int(shown.group(1)) < 21, text
    closed = len(p.closed)
    assert closed == 2 and not p.fds and not p.mems  # the memfd and its dup, both closed
    rows = lambda h: program_rows(v, p, "time", h).plain.splitlines()  # noqa: E731
    assert rows(1) == ["+2 more: 2 closed fd"]
    assert rows(2)[-1].startswith("fd 5") and len(rows(2)) == 2  # the rows fit, the border counts
    assert rows(3)[-1] == "── 21 calls, not shown here (the event log has them)"
    assert rows(6)[2:] == ["── last 3 of 21 calls", *rows(6)[3:]] and len(rows(6)) == 6
    assert rows(40)[2] == "── last calls" and len(rows(40)) == 3 + 21


@pytest.mark.asyncio
@pytest.mark.parametrize("size", SIZES)
async def test_the_wire_counts_every_transfer_it_folds(size):
    """At 80x24 the wire said "… 2 earlier" above 3 of nginx's 6 transfers: the fold line's own
    row was taken from the transfers shown and not counted. Shown and folded now add up."""
    app = app_of("shares_1000")
    async with app.run_test(size=size) as pilot:
        for frame in (app.frames.last, app.frames.last // 2, 12):
            await at(pilot, app, frame)
            n = programs(app, frame).transfers_len
            wire = app.query_one(WirePanel)
            lines = text_of(wire).splitlines()
            folded = re.match(r"… (\d+) earlier", lines[0].strip())
            shown = sum(1 for line in lines if re.match(r"\s*\d+\.\d{4} ", line))
            assert (int(folded.group(1)) if folded else 0) + shown == n, (size, frame, lines)
            assert "earlier" not in text_of(wire) or folded


@pytest.mark.asyncio
async def test_a_panel_with_one_call_says_one_call():
    """A process's border said "running · 1 calls"."""
    app = app_of("scm_pair")
    async with app.run_test(size=(160, 48)) as pilot:
        text = await at(pilot, app, 1)
        assert [p.ncalls for p in programs(app, 1).shown_procs()] == [1]
        assert "· 1 call ─" in text and "1 calls" not in text, text


@pytest.mark.asyncio
@pytest.mark.parametrize("size", SIZES)
async def test_the_verdicts_count_the_findings_they_leave_out(size):
    """The verdicts ended in "… older findings" with no count beside "3 to look at": the findings
    drawn and the count of the rest now add up to it at every size."""
    from vmmtui.tui.widgets.wire import VerdictsPanel

    app = app_of("fake_pool_calls")
    async with app.run_test(size=size) as pilot:
        text = await at(pilot, app, app.frames.last)
        # one problem (the pool held after its exporter died); the pool and its pointer kept to
        # the importer's exit are facts (``model/policy.py``)
        nbad = len(programs(app, app.frames.last).problems)
        assert nbad == 1 and "· 1 to look at" in text
        lines = text_of(app.query_one(VerdictsPanel)).splitlines()
        drawn = sum(1 for line in lines if re.match(r"[⚠✗] [a-z-]+: pid", line))
        more = re.search(r"… \+(\d+) more to look at: / searches the log", "\n".join(lines))
        assert drawn >= 1 and drawn + (int(more.group(1)) if more else 0) == nbad, (size, lines)
        assert "older findings" not in text
