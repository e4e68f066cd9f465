"""A PyTorch weight-sync loop that leaks one buffer per step, traced (tests/fixtures/
torch_weight_sync.py): the receiver's second open of a step's share in one context is one more
reference on the same open (as the driver counts it), counted by step 2; the trainer's pinned
bytes grow step by step; a loop that keeps every bucket is named ``growth`` before step 4, with
the trainer as the peer and the bytes, on both roads. Needs an NVIDIA GPU, PyTorch, root and
eBPF; skipped elsewhere."""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vmmtui.pipeline.replay import read
from vmmtui.pipeline.session import MADE_BY_THE_LEDGER, TraceSession
from vmmtui.stream.observed import CudaCall, LedgerFinding, PinnedBytes, base_name
from vmmtui.stream.sizes import format_size
from vmmtui.words.findings import finding_words

pytestmark = pytest.mark.gpu

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "torch_weight_sync.py"


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


@pytest.fixture(scope="module")
def keep_legacy(runnable, tmp_path_factory):
    return trace(tmp_path_factory.mktemp("keep-legacy"), "--keep", "--legacy")


@pytest.fixture(scope="module")
def keep_expandable(runnable, tmp_path_factory):
    return trace(tmp_path_factory.mktemp("keep-expandable"), "--keep")


def pinned_by_step3(steps, events):
    trainer, step3 = steps[1][0], steps[3][1]
    pins = [p.bytes for p in events if isinstance(p, PinnedBytes) and p.pid == trainer]
    early = [p.bytes for p in events
             if isinstance(p, PinnedBytes) and p.pid == trainer and p.ktime < step3]  # fmt: skip
    return pins, early


def most_ipc_refs(events, before: int) -> dict[tuple[int, int], tuple[int, int]]:
    """The recording folded again as the trace folded it: for each legacy open (pid, pointer)
    made before ``before`` (ns), the most references the ledger counted on it and the pid
    whose handle bytes it opened."""
    session = TraceSession.replay([])
    most: dict[tuple[int, int], tuple[int, int]] = {}
    for e in events:
        if isinstance(e, MADE_BY_THE_LEDGER):
            continue
        session.fold(e)
        if (
            isinstance(e, CudaCall)
            and base_name(e.func) == "cuIpcOpenMemHandle"
            and e.result == 0
            and e.ktime < before
        ):
            key = (e.pid, e.ptr)
            x = session.ledger.ipc.get(e.ipc)
            n = session.ledger.ipc_refs[key]
            most[key] = (max(n, most.get(key, (0, 0))[0]), x.pid if x else 0)
    return most


def test_the_second_open_is_counted_as_a_second_reference_by_step_2(legacy):
    """The receiver opens the step's handle again through libcuda in the context torch opened
    it in: "If the memory handle has already been opened by the current context, the reference
    count on the handle is incremented by 1 and the existing device pointer is returned"
    (cuIpcOpenMemHandle). No finding; one more reference on the trainer's memory, counted before
    step 3 began, and the trainer's memory pinned by then."""
    steps, events, out = legacy
    trainer, step3 = steps[1][0], steps[3][1]
    again = [x for x in out.splitlines() if "opened the handle again: CUresult 0" in x]
    assert again, out[-3000:]  # the driver granted the second open
    most = most_ipc_refs(events, step3)
    twice = [key for key, (n, peer) in most.items() if n >= 2 and peer == trainer]
    assert twice, most
    assert all(pid != trainer for pid, _ in twice)  # the receiver's, on the trainer's memory
    assert not [f for f in events if isinstance(f, LedgerFinding) and f.kind == "opened-twice"]
    pinned = [p for p in events if isinstance(p, PinnedBytes) and p.pid == trainer]
    assert any(p.bytes > 0 and p.ktime < step3 for p in pinned), pinned


@pytest.mark.parametrize("run", ["keep_legacy", "keep_expandable"])
def test_a_loop_that_keeps_every_bucket_is_named_growth_before_step_4(run, request):
    """An engine that keeps every bucket it is sent: growth, said live before step 4 began,
    naming the trainer as the peer, with the bytes it pins: more than two 64 MiB buckets (three
    legacy buffers are 192 MiB; expandable segments are mapped in pieces, 160 MiB by step 3 on
    two H200s)."""
    steps, events, out = request.getfixturevalue(run)
    trainer, step4 = steps[1][0], steps[4][1]
    grown = [f for f in events if isinstance(f, LedgerFinding) and f.kind == "growth"]
    assert grown, out[-3000:]
    first = grown[0]
    assert first.peer == trainer and first.pid != trainer
    assert first.ktime < step4, (first.ktime, step4)  # live: before step 4 began
    assert first.size >= 2 * (64 << 20), first.size
    assert format_size(first.size) in finding_words(first).what
    problems = {f.kind for f in events if isinstance(f, LedgerFinding) and f.kind != "growth"}
    assert not problems & {"opened-twice", "freed-while-mapped", "released-twice"}, problems


def test_the_trainers_pinned_bytes_grow_step_by_step(expandable):
    """With expandable segments every leaked reference is torch's own (an imported allocation), so
    the trainer's allocator cannot reuse the step's segment and its pinned bytes grow a buffer a
    step. (With legacy handles the receiver's extra open is its own, through libcuda: torch's
    allocator reuses the trainer's blocks, whose pins stay at two buffers — on an H100, 64 then
    128 MiB — and its second open is one more reference, tested above.)"""
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
