"""A long live trace's inspector forgets its oldest frames and keeps every count whole: the state
at a frame it kept is the state a fold of the whole trace gives there, and its memory does not
grow with the trace's length."""

import os
import subprocess
import sys
import tracemalloc

import pytest

from tests.commands import ROOT
from tests.model.test_kept import shares
from vmmtui.pipeline.session import TraceSession
from vmmtui.record.calls import CallTimeline
from vmmtui.stream.observed import TraceStarted
from vmmtui.view import FrameStates, ScreenState


def marked(n: int, first: int = 0) -> tuple[list, list[bool]]:
    """The stream of ``n`` shares as the run's session makes it, with its marks (which events
    are calls that matter, as the live inspector gets them)."""
    head = [TraceStarted("ebpf", [1000], ["load"], ktime0=10**12)] if first == 0 else []
    source = type("S", (), {"stopping": False, "pids": []})()
    source.events = lambda on_batch=None: iter([*head, *shares(n, first)])
    out = list(TraceSession(source, live=False).marked())
    return [e for e, _ in out], [c for _, c in out]


def counts(s: ScreenState) -> tuple:
    v = s.programs
    assert v is not None
    return (
        s.seq,
        s.log_len,
        v.calls_len,
        v.transfers_len,
        v.findings_len,
        v.bad_findings,
        v.proven_by,
        {pid: p.ncalls for pid, p in v.procs.items()},
        [t.file for t in v.transfer_list()[-5:]],
        [row.name for row in v.calls_of(1000, last=3)],
        [line.seq for line in s.log_lines()[-5:]],
    )


def test_a_kept_frame_is_the_state_the_whole_fold_gives_and_counts_stay_whole():
    evs, calls = marked(3000)
    whole = FrameStates(CallTimeline(), ScreenState.for_programs())
    whole.extend(evs, calls)
    cut = FrameStates(CallTimeline(), ScreenState.for_programs())
    for k in range(0, len(evs), 1000):  # as the live app folds: batch by batch
        cut.extend(evs[k : k + 1000], calls[k : k + 1000])
        cut.latest()
        if len(cut.timeline.events) > 4000:
            cut.forget(cut.timeline.frame_of_step(cut.frames[-1].steps - 2000), rows=50)
    t = cut.timeline
    assert t.dropped > 0 and t.events_dropped > 0 and len(t.events) < 6000
    assert counts(cut.latest()) == counts(whole.latest())
    assert cut.frames[-1].steps == whole.frames[-1].steps == 15000  # five calls a share
    # a step back to a frame it kept: the same state as the whole fold's, call for call
    for back in (1, 17, 500, len(cut) - 1):
        k = cut.last - back
        steps = cut.frames[k].steps
        assert whole.frames[whole.timeline.frame_of_step(steps)].steps == steps
        assert counts(cut.at(k)) == counts(whole.at(whole.timeline.frame_of_step(steps)))
    assert cut.frames[0].steps == t.dropped  # the first kept frame is the call after those gone
    v = cut.latest().programs
    assert v is not None and len(v.transfers.entries) < 1100 and v.transfers.base > 0


def growth() -> int:
    """Bytes the inspector's state grows by from 1,000 shares to 4,000 (it keeps a window, so
    this is flat): measured by tracemalloc, which counts every allocation of its process."""
    states = FrameStates(CallTimeline(), ScreenState.for_programs())

    def feed(n: int, first: int) -> None:
        evs, calls = marked(n, first)
        for k in range(0, len(evs), 500):
            states.extend(evs[k : k + 500], calls[k : k + 500])
            states.latest()
            if len(states.timeline.events) > 3000:
                states.forget(states.last // 2, rows=100)

    tracemalloc.start()
    try:
        feed(1000, 0)
        before = tracemalloc.get_traced_memory()[0]
        feed(3000, 1000)
        after = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert states.frames[-1].steps == 20000
    return after - before


@pytest.mark.slow
def test_the_inspectors_memory_is_flat_however_long_the_trace():
    """Measured in a process of its own: tracemalloc counts every allocation of its process, and
    in a test worker another test's (a thread, a fixture torn down late) would count as ours."""
    res = subprocess.run(
        [sys.executable, "-c", "from tests.view.test_forget import growth; print(growth())"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=300,
    )
    assert res.returncode == 0, res.stderr
    grew = int(res.stdout.split()[-1])
    assert grew < 1_000_000, f"the inspector's state grew by {grew} bytes"
