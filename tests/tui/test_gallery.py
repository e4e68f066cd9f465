"""Every recording in the gallery (the H100's and the memfd one) replays frame by frame to its end
on a machine without a GPU, and its last frame says what the run showed."""

import html

import pytest
from driving import text_of

from vmmtui.record import gallery
from vmmtui.stream.events import ScenarioOutcome, SessionFinished
from vmmtui.tui.replay import ReplayApp
from vmmtui.tui.widgets.status import StatusLine
from vmmtui.tui.widgets.wire import VerdictsPanel

#: the slow tier: left out of the default run (README), run by .ci/run after it
pytestmark = pytest.mark.slow

ENTRIES = gallery.entries()


def test_the_gallery_holds_the_h100_recordings_with_their_driver():
    h100 = [e for e in ENTRIES if e.name.startswith("h100-")]
    assert len(h100) >= 17
    for e in h100:
        assert e.header.device == "NVIDIA H100 80GB HBM3" and e.header.date.startswith("2026-")
        if e.header.backend == "trace":  # a program traced there: the driver's version
            assert e.header.driver == "580.159.04", e.name
            continue
        assert e.header.backend == "cuda"
        assert e.header.driver.startswith("CUDA driver API")


#: what each H100 trace in the gallery must show on its last frame (the ledger's verdicts)
TRACE_FINDINGS = {
    "h100-trace-torch-default": ["shared/imported"],
    "h100-trace-torch-expandable": ["shared/imported", "pidfd_getfd"],
    "h100-trace-torch-kill-exporter": ["held-after-exporter-died"],
    "h100-trace-pidfd-refused": ["refused", "EPERM"],
    "h100-trace-vmmtui-run": ["shared/imported"],
}


@pytest.mark.asyncio
@pytest.mark.parametrize("entry", ENTRIES, ids=[e.name for e in ENTRIES])
async def test_each_gallery_recording_replays_to_its_end(entry):
    rec = gallery.resolve(entry.name)
    app = ReplayApp(rec)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        for k in range(1, len(app.timeline)):  # every frame drawn in turn (painted at the end)
            app.action_step()
            assert app.frame == k
        await pilot.pause()
        if rec.header.backend == "trace":  # a program traced: its findings on the last frame
            assert app.frame == len(app.timeline) - 1
            screen = html.unescape(app.export_screenshot()).replace("\xa0", " ")
            for kind in TRACE_FINDINGS[entry.name]:
                assert kind in screen, (entry.name, kind)
            return
        assert "the end" in app.sub_title
        status = text_of(app.query_one(StatusLine))
        outcome = next((e for e in rec.events if isinstance(e, ScenarioOutcome)), None)
        if outcome is None:  # a run that should verify: the panel and the status say PASSED
            finished = next(e for e in rec.events if isinstance(e, SessionFinished))
            assert finished.verified
            assert "PASSED" in text_of(app.query_one(VerdictsPanel)), entry.name
        else:  # a failure scenario: it failed as it promised, and the status line says so
            assert outcome.as_expected, entry.name
            assert f"scenario {outcome.name}: ended with {outcome.outcome}" in status, status
            assert status.rstrip().endswith("as expected"), status
