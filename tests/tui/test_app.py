"""The inspector driven with Pilot on real memfd sessions: what the screen holds, and what is left."""

import asyncio
import os
import re
import time

import psutil
import pytest
from driving import MEMFD, make_app, step_to, text_of, wait_for

from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import build_plan
from vmmtui.system.fdtable import FdTable
from vmmtui.tui.app import InspectorApp
from vmmtui.tui.screens.scenarios import ScenarioScreen
from vmmtui.tui.widgets.fd_table import FdTableView
from vmmtui.tui.widgets.wire import VerdictsPanel, WirePanel

PLAN = build_plan()


@pytest.mark.asyncio
@pytest.mark.slow
async def test_stepping_to_the_end_shows_verified_fds_and_kcmp(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        export_index = PLAN.index(("producer", "export")) + 1
        await step_to(pilot, app, export_index)
        exported = app.panel("producer").worker_state.exported_fd  # what the worker reported
        producer_pid = app.session.workers["producer"].pid
        assert os.readlink(f"/proc/{producer_pid}/fd/{exported}").startswith("/memfd:")
        await step_to(pilot, app, PLAN.index(("consumer", "receive")) + 1)
        received = app.panel("consumer").worker_state.received_fd
        consumer_pid = app.session.workers["consumer"].pid
        # the fd tables on screen hold the numbers /proc shows for those pids
        prod_view = app.query_one("#producer-fds", FdTableView)
        cons_view = app.query_one("#consumer-fds", FdTableView)
        await wait_for(
            pilot,
            lambda: (
                cons_view.snapshot is not None
                and received in {r.fd for r in cons_view.snapshot.rows}
            ),
        )
        assert {r.fd for r in prod_view.snapshot.rows} == set(FdTable.read(producer_pid).entries)
        assert {r.fd for r in cons_view.snapshot.rows} == set(FdTable.read(consumer_pid).entries)
        screen_text = text_of(cons_view)
        assert f"≡ producer {exported}" in screen_text
        wire = text_of(app.query_one(WirePanel))
        assert (
            f"producer fd {exported} ≡ consumer fd {received}: same open file description" in wire
        )
        await pilot.press("r")
        await wait_for(pilot, lambda: app.session.finished and not app.busy)
        await pilot.pause(0.3)
        assert "PASSED 262144 integers verified" in text_of(app.query_one(VerdictsPanel))
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)
    assert os.listdir(tmp_path) == []
    for pid in (producer_pid, consumer_pid):
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.asyncio
@pytest.mark.slow
async def test_restart_and_quit_mid_step_leave_nothing(tmp_path):
    app = make_app(tmp_path)
    pids = []
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        await step_to(pilot, app, 5)
        first = app.session
        pids += [w.pid for w in first.workers.values()]
        await pilot.press("ctrl+r")
        await wait_for(
            pilot,
            lambda: app.session is not first and app.session is not None and app.session.started,
        )
        assert first.closed
        pids += [w.pid for w in app.session.workers.values()]
        await step_to(pilot, app, 3)
        await pilot.press("r")  # quit while the run is going
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)
    await asyncio.sleep(0.1)
    assert [n for n in os.listdir(tmp_path) if n.startswith("vmmtui-")] == []
    alive = [
        p
        for p in pids
        if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
    assert alive == []


@pytest.mark.asyncio
@pytest.mark.slow
async def test_worker_crash_is_shown_and_restart_recovers(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        await step_to(pilot, app, 2)
        victim = app.session.workers["consumer"]
        victim.proc.kill()
        await wait_for(pilot, lambda: victim.exited is not None)
        await pilot.pause(0.3)
        head = text_of(app.query_one("#consumer-head"))
        assert "killed by SIGKILL" in head
        await pilot.press("ctrl+r")
        await wait_for(
            pilot, lambda: app.session.started and app.session.workers["consumer"] is not victim
        )
        await pilot.press("r")
        await wait_for(pilot, lambda: app.session.finished and not app.busy)
        assert app.session.verified
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)
    assert [n for n in os.listdir(tmp_path) if n.startswith("vmmtui-")] == []


@pytest.mark.asyncio
@pytest.mark.slow
async def test_transcript_and_screenshots_are_written(tmp_path):
    shots = tmp_path / "shots"
    md = tmp_path / "t.md"
    app = make_app(tmp_path, screenshots=str(shots), transcript=str(md), autoplay=True, pace=0.25)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(
            pilot, lambda: app.session is not None and app.session.finished and not app.busy, 60
        )
        await pilot.pause(0.5)
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)
    text = md.read_text()
    assert (
        "Data verification PASSED" in text
        and "kcmp(KCMP_FILE)" in text
        and "Closed cleanly" in text
    )
    assert len(list(shots.glob("*.svg"))) >= len(PLAN)


