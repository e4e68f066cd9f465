"""The trace inspector shows the eBPF trace live: a real SCM_RIGHTS share between processes it
was attached to (``trace -p``) appears on its panels, wire and verdicts while the program runs
(root, BTF and libbpf; skipped elsewhere)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("textual", reason="the view needs textual (not on the GPU image)")

from tests.commands import screen_text
from tests.tui.driving import wait_for  # noqa: E402

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.asyncio
@pytest.mark.slow
async def test_the_view_shows_a_share_as_it_happens(ebpf):
    from vmmtui.trace.loader import ProbeUnavailable
    from vmmtui.trace.tracer import Tracer
    from vmmtui.tui.trace import TraceApp

    proc = subprocess.Popen(
        [sys.executable, str(FIXTURES / "scm_pair.py")],
        env={**os.environ, "FIXTURE_HOLD": "8.0"},
        stdout=subprocess.DEVNULL,
    )
    try:
        tracer = Tracer(pids=[proc.pid], cuda=False)
        try:
            tracer.start()
        except ProbeUnavailable as exc:
            pytest.skip(f"eBPF unavailable: {exc}")
        app = TraceApp(tracer)
        async with app.run_test(size=(160, 48)) as pilot:

            def shared() -> bool:
                v = app.state_shown().programs
                return v is not None and v.transfers_len > 0

            await wait_for(pilot, shared, timeout=120)
            await pilot.pause(0.3)
            text = screen_text(app)
            # made before the probes were attached (they load in seconds), or seen made
            assert re.search(r"fd 4\s+(created memfd:fixture-scm|sent)", text)
            assert re.search(rf"fd 3\s+received( memfd:fixture-scm)? ← {proc.pid} fd 4", text)
            assert f"SCM_RIGHTS {proc.pid} fd 4 →" in text and "1 shared/imported" in text
            assert "LIVE · call" in text
            await pilot.press("q")
        assert tracer.finished.wait(5)  # leaving the view ended the trace and closed the probe
        assert tracer.probe is None
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.asyncio
@pytest.mark.slow
async def test_the_commands_output_and_its_traceback_are_on_a_key(ebpf):
    """trace -- CMD under the inspector: what the program writes is kept (not on the screen the
    inspector draws), shown on O while it runs and after it died of an exception."""
    from vmmtui.trace.loader import ProbeUnavailable
    from vmmtui.trace.output import Output
    from vmmtui.trace.tracer import Tracer
    from vmmtui.tui.screens.output import OutputScreen
    from vmmtui.tui.trace import TraceApp

    output = Output()
    talks = [sys.executable, str(FIXTURES / "talks.py"), "--hold", "1.5", "--raise"]
    tracer = Tracer(command=talks, cuda=False, stdout=output)
    try:
        tracer.start()
    except ProbeUnavailable as exc:
        pytest.skip(f"eBPF unavailable: {exc}")
    app = TraceApp(tracer, output=output)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: "hello on stdout" in output.kept().text(), timeout=60)
        await pilot.press("O")
        await wait_for(pilot, lambda: isinstance(app.screen, OutputScreen), timeout=30)
        await wait_for(pilot, lambda: "talks: a warning on stderr" in screen_text(app), timeout=30)
        text = screen_text(app)
        assert "talks: hello on stdout" in text and "talks: a warning on stderr" in text
        assert re.search(r"\(still\W+running\)", text)
        await wait_for(pilot, lambda: app.ended, timeout=60)
        # the pane repaints what came since: the traceback and "(ended)", however loaded the machine
        await wait_for(
            pilot,
            lambda: (
                "RuntimeError: talks: something went wrong" in screen_text(app)
                and "(ended)" in screen_text(app)
            ),
            timeout=30,
        )
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, OutputScreen)
        await pilot.press("q")
    assert tracer.exit is not None and tracer.exit.code == 1
