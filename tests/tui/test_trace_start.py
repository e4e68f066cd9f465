"""A trace starts in one place: the text trace and the inspector both start their source through
the pipeline's ``TraceRequest.start`` (eBPF, or polling where asked or where the kernel refuses
the probes), the inspector in its own thread after its first frame."""

import sys
import threading

import pytest

pytest.importorskip("textual", reason="the view needs textual (not on the GPU image)")

from tests.tui.driving import wait_for  # noqa: E402
from vmmtui.cli import main  # noqa: E402
from vmmtui.pipeline.session import TraceRequest  # noqa: E402


@pytest.fixture
def starts(monkeypatch):
    """Every TraceRequest.start: the request, the thread it ran in and the source it made."""
    calls: list[tuple[TraceRequest, str, object]] = []
    real = TraceRequest.start

    def spy(self, stdout=None):
        started = real(self, stdout=stdout)
        calls.append((self, threading.current_thread().name, started[0]))
        return started

    monkeypatch.setattr(TraceRequest, "start", spy)
    return calls


@pytest.mark.asyncio
async def test_the_text_trace_and_the_inspector_start_through_the_same_function(starts, capsys):
    from vmmtui.tui.trace import TraceApp

    code = main(["trace", "--poll", "--text", "--", sys.executable, "-c", "pass"])
    assert code == 0, capsys.readouterr()
    [(text, _, source)] = starts
    assert text.command[1:] == ("-c", "pass") and text.poll
    assert source.exit is not None and source.exit.status == 0
    starts.clear()

    request = TraceRequest((sys.executable, "-c", "import sys; sys.exit(3)"), poll=True)
    app = TraceApp(start=lambda: request.start())
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.ended, timeout=30)
        [(asked, thread, source)] = starts
        assert asked is request and thread == "vmmtui-trace"  # after the first frame, not in it
        assert app.tracer is source and app.tracer.exit is not None
        assert app.tracer.exit.status == 3 and not app.error
        await pilot.press("q")


@pytest.mark.asyncio
async def test_a_command_the_inspector_cannot_start_ends_it_with_one_line_and_127(starts):
    from vmmtui.tui.trace import TraceApp

    request = TraceRequest(("vmmtui-no-such-command",), poll=True)
    app = TraceApp(start=lambda: request.start())
    async with app.run_test(size=(120, 36)) as pilot:
        await wait_for(pilot, lambda: app.ended, timeout=30)
        assert app.code == 127 and "vmmtui-no-such-command" in app.error
        assert "\n" not in app.error and app.tracer is None and not starts
        await pilot.press("q")
