"""One rule for which calls matter: the timeline's frames, the panels' call rows and the log's
lines count the same calls, so "call N" is the same call on the bar, in a panel and in the log."""

from __future__ import annotations

from pathlib import Path

import pytest

from vmmtui.pipeline.replay import read, trace_timeline
from vmmtui.pipeline.session import refold
from vmmtui.stream.events import FdOpened
from vmmtui.stream.observed import FdCloseCall, FdDuplicated, QueuedAtRelease, TraceStarted
from vmmtui.view.programs import ProgramsView, fold_program_event

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted(
    [
        *(ROOT / "vmmtui/record/gallery").glob("*trace*.jsonl.gz"),
        *(ROOT / "tests/data/traces").glob("*.jsonl.gz"),
    ]
)
A = 1000


def counted(events) -> tuple[int, int]:
    """(the timeline's calls, the panels' call rows) after ``events``."""
    v = ProgramsView()
    for e in events:
        v = fold_program_event(v, e)
    return trace_timeline(events).frames[-1].steps, v.calls_len


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_every_recording_counts_its_calls_alike(path: Path):
    calls, rows = counted(refold(read(path).events))
    assert calls == rows > 0


def test_a_close_of_an_fd_open_before_the_trace_is_a_call_everywhere():
    """``trace -p``: frame 0 says which fds were open (a memfd); its close is a call of the
    panel's, so it is a frame too (else its change hides in the frame before)."""
    events = [
        TraceStarted("ebpf", [A]),
        FdOpened(A, 5, "/memfd:held (deleted)", "memfd", "present", 0.0),
        FdCloseCall(A, A, 10, 7, "", 0),  # an fd of no interest: nowhere
        FdDuplicated(A, A, 11, "dup", 5, 8, "f5"),
        FdCloseCall(A, A, 12, 5, "f5", 0),
        QueuedAtRelease(A, A, 13, 0, ("f9",), 1),  # the kernel's word: a call row and a frame
    ]
    assert counted(events) == (3, 3)
