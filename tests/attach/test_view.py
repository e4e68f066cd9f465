"""The attach view's conventions: "scanning…" until the first poll, the collector thread only posts
boards (the UI never reads the follower), another process selected through the collector's queue,
its own .tcss and a footer with the bindings."""

import asyncio
import inspect
import os
import subprocess
import sys
import threading

import vmmtui.tui.attach as view
from vmmtui.tui.attach import AttachApp, Collector


def test_the_view_says_scanning_until_the_first_poll_then_shows_it():
    gate = threading.Event()
    run = Collector.run

    def held(self, post, cancelled):  # the first poll waits for the test (a slow /proc)
        gate.wait(20)
        run(self, post, cancelled)

    async def go():
        app = AttachApp([os.getpid()])
        app.collector.run = held.__get__(app.collector)
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause(0.3)
            assert "scanning 1 process(es)" in str(app.query_one("#shares").render())
            assert "scanning" in app.sub_title
            gate.set()
            for _ in range(100):
                await pilot.pause(0.1)
                if app.board is not None:
                    break
            assert app.board is not None and "scanning" not in app.sub_title
            assert app.query_one("#procs").row_count == 1
            assert app.query_one("Footer") is not None
            await pilot.press("q")

    asyncio.run(go())


def test_selecting_another_process_goes_through_the_collector():
    fd = os.memfd_create("fixture-view-select", 0)
    child = subprocess.Popen(
        [sys.executable, "-c", "import sys; sys.stdin.read()"],
        stdin=subprocess.PIPE,
        pass_fds=(fd,),
    )

    async def go():
        app = AttachApp([os.getpid(), child.pid])
        async with app.run_test(size=(160, 48)) as pilot:
            for _ in range(100):
                await pilot.pause(0.1)
                if app.board is not None and len(app.board.processes) == 2:
                    break
            first = app.board.selected
            procs = app.query_one("#procs")
            procs.move_cursor(row=1)
            await pilot.press("enter")
            for _ in range(50):
                await pilot.pause(0.1)
                if app.board.selected != first:
                    break
            assert app.board.selected == max(os.getpid(), child.pid) != first
            assert str(app.board.selected) in str(app.query_one("#fds").border_title)
            await pilot.press("q")

    try:
        asyncio.run(go())
    finally:
        child.stdin.close()
        child.wait()
        os.close(fd)


def test_the_ui_never_reads_the_follower_and_has_its_own_stylesheet():
    app_source = inspect.getsource(AttachApp)
    assert "follower" not in app_source and "tracker" not in app_source
    assert AttachApp.CSS_PATH == "attach.tcss" and not getattr(AttachApp, "CSS", "")
    assert os.path.exists(os.path.join(os.path.dirname(view.__file__), "attach.tcss"))
    assert {b[0] for b in AttachApp.BINDINGS} >= {"q", "p", "s"}