def running_children() -> list[psutil.Process]:
    """This process's children still running: one that exited and awaits its reaping (an
    earlier test's) holds nothing."""
    out = []
    for c in psutil.Process().children(recursive=True):
        try:
            if c.status() != psutil.STATUS_ZOMBIE:
                out.append(c)
        except psutil.NoSuchProcess:
            pass
    return out


@pytest.mark.asyncio
@pytest.mark.slow
@pytest.mark.serial  # its workers gone within 5 s
async def test_scenario_picker_runs_a_failure_and_shows_its_outcome(tmp_path):
    from textual.widgets import OptionList

    from vmmtui.tui.widgets.teaching import TeachingPanel

    app = make_app(tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        first = app.session
        await pilot.press("c")
        await wait_for(pilot, lambda: isinstance(app.screen, ScenarioScreen))
        picker = app.screen.query_one(OptionList)
        assert picker.get_option(
            "out-of-memory"
        ).disabled  # memfd cannot show it, and the list says why
        picker.highlighted = picker.get_option_index("leaked-fd")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.session is not first and app.session.started)
        assert app.session.config.scenario == "leaked-fd" and "scenario leaked-fd" in app.sub_title
        await pilot.press("r")
        await wait_for(pilot, lambda: app.session.outcome is not None and not app.busy)
        await pilot.pause(0.3)
        assert app.session.outcome.as_expected
        teaching = text_of(app.query_one(TeachingPanel))
        assert "FD_LEAK" in teaching and "/memfd:vmmtui-alloc" in teaching
        assert "as expected" in text_of(app.query_one("#status"))
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)
    assert [n for n in os.listdir(tmp_path) if n.startswith("vmmtui-")] == []
    # the producer's reaper ends once it has seen the producer go: give it a moment
    deadline = time.monotonic() + 5
    while running_children() and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert not running_children()


@pytest.mark.asyncio
@pytest.mark.slow
async def test_four_consumers_get_a_tab_each_with_their_own_fd_table_and_kcmp(tmp_path):
    config = SessionConfig(
        backend="memfd",
        size=1 << 20,
        tmpdir=str(tmp_path),
        consumers=4,
        direction="consumer-writes",
    )
    app = InspectorApp(config, MEMFD)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        await pilot.press("r")
        await wait_for(pilot, lambda: app.session.stopped and not app.busy, timeout=60)
        await pilot.pause(0.3)
        assert app.session.verified and app.session.failure is None
        names = [f"consumer-{k}" for k in range(1, 5)]
        for name in names:
            panel = app.panel(name)
            assert panel.results and all(ok for ok, _ in panel.results.values()), name
            assert "writes" in text_of(panel.query_one(f"#{name}-card"))
            assert app.query_one(f"#{name}-fds", FdTableView).panel.kcmp.consumer == name
        wire = text_of(app.query_one(WirePanel))
        # every pair closed at its consumer's cleanup: what kcmp found, and when
        assert (
            "4/4 consumers' fds were the producer's open file description (before cleanup)"
            in " ".join(wire.split())
        )
        assert "4/4 consumers acknowledged" in wire
        pids = [app.session.workers[n].pid for n in names]
        await pilot.press("c")  # scenarios need one consumer: the picker says so instead of opening
        await pilot.pause(0.2)
        assert not isinstance(app.screen, ScenarioScreen)
    assert not [
        p
        for p in pids
        if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]


@pytest.mark.asyncio
async def test_keys_pressed_during_a_step_are_queued_on_screen_and_none_is_lost(tmp_path):
    app = make_app(tmp_path)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        for _ in range(8):  # eight presses faster than a step: as a key held down does
            app.action_step()
        assert app.busy and app.queued == 7
        assert "7 key(s) queued" in text_of(app.query_one("#status"))
        await wait_for(pilot, lambda: app.session is not None and app.session.position == 8)
        await wait_for(pilot, lambda: not app.busy and app.queued == 0)
        await pilot.pause(0.3)
        assert app.session.position == 8  # 8 presses, 8 steps
        assert "queued" not in text_of(app.query_one("#status"))
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)


@pytest.mark.asyncio
@pytest.mark.slow
async def test_each_frame_keeps_the_fd_tables_read_between_its_step_and_the_next(tmp_path):
    """A live read made while the next step ran belongs to no frame (it showed the consumer's
    socket and memfds closed at the step before its cleanup)."""
    from vmmtui.stream.events import FdSnapshot, StepDone

    app = make_app(tmp_path, autoplay=True, pace=0.25)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.finished, 90)
        await wait_for(pilot, lambda: not app.busy)
        timeline = app.timeline
        for k, frame in enumerate(timeline.frames[1:], start=1):
            events = timeline.events[timeline.frames[k - 1].end : frame.end]
            done = next((i for i, e in enumerate(events) if isinstance(e, StepDone)), None)
            if done is None:
                continue
            after: dict[str, set[int]] = {}
            for e in events[done:]:
                if isinstance(e, FdSnapshot):
                    fds = {r.fd for r in e.rows}
                    assert after.setdefault(e.role, fds) == fds, (frame.label, e.role)
            state = app.frames.at(k)
            for role, fds in after.items():
                assert {r.fd for r in state.panel(role).fds.rows} == fds, (frame.label, role)
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)


