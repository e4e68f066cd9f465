"""The live trace inspector's backlog is bounded whatever the rate: past ``BACKLOG_MOST`` events
waiting to be drawn, the calls are counted and not drawn (the run's ledger and the recording
still get every one), a process's start and end and every other event are still drawn, and the
status line says how many calls went undrawn and where they are."""

from __future__ import annotations

from vmmtui.stream.observed import FdCloseCall, ProcessExit, TraceLost
from vmmtui.tui.trace import Inbox
from vmmtui.words.status import trace_where


def close(i: int) -> FdCloseCall:
    return FdCloseCall(pid=10, tid=10, ktime=i, fd=4, file="f", result=0)


def test_past_the_bound_calls_are_counted_not_kept_until_half_is_drawn():
    inbox = Inbox(most=10)
    for i in range(10):
        inbox.put(close(i), True, unfolded=0)
    assert len(inbox.events) == 10 and inbox.not_drawn == 0
    inbox.put(close(10), True, unfolded=0)
    assert inbox.behind and inbox.not_drawn == 1 and len(inbox.events) == 10
    # what is not a call, and a process's end, is drawn however far behind
    inbox.put(ProcessExit(pid=10, tid=10, ktime=11, code=0), False, unfolded=0)
    inbox.put(TraceLost(count=3), False, unfolded=0)
    assert len(inbox.events) == 12 and inbox.not_drawn == 1
    events, calls = inbox.take()
    assert len(events) == len(calls) == 12 and inbox.events == []
    # taken, but not yet folded by the screen: still behind until half the bound is left
    inbox.put(close(12), True, unfolded=7)
    assert inbox.behind and inbox.not_drawn == 2
    inbox.put(close(13), True, unfolded=5)
    assert not inbox.behind and inbox.not_drawn == 2 and len(inbox.events) == 1


def test_one_message_at_a_time_tells_the_app():
    inbox = Inbox(most=10)
    assert not inbox.tell()  # nothing waiting
    inbox.put(close(0), True, unfolded=0)
    assert inbox.tell() and not inbox.tell()  # one on its way
    inbox.take()
    inbox.put(close(1), True, unfolded=0)
    assert inbox.tell()


def test_the_status_line_says_the_calls_not_drawn_and_where_they_are():
    line = trace_where(57, not_drawn=412_000, behind=True)
    assert "falling behind: 412,000 calls not drawn, --record FILE keeps every call" in line
    line = trace_where(57, not_drawn=412_000, behind=True, recorded=True)
    assert "falling behind: 412,000 calls not drawn, the recording keeps them" in line
    caught_up = trace_where(57, not_drawn=1, behind=False, recorded=True)
    assert "1 call not drawn while the screen was behind (the recording keeps them)" in caught_up
    assert "not drawn" not in trace_where(57)


def test_far_behind_even_findings_are_counted_not_kept_and_said():
    """A flood of findings grew the backlog without end (every finding was kept): past twice the
    bound they are counted too; the status line says both counts and where they are."""
    from vmmtui.model.findings import FindingKind
    from vmmtui.stream.observed import LedgerFinding

    inbox = Inbox(most=10)
    for i in range(11):
        inbox.put(close(i), True, unfolded=0)
    found = LedgerFinding(kind=FindingKind(next(iter(FindingKind))), pid=10, ktime=20)
    for _ in range(5):  # behind, but under twice the bound: a finding is still drawn
        inbox.put(found, False, unfolded=0)
    assert inbox.findings_not_drawn == 0 and len(inbox.events) == 15
    for _ in range(1000):
        inbox.put(found, False, unfolded=20)
    assert inbox.findings_not_drawn == 1000 and len(inbox.events) == 15
    line = trace_where(
        57,
        not_drawn=inbox.not_drawn,
        behind=True,
        recorded=True,
        findings_not_drawn=inbox.findings_not_drawn,
    )
    assert "falling behind: 1 call, 1,000 findings not drawn, the recording keeps them" in line
