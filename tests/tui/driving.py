"""Driving the inspector with Pilot in the tui tests: a memfd app, waiting, stepping, reading a widget."""

import os

from vmmtui.backends import Choice
from vmmtui.plan.config import SessionConfig
from vmmtui.tui.app import InspectorApp

MEMFD = Choice("memfd", "memfd backend requested (CPU memory, not GPU memory)")


def make_app(tmp_path, **kw):
    return InspectorApp(
        SessionConfig(backend="memfd", size=1 << 20, tmpdir=str(tmp_path)), MEMFD, **kw
    )


async def wait_for(pilot, cond, timeout=30.0):
    for _ in range(int(timeout / 0.05)):
        if cond():
            return
        await pilot.pause(0.05)
    raise AssertionError("condition not met in time")


def text_of(widget) -> str:
    from rich.console import Console

    with open(os.devnull, "w") as sink:
        console = Console(width=200, record=True, file=sink)
        console.print(widget.content)
        return console.export_text()


async def step_to(pilot, app, index):
    while app.session.position < index:
        before = app.session.position
        await pilot.press("space")
        await wait_for(pilot, lambda before=before: app.session.position > before and not app.busy)
    await pilot.pause(0.3)
