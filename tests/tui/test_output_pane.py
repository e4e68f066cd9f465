"""The traced command's output pane (``O``): a command whose streams end before the tracer has
reaped it (its exit closes them first) is shown as ended once it is, although nothing more was
written."""

import subprocess
import sys

import pytest
from textual.app import App

from tests.tui.driving import wait_for
from vmmtui.trace.output import Output
from vmmtui.tui.screens.output import REFRESH_S, OutputScreen

TALKER = "import sys; print('last words'); sys.stdout.flush(); sys.stdin.read()"


def pane_text(app: App) -> str:
    return "\n".join(str(w.render()) for w in app.screen.query("Static"))


@pytest.mark.asyncio
async def test_the_pane_says_ended_when_the_command_ends_after_its_last_line():
    output = Output()
    out, err = output.child_fds()
    proc = subprocess.Popen(
        [sys.executable, "-c", TALKER], stdin=subprocess.PIPE, stdout=out, stderr=err
    )
    output.started()
    reaped = {
        "yet": False
    }  # the tracer's word on the command: it learns of the exit after the streams end
    app = App()
    try:
        async with app.run_test(size=(100, 20)) as pilot:
            await wait_for(pilot, lambda: "last words" in output.kept().text(), timeout=30)
            await app.push_screen(OutputScreen(output, "talker", lambda: not reaped["yet"]))
            await wait_for(pilot, lambda: "last words" in pane_text(app), timeout=30)
            assert "(still running)" in pane_text(app)
            assert proc.stdin is not None
            proc.stdin.close()  # it ends, writing nothing more: its streams close with it
            await wait_for(pilot, lambda: output.kept().ended, timeout=30)
            await pilot.pause(REFRESH_S * 2)  # the pane repaints the streams' end, still "running"
            proc.wait(timeout=30)
            reaped["yet"] = True
            await wait_for(pilot, lambda: "(ended)" in pane_text(app), timeout=10)
            assert "last words" in pane_text(app)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        output.finish()
