"""An fd left in a socket's queue, in real processes traced with eBPF
(tests/fixtures/queued_at_release.py): the finding names who released the socket and how, so
that a receiver's exit with a message on its way (Chromium's utility processes at shutdown) is
told from a live process closing its end unread; the kernel closed the fd either way and nothing
of it is held. Slow tier; skipped with the reason where eBPF or the kernel's record is missing."""

from __future__ import annotations

import sys

import pytest

from tests.tracing import FIXTURES, said, stream, vmmtui_trace
from vmmtui.model.findings import Weight
from vmmtui.model.policy import Fact, judge
from vmmtui.stream.events import Event
from vmmtui.stream.observed import LedgerFinding, ProcessForked
from vmmtui.words.findings import finding_words

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ebpf")]


def in_flight(mode: str) -> tuple[LedgerFinding, int, int]:
    """The one in-flight finding, the sender and the receiver."""
    res = vmmtui_trace(
        "--json", "--no-cuda", "--", sys.executable, str(FIXTURES / "queued_at_release.py"), mode,
        timeout=120, env={"NO_COLOR": "1"},
    )  # fmt: skip
    assert res.returncode == 0 and "DONE" in res.stderr, said(res)
    events = [Event.from_dict(d) for d in stream(res)]
    if not any(type(e).__name__ == "QueuedAtRelease" for e in events):
        pytest.skip("kernel side lacks QueuedAtRelease")
    [flight] = [e for e in events if isinstance(e, LedgerFinding) and e.kind == "in-flight"]
    [fork] = [e for e in events if isinstance(e, ProcessForked)]
    return flight, fork.pid, fork.child


def test_a_receiver_that_exits_with_an_fd_queued_is_named_and_its_exit_said():
    flight, sender, receiver = in_flight("exit")
    assert (flight.pid, flight.peer, flight.how) == (sender, receiver, "exit")
    words = finding_words(flight)
    assert f"pid {receiver} exited first" in words.what
    assert "nothing of it is held" in words.detail and "before it exits" in words.fix
    # the exit released the socket and the kernel the fd: a fact, nothing to look at
    assert judge(flight).weight is Weight.QUIET and judge(flight).fact == Fact.QUEUED_AT_EXIT


def test_a_receiver_that_closes_its_end_unread_is_named_as_closing_it():
    flight, sender, receiver = in_flight("close")
    assert (flight.pid, flight.peer, flight.how) == (sender, receiver, "close")
    words = finding_words(flight)
    assert f"pid {receiver} closed the socket with it still queued" in words.detail
    assert "recvmsg" in words.fix
    assert judge(flight).weight is Weight.PROBLEM  # a live process lost the share unread
