"""Layout snapshots at 80x24 (compact) and 160x48, on memfd, with volatile values masked (--stable)."""

import pytest

from vmmtui.backends import Choice
from vmmtui.plan.config import SessionConfig
from vmmtui.plan.steps import build_plan
from vmmtui.tui.app import InspectorApp

PLAN = build_plan()
MEMFD = Choice("memfd", "memfd backend requested (CPU memory, not GPU memory)")


def stable_app():
    return InspectorApp(SessionConfig(backend="memfd", size=1 << 20), MEMFD, stable=True)


def stepper(upto: int):
    async def run_before(pilot):
        app = pilot.app
        for _ in range(600):
            if app.session is not None and app.session.started:
                break
            await pilot.pause(0.05)
        while app.session.position < upto:
            before = app.session.position
            await pilot.press("space")
            for _ in range(600):
                if app.session.position > before and not app.busy:
                    break
                await pilot.pause(0.05)
        await pilot.pause(0.6)

    return run_before


def test_compact_80x24_after_the_fd_arrived(snap_compare):
    assert snap_compare(
        stable_app(),
        terminal_size=(80, 24),
        run_before=stepper(PLAN.index(("consumer", "receive")) + 1),
    )


@pytest.mark.slow
def test_large_160x48_after_the_map_step_shows_both_mapping_cards(snap_compare):
    assert snap_compare(
        stable_app(),
        terminal_size=(160, 48),
        run_before=stepper(PLAN.index(("consumer", "map")) + 1),
    )


@pytest.mark.slow
def test_compact_80x24_after_the_map_step(snap_compare):
    assert snap_compare(
        stable_app(),
        terminal_size=(80, 24),
        run_before=stepper(PLAN.index(("consumer", "map")) + 1),
    )


@pytest.mark.slow
def test_large_160x48_verified(snap_compare):
    assert snap_compare(
        stable_app(),
        terminal_size=(160, 48),
        run_before=stepper(PLAN.index(("producer", "wait_ack")) + 1),
    )


def test_scenario_picker_80x24(snap_compare):
    async def open_picker(pilot):
        for _ in range(600):
            if pilot.app.session is not None and pilot.app.session.started:
                break
            await pilot.pause(0.05)
        await pilot.press("c")
        await pilot.pause(0.5)

    assert snap_compare(stable_app(), terminal_size=(80, 24), run_before=open_picker)


@pytest.mark.slow
def test_medium_120x40_after_the_fd_arrived_shows_both_fd_tables(snap_compare):
    assert snap_compare(
        stable_app(),
        terminal_size=(120, 40),
        run_before=stepper(PLAN.index(("consumer", "receive")) + 1),
    )


@pytest.mark.slow
def test_compact_100x30_after_the_fd_arrived_shows_both_fd_tables(snap_compare):
    assert snap_compare(
        stable_app(),
        terminal_size=(100, 30),
        run_before=stepper(PLAN.index(("consumer", "receive")) + 1),
    )
