"""A PyTorch weight-sync loop that leaks one buffer per step, traced (tests/fixtures/
torch_weight_sync.py): the refcount book says the receiver's second open of step 2's share by
step 2, and the trainer's pinned bytes grow step by step. Needs an NVIDIA GPU, PyTorch, root and
eBPF; skipped elsewhere."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vmmtui.pipeline.replay import read
from vmmtui.stream.observed import LedgerFinding, PinnedBytes

pytestmark = pytest.mark.gpu

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "torch_weight_sync.py"


def trace(tmp: Path, *flags: str):
    rec = tmp / "sync.jsonl"
    res = subprocess.run(
        [sys.executable, "-m", "vmmtui", "trace", "--record", str(rec), "--",
         sys.executable, str(FIXTURE), "--steps", "4", *flags],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-4000:]
    steps = {}
    for line in res.stdout.splitlines():
        if line.startswith("TRAINER step"):
            words = line.split()
            steps[int(words[2])] = (int(words[4]), int(words[5].removeprefix("t=")))
    return steps, read(rec).events, res.stdout


@pytest.fixture(scope="module")
def runnable():
    from vmmtui.trace.loader import why_not

    if importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed")
    if shutil.which("nvidia-smi") is None:
        pytest.skip("no NVIDIA GPU")
    if reason := why_not():
        pytest.skip(f"eBPF unavailable: {reason}")


@pytest.fixture(scope="module")
def legacy(runnable, tmp_path_factory):
    return trace(tmp_path_factory.mktemp("legacy"), "--legacy")


@pytest.fixture(scope="module")
def expandable(runnable, tmp_path_factory):
    return trace(tmp_path_factory.mktemp("expandable"))


def pinned_by_step3(steps, events):
    trainer, step3 = steps[1][0], steps[3][1]
    pins = [p.bytes for p in events if isinstance(p, PinnedBytes) and p.pid == trainer]
    early = [p.bytes for p in events
             if isinstance(p, PinnedBytes) and p.pid == trainer and p.ktime < step3]  # fmt: skip
    return pins, early


def test_the_second_open_is_said_by_step_2(legacy):
    steps, events, out = legacy
    trainer, step3 = steps[1][0], steps[3][1]
    twice = [f for f in events if isinstance(f, LedgerFinding) and f.kind == "opened-twice"]
    assert twice, out[-3000:]
    assert twice[0].peer == trainer and twice[0].ktime < step3  # before step 3 began
    assert twice[0].proof == "handle bytes"


def test_the_trainers_pinned_bytes_grow_step_by_step(expandable):
    """With expandable segments every leaked reference is torch's own (an imported allocation), so
    the trainer's allocator cannot reuse the step's segment and its pinned bytes grow a buffer a
    step. (With legacy handles the receiver's extra open is its own, through libcuda: torch's
    allocator reuses the trainer's blocks, whose pins stay at two buffers — on an H100, 64 then
    128 MiB — and the leak shows as ``opened-twice``, tested above.)"""
    steps, events, out = expandable
    pins, early = pinned_by_step3(steps, events)
    rising = [b for a, b in zip([0, *pins], pins, strict=False) if b > a]
    assert len(rising) >= 3, pins
    assert len(set(early)) >= 2, early  # grown by step 2


def test_expandable_segments_travel_by_pidfd_getfd_as_posix_fds(expandable):
    _, events, out = expandable
    imported = [f for f in events if isinstance(f, LedgerFinding) and f.kind == "imported"]
    assert imported, out[-3000:]
    assert {(f.road, f.exported_as) for f in imported} == {("pidfd-getfd", "posix-fd")}