@pytest.mark.asyncio
@pytest.mark.parametrize("size", [(120, 40), (100, 30), (80, 24), (200, 60)])
@pytest.mark.slow
async def test_every_size_shows_each_workers_own_fds_the_exported_and_received_first(
    tmp_path, size
):
    """At 120x40 the mapping card once pushed the producer's fd table below its border: the
    exported memfd (fd 6) was held in /proc and its number nowhere on screen."""
    from vmmtui.tui.cast import plain, screen_ansi

    app = make_app(tmp_path)
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        await step_to(pilot, app, PLAN.index(("consumer", "receive")) + 1)
        screen = plain(screen_ansi(app))
        state = app.frames.latest()
        for role in ("producer", "consumer"):
            view = app.query_one(f"#{role}-fds", FdTableView)
            panel = app.panel(role)
            ours = [r for r in state.panel(role).fds.rows if r.check is not None]
            assert ours
            # the table is inside its panel, tall enough for its header and every declared fd
            assert panel.content_region.contains_region(view.region), (role, view.region)
            assert view.region.height >= len(ours) + 1, (role, view.region)
        exported = state.panel("producer").worker_state.exported_fd
        received = state.panel("consumer").worker_state.received_fd
        # both numbers on screen, each in its table's row with the memfd it is
        assert re.search(rf"│\s+{exported}\s+/memfd:", screen), screen
        assert re.search(rf"│\s+{received}\s+/memfd:.*≡ producer", screen), screen
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)


@pytest.mark.asyncio
@pytest.mark.slow
async def test_after_producer_dies_the_closing_text_says_the_kernel_released_its_resources(
    tmp_path,
):
    """The producer is SIGKILLed after send (a real kill): it released nothing in reverse order."""
    from vmmtui.tui.widgets.teaching import TeachingPanel

    app = InspectorApp(
        SessionConfig(
            backend="memfd", size=1 << 20, tmpdir=str(tmp_path), scenario="producer-dies"
        ),
        MEMFD,
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        await pilot.press("r")
        await wait_for(pilot, lambda: app.session.finished and not app.busy)
        await pilot.pause(0.3)
        teaching = " ".join(text_of(app.query_one(TeachingPanel)).split())
        assert "every resource was released in reverse order" not in teaching
        assert "The producer ran no cleanup: the kernel released what it held" in teaching
        assert "the consumer released its own in reverse order" in teaching
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)


@pytest.mark.asyncio
async def test_stable_mode_masks_pids_and_addresses_in_failure_text(tmp_path):
    """A worker really killed (SIGKILL at its fill step): the failure box and the log name no pid."""
    from vmmtui.tui.widgets.event_log import EventLog
    from vmmtui.tui.widgets.teaching import TeachingPanel

    app = InspectorApp(
        SessionConfig(
            backend="memfd", size=1 << 20, tmpdir=str(tmp_path), crash="producer:fill:kill"
        ),
        MEMFD,
        stable=True,
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        pids = [str(w.pid) for w in app.session.workers.values()]
        await pilot.press("r")
        await wait_for(pilot, lambda: app.session.failure is not None and not app.busy)
        await pilot.pause(0.3)
        teaching = text_of(app.query_one(TeachingPanel))
        log = "\n".join(s.text for s in app.query_one(EventLog).lines)
        assert "WORKER_DIED" in teaching and "pid …" in teaching, teaching
        for text in (teaching, log):
            assert not [p for p in pids if re.search(rf"\b{p}\b", text)], text
            assert not re.search(r"0x[0-9a-f]{5,}", text), text
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)


@pytest.mark.asyncio
async def test_space_past_the_end_says_so_once_while_it_shows(tmp_path):
    """The plan's end is one toast however often space is pressed: stacked copies covered the
    verdict at 80x24 (seen in tmux)."""
    app = make_app(tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: app.session is not None and app.session.started)
        await pilot.press("r")
        await wait_for(pilot, lambda: app.session.finished and not app.busy)
        for _ in range(4):
            await pilot.press("space")
            await pilot.pause(0.05)
        ended = [n for n in app._notifications if "plan has ended" in str(n.message)]
        assert len(ended) == 1
        await pilot.press("q")
        await wait_for(pilot, lambda: app.session.closed and app.return_code is not None)
    assert os.listdir(tmp_path) == []
