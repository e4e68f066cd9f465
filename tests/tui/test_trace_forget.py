"""The live trace inspector, past the events it keeps to step back through: it forgets the
oldest frames, says so on its status line, keeps every count whole, and steps back to the first
frame it kept."""

import pytest

pytest.importorskip("textual", reason="the view needs textual (not on the GPU image)")

from tests.model.test_kept import shares  # noqa: E402
from tests.trace.test_trace_view import screen_text  # noqa: E402
from tests.tui.driving import wait_for  # noqa: E402
from vmmtui.pipeline.session import RecordingSource  # noqa: E402
from vmmtui.stream.observed import TraceFinished, TraceStarted  # noqa: E402


@pytest.mark.asyncio
async def test_a_long_trace_forgets_its_oldest_frames_and_says_so(monkeypatch):
    from vmmtui.tui import trace

    monkeypatch.setattr(trace, "MAX_EVENTS", 3000)
    monkeypatch.setattr(trace, "KEEP_EVENTS", 1500)
    n = 1200  # shares: 6,000 calls, 7,200 events with their findings
    source = RecordingSource(
        [
            TraceStarted("ebpf", [1000], ["load"], ktime0=10**12),
            *shares(n),
            TraceFinished(["load"], 0, None, 5 * n, 0, 1.0),
        ]
    )
    app = trace.TraceApp(source)
    async with app.run_test(size=(160, 48)) as pilot:

        def done() -> bool:
            return app.ended and app.live_to == len(app.timeline.events) and app.live_to > 0

        await wait_for(pilot, done, timeout=60)
        await pilot.pause(0.2)
        dropped = app.timeline.dropped
        assert dropped > 0 and len(app.timeline.events) <= 3000 + 4096
        v = app.state_shown().programs
        assert v is not None and v.transfers_len == n and v.findings_len == n
        assert app.frames.frames[-1].steps == 5 * n
        said = f"… {dropped} older calls not kept (--record FILE keeps every call)"
        assert said in app.where()
        assert said in screen_text(app)
        assert f"{n} shared" in screen_text(app)  # the verdicts' count is whole
        await pilot.press("home")  # the first frame kept: the call after those forgotten
        await pilot.pause(0.2)
        assert app.shown == 0
        assert f"AS OF CALL {dropped} of {5 * n}" in app.where()
        v = app.state_shown().programs
        assert v is not None and 0 < v.transfers_len < n
        await pilot.press("q")
