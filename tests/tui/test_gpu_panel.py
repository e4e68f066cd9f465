"""The inspector's GPU panel on a recorded trace of real processes (``tests/fixtures/
gpu_charges.py kill`` traced with eBPF through the stand-in libcuda and NVML, ``vmmtui trace
--record``): before the kill NVML charges the exporter, the importer holds its memory; after it
NVML charges the importer and the panel names the 96 MiB orphaned. A recording with no NVML
reading shows no panel. Assertions are on the rendered screen's text."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from vmmtui.pipeline.replay import read
from vmmtui.tui.replay import ReplayApp
from vmmtui.tui.widgets.gpu import GpuPanel

TRACES = Path(__file__).parent.parent / "data" / "traces"


async def screen_at(pilot, app: ReplayApp, frame: int) -> str:
    app.go(frame)
    await pilot.pause()
    await pilot.pause()
    spans = re.findall(r"<text[^>]*>(.*?)</text>", app.export_screenshot(), flags=re.S)
    return html.unescape("".join(spans)).replace("\xa0", " ")


def frames_with(app: ReplayApp, orphaned: bool) -> list[int]:
    out = []
    for k in range(app.frames.last + 1):
        v = app.frames.at(k).programs
        if v is not None and v.gpu is not None and bool(sum(v.gpu.orphaned.values())) == orphaned:
            out.append(k)
    return out


@pytest.mark.asyncio
async def test_the_gpu_panel_names_the_charge_moving_to_the_importer_and_the_orphaned_bytes():
    app = ReplayApp(read(TRACES / "gpu_kill.jsonl.gz"))
    async with app.run_test(size=(200, 50)) as pilot:
        before, after = frames_with(app, orphaned=False), frames_with(app, orphaned=True)
        assert before and after and before[0] < after[0]
        text = await screen_at(pilot, app, before[0])
        assert "GPU 0 · 696 MiB charged to 2 · nothing orphaned" in text
        assert app.screen.query_one(GpuPanel).display
        text = await screen_at(pilot, app, after[0])
        assert "GPU 0 · 396 MiB charged to 1 · 96 MiB orphaned" in text
        assert "python (exited)" in text
        await screen_at(pilot, app, 0)
        assert not app.screen.query_one(GpuPanel).display  # no reading yet: no panel


@pytest.mark.asyncio
async def test_a_recording_with_no_nvml_reading_shows_no_gpu_panel():
    app = ReplayApp(read(TRACES / "kept_dups.jsonl.gz"))
    async with app.run_test(size=(160, 48)) as pilot:
        await screen_at(pilot, app, app.frames.last)
        assert not app.screen.query_one(GpuPanel).display
