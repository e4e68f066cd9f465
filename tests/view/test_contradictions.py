"""What a failed session shows agrees with itself: the step that failed is ✗ (not ✓ under a FAILED
banner), a leaked fd is not ✓, a failed run has one step total, and the gallery names each
recording's mechanism and machine as they were."""

import asyncio

from vmmtui.record import gallery
from vmmtui.record.gallery import listing
from vmmtui.stream.events import FdCheck
from vmmtui.tui.replay import ReplayApp
from vmmtui.view import fold


def test_a_leak_found_after_cleanup_fails_the_cleanup_step_and_marks_the_fd():
    """leaked-fd showed "✓ Clean up" and "10/10" under "FAILED: consumer · cleanup", fd 38 ✓."""
    rec = gallery.resolve("h100-scenario-leaked-fd")
    state = fold(rec.events)
    consumer = state.panel("consumer")
    assert state.failure is not None and state.failure[:2] == ("consumer", "cleanup")
    assert consumer.results["cleanup"][0] is False
    assert sum(ok for ok, _ in consumer.results.values()) == len(consumer.results) - 1
    rows = {r.fd: r.check for r in consumer.fds.rows}
    assert rows[38] == FdCheck.LEAKED and rows[3] == FdCheck.OK  # the control channel is no leak


def test_the_replay_of_a_leak_draws_the_cleanup_and_the_fd_as_failed():
    from vmmtui.tui.cast import plain, screen_ansi

    async def screen() -> str:
        app = ReplayApp(gallery.resolve("h100-scenario-leaked-fd"))
        async with app.run_test(size=(160, 48)) as pilot:
            app.go(app.frames.last)
            await pilot.pause()
            await pilot.pause()
            return plain(screen_ansi(app))

    text = asyncio.run(screen())
    assert "✗ Clean up (consumer)" in text and "✓ Clean up (consumer)" not in text, text
    assert "9/10 steps" in text and "10/10" not in text
    assert "LEAKED" in text


def test_a_failed_legacy_scenario_has_one_step_total():
    """legacy-second-context showed "step 12/12", "(of 12)" and "12/17"."""
    from vmmtui.tui.cast import plain, screen_ansi

    async def screen() -> str:
        app = ReplayApp(gallery.resolve("h100-scenario-legacy-second-context"))
        async with app.run_test(size=(160, 48)) as pilot:
            app.go(app.frames.last)
            await pilot.pause()
            await pilot.pause()
            return plain(screen_ansi(app)) + app.sub_title

    text = asyncio.run(screen())
    import re

    totals = set(re.findall(r"step \d+/(\d+)", text)) | set(re.findall(r"\(of (\d+)\)", text))
    assert totals == {"17"}, (totals, text)


def test_the_gallery_names_each_recordings_mechanism_and_machine():
    text = listing()
    lines = {line.split()[0]: line for line in text.splitlines() if line.startswith("  ")}
    assert "legacy · " in lines["h100-scenario-legacy-second-context"]
    assert "pool · " in lines["h100-scenario-pool-no-handle-type"]
    assert "memfd · " in lines["cpu-memfd-1mib"]
    assert " on vm" not in text and "NVIDIA H100 80GB HBM3 · Intel Xeon host" in text
