"""The panels say what the world says pins memory, on recorded traces of real processes
(``tests/fixtures/memfd_pins.py`` traced with eBPF, ``vmmtui trace --record``):

- ``kept_dups``: the importer ``dup``s each received memfd (fcntl F_DUPFD, what PyTorch's
  ``rebuild_storage_fd`` does) and closes the original; its panel lists each dup open and
  pinning the exporter's memory (dup(2): the copy refers to the same open file description, so
  the memfd lives while it is open), the closed original struck through;
- ``held_after_death_released``: the exporter sends a memfd, closes its fd and is killed; the
  importer lets it go 0.4 s later. The verdict says "still holds" only while it is true; once the
  world says the last pin went (``released-after-exporter-died``) the same verdict is said in the
  past, with the call that let it go.

Assertions are on the rendered screen's text."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from driving import text_of

from vmmtui.pipeline.replay import read
from vmmtui.tui.replay import ReplayApp
from vmmtui.tui.widgets.wire import VerdictsPanel
from vmmtui.view.programs import ProgramsView

TRACES = Path(__file__).parent.parent / "data" / "traces"


def app_of(name: str) -> ReplayApp:
    return ReplayApp(read(TRACES / f"{name}.jsonl.gz"))


def programs(app: ReplayApp, frame: int) -> ProgramsView:
    v = app.frames.at(frame).programs
    assert v is not None
    return v


async def at(pilot, app: ReplayApp, frame: int) -> str:
    """The words on the screen at ``frame``, one string."""
    app.go(frame)
    await pilot.pause()
    await pilot.pause()
    raw = app.export_screenshot()
    spans = re.findall(r"<text[^>]*>(.*?)</text>", raw, flags=re.S)
    return html.unescape("".join(spans)).replace("\xa0", " ")


@pytest.mark.asyncio
async def test_a_receiver_keeping_dups_lists_each_dup_open_and_pinning_the_exporter_s_memory():
    app = app_of("kept_dups")
    async with app.run_test(size=(160, 48)) as pilot:
        last = programs(app, app.frames.last)
        [importer] = [p for p in last.shown_procs() if any(f.how == "received" for f in p.closed)]
        exporter = importer.ppid
        # the frame after the importer closed its second received fd, before its exit
        k = max(
            i
            for i in range(app.frames.last + 1)
            if programs(app, i).proc(importer.pid).alive
            and len([f for f in programs(app, i).proc(importer.pid).fds.values()
                     if f.how == "dup"]) == 2
        )  # fmt: skip
        v = programs(app, k)
        dups = sorted(f.fd for f in v.proc(importer.pid).fds.values() if f.how == "dup")
        assert len(dups) == 2 and not [f for f in v.proc(importer.pid).fds.values()
                                       if f.how == "received"]  # fmt: skip
        text = await at(pilot, app, k)
        for fd in dups:
            assert re.search(
                rf"fd {fd}\s+dup memfd:bucket-\d ← {importer.pid} fd \d+ · pins pid {exporter}'s "
                "memory",
                text,
            ), text
            assert not re.search(rf"fd {fd}\s+dup \(closed\)", text)
        # the closed original is struck through and pins nothing
        assert re.search(r"fd \d+\s+received \(closed\) memfd:bucket-\d ← \d+ fd \d+ "
                         r"\(SCM_RIGHTS\)(?! · pins)", text)  # fmt: skip


@pytest.mark.asyncio
async def test_held_after_the_exporter_died_is_said_in_the_past_once_the_holder_released():
    app = app_of("held_after_death_released")
    async with app.run_test(size=(160, 48)) as pilot:
        last = app.frames.last

        def kinds(i: int) -> list[str]:
            return [f.kind for f in programs(app, i).finding_list()]

        held = next(i for i in range(last + 1) if "held-after-exporter-died" in kinds(i))
        over = next(i for i in range(last + 1) if "released-after-exporter-died" in kinds(i))
        assert held < over
        # while it holds: said in the present
        await at(pilot, app, held)
        verdicts = text_of(app.query_one(VerdictsPanel))
        assert re.search(r"⚠ held-after-exporter-died: pid \d+ still holds pid \d+'s memory",
                         verdicts), verdicts  # fmt: skip
        # once released, and at the end: the same verdict, in the past, with what let it go
        for k in (over, last):
            await at(pilot, app, k)
            verdicts = " ".join(text_of(app.query_one(VerdictsPanel)).split())  # unwrapped
            assert "still holds" not in verdicts, verdicts
            assert re.search(
                r"⚠ held-after-exporter-died: pid \d+ held pid \d+'s memory \d\.\d s after pid "
                r"\d+ was killed by SIGKILL; released by close",
                verdicts,
            ), verdicts
            assert "1 to look at" in verdicts  # it was true for 0.4 s: still one to look at
