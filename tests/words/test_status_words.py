"""The status line's words (vmmtui/words/status.py): one count per concept, what is left out said
once, and the calls a trace's frames leave out counted from its timeline."""

from vmmtui.pipeline.replay import trace_timeline
from vmmtui.stream.observed import FdCloseCall, FdDuplicated, MemfdCreated, TraceStarted
from vmmtui.words.status import calls_not_drawn, replay_where, session_where, trace_where


def test_the_calls_not_drawn_are_counted_by_call():
    assert calls_not_drawn({}) == ""
    assert calls_not_drawn({"close": 1}) == "+1 call not drawn: close on fds with nothing shared"
    assert calls_not_drawn({"fcntl": 1, "close": 3}) == (
        "+4 calls not drawn: 3 close, 1 fcntl on fds with nothing shared"
    )


def test_a_live_trace_says_each_count_once():
    assert trace_where(57) == "LIVE · call 57"
    assert trace_where(57, ended=True, folding=4) == "ENDED · call 57 · folding 4 more events"
    assert trace_where(57, 12, dropped=5, recorded=True) == (
        "AS OF CALL 12 of 57 · end: live · … 5 older calls not kept: see the recording"
    )
    assert trace_where(0, starting=True).startswith("STARTING · loading the eBPF probes")
    assert replay_where("step", 3, 23) == "REPLAY · step 3/23"
    assert session_where(None) == "" and session_where(4) == "AS OF STEP 4 · end: live"


def test_the_timeline_counts_the_calls_that_are_no_frame():
    def call(cls, **kw):
        return cls(pid=10, tid=10, ktime=0, **kw)

    t = trace_timeline(
        [
            TraceStarted(mode="ebpf", targets=[10]),
            call(FdCloseCall, fd=7, file="", result=0),  # an fd that never held anything: no frame
            call(MemfdCreated, name="m", fd=4, file="f1"),
            call(FdDuplicated, call="fcntl", old=9, fd=11, file=""),  # of no interest either
            call(FdCloseCall, fd=4, file="f1", result=0),  # the memfd's: a frame
        ]
    )
    assert [f.steps for f in t.frames] == [0, 1, 2]
    assert t.unframed == {"close": 1, "fcntl": 1}
