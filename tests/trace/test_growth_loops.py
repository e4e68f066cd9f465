"""Growth that is a loop, on real processes traced with eBPF (tests/fixtures/growth_loops.py): a
loop that keeps every memory file it is sent is named while it runs, within its first five
rounds, at 40 ms, 400 ms and 2 s steps alike, and said again as it grows, its bytes following
(``ftruncate``'s sizes, a mapping's length) to the peak; the same with ``/dev/shm`` files sent as
fds and mapped by their name (torch's two CPU strategies); a start-up that hands its regions in
three bursts and then stays flat is no growth. Skipped with the reason where eBPF is missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vmmtui.stream.events import Event
from vmmtui.stream.observed import FdsReceived, LedgerFinding, MemoryMapped, ProcessExit
from vmmtui.words.findings import finding_words

pytestmark = pytest.mark.usefixtures("ebpf")

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
MIB = 1 << 20
ROUNDS = 6


def trace(mode: str, rounds: int, gap: float) -> list[Event]:
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "trace", "--json", "--no-cuda", "--",
         sys.executable, str(FIXTURES / "growth_loops.py"), mode, str(rounds), str(gap)],
        capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    return [Event.from_dict(json.loads(line)) for line in res.stdout.splitlines()]


def grown(events: list[Event]) -> list[LedgerFinding]:
    return [e for e in events if isinstance(e, LedgerFinding) and e.kind == "growth"]


def arrivals(events: list[Event], mode: str, pid: int) -> list[int]:
    """When each piece reached the importer: its receive, or (by name) its mapping."""
    if mode == "named":
        return [e.ktime for e in events if isinstance(e, MemoryMapped) and e.pid == pid]
    return [e.ktime for e in events if isinstance(e, FdsReceived) and e.pid == pid]


def the_loop_is_named_live_and_its_bytes_follow(events: list[Event], mode: str) -> None:
    said = grown(events)
    assert said, [e for e in events if isinstance(e, LedgerFinding)][:5]
    first = said[0]
    assert {(f.pid, f.peer) for f in said} == {(first.pid, first.peer)}  # one relation
    came = arrivals(events, mode, first.pid)
    assert len(came) == ROUNDS
    [end] = [e.ktime for e in events if isinstance(e, ProcessExit) and e.pid == first.pid]
    assert first.ktime <= came[4] < end  # within the first five rounds, while it ran
    # the bytes follow the pieces: each said figure is what was held then, the last the peak
    assert all(f.size == f.opens[-1] * MIB for f in said), [(f.size, f.opens) for f in said]
    assert [f.size for f in said] == sorted(f.size for f in said)
    assert first.size >= 3 * MIB and said[-1].size == ROUNDS * MIB
    assert len(said) < ROUNDS  # said again as it grew by a quarter, not at every piece
    assert "size not seen" not in finding_words(said[-1]).what
    assert said[-1].how == "peak" and said[-1].ktime == end  # the end says the peak
    assert f"grew to a peak of {ROUNDS} held, {ROUNDS} MiB" in finding_words(said[-1]).what


@pytest.mark.parametrize(
    "gap",
    [0.04, pytest.param(0.4, marks=pytest.mark.slow), pytest.param(2.0, marks=pytest.mark.slow)],
    ids=["40ms", "400ms", "2s"],
)
def test_a_loop_keeping_every_memfd_is_named_within_five_rounds_whatever_its_step(gap):
    the_loop_is_named_live_and_its_bytes_follow(trace("memfd", ROUNDS, gap), "memfd")


@pytest.mark.parametrize("mode", [pytest.param("fdshm", marks=pytest.mark.slow), "named"])
def test_dev_shm_files_kept_as_fds_or_mapped_by_name_grow_as_memfds_do(mode):
    """torch's CPU tensors: ``file_descriptor`` sends the /dev/shm file's fd, ``file_system``
    only its name (the importer opens and maps it); each kept is a piece of the exporter's."""
    the_loop_is_named_live_and_its_bytes_follow(trace(mode, ROUNDS, 0.05), mode)


def test_three_start_up_bursts_then_flat_are_no_growth():
    """A browser's renderer handed 2 regions, then 30, then 1 (pins 0 → 2 → 32 → 33), kept for
    its life while the exporter lives: set-up, not a loop."""
    events = trace("bursts", 0, 0.15)
    received = [e for e in events if isinstance(e, FdsReceived)]
    assert len(received) == 33
    assert grown(events) == []


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium here")
def test_chromium_loading_a_page_is_no_growth(tmp_path):
    """Chromium headless hands each renderer its shared regions in bursts while a page loads
    (2, 12, 7, 1, 10, 9… of sizes from 4 bytes to 256 KiB, at no steady pace) and keeps them
    for the renderer's life: start-up, never a loop."""
    page = tmp_path / "page.html"
    frames = "".join(f'<iframe src="data:text/html,<h1>{i}</h1>"></iframe>' for i in range(5))
    page.write_text(f"<html><body><canvas width=800 height=600></canvas>{frames}</body></html>")
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "trace", "--json", "--no-cuda", "--", "chromium",
         "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=1500",
         "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    events = [Event.from_dict(json.loads(line)) for line in res.stdout.splitlines()]
    assert len([e for e in events if isinstance(e, FdsReceived)]) > 20  # regions were shared
    assert grown(events) == []


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["file_descriptor", "file_system"])
def test_torch_cpu_tensors_kept_step_after_step_grow(strategy):
    """torch's own CPU sharing, both strategies (skipped where torch is missing): a receiver
    keeping every 1 MiB tensor it is sent is growth, named within five steps, its bytes
    following."""
    pytest.importorskip("torch")
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "trace", "--json", "--no-cuda", "--",
         sys.executable, str(FIXTURES / "torch_cpu_keep.py"), strategy, str(ROUNDS), "0.1"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "NO_COLOR": "1"},
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    events = [Event.from_dict(json.loads(line)) for line in res.stdout.splitlines()]
    said = grown(events)
    assert said, [e for e in events if isinstance(e, LedgerFinding)][:8]
    assert len({(f.pid, f.peer) for f in said}) == 1
    assert said[0].size >= 3 * MIB and said[-1].size >= ROUNDS * MIB
