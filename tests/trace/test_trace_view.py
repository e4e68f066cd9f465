"""The attach view shows the eBPF trace live: a real SCM_RIGHTS share appears in its trace panel
with the ledger's verdict while the program runs (root, BTF and libbpf; skipped elsewhere)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("textual", reason="the view needs textual (not on the GPU image)")

from tests.tui.driving import wait_for  # noqa: E402


def text_of(log) -> str:
    return "\n".join("".join(seg.text for seg in strip) for strip in log.lines)


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.mark.asyncio
async def test_the_view_shows_a_share_as_it_happens():
    from vmmtui.trace.loader import ProbeUnavailable, why_not

    if reason := why_not():
        pytest.skip(f"eBPF unavailable: {reason}")
    from vmmtui.trace.tracer import Tracer
    from vmmtui.tui.attach import AttachApp

    proc = subprocess.Popen(
        [sys.executable, str(FIXTURES / "scm_pair.py")],
        env={**os.environ, "FIXTURE_HOLD": "3.0"},
        stdout=subprocess.DEVNULL,
    )
    try:
        tracer = Tracer(pids=[proc.pid], cuda=False)
        try:
            tracer.start()
        except ProbeUnavailable as exc:
            pytest.skip(f"eBPF unavailable: {exc}")
        app = AttachApp([proc.pid], trace=tracer)
        async with app.run_test(size=(160, 48)) as pilot:
            log = app.query_one("#trace")
            await wait_for(pilot, lambda: "✓ shared" in text_of(log), timeout=30)
            text = text_of(log)
            assert 'memfd_create("fixture-scm")' in text and "sendmsg over unix socket" in text
            assert f"pid {proc.pid}'s fd" in text
        assert tracer.finished.wait(5)  # leaving the view ended the trace and closed the probe
        assert tracer.probe is None
    finally:
        proc.kill()
        proc.wait()
