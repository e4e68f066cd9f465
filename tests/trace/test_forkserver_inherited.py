"""A copy of another's memory a process got by fork and kept until it exited, traced with eBPF in
real processes (tests/fixtures/inherited_heap.py): CPython's forkserver hands a child a
``multiprocessing.Value``'s heap arena (the fd goes to the fork server, which forks the child),
and a process that maps a received memfd forks a worker (a DataLoader's pattern). The child
never received the file: it is said as inherited, through the process that received it, kept
until exit and released by it; never "received it … and closed that fd, but kept a dup".
Whether such a hold is a problem is the policy's; these tests hold the facts and their words.
Slow tier; skipped with the reason where eBPF is missing."""

from __future__ import annotations

import sys

import pytest

from tests.tracing import FIXTURES, said, stream, vmmtui_trace
from vmmtui.stream.events import Event
from vmmtui.stream.observed import FdsReceived, LedgerFinding, ProcessExit, ProcessForked
from vmmtui.words.findings import finding_words

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("ebpf")]


def traced(mode: str) -> list[Event]:
    res = vmmtui_trace(
        "--json", "--no-cuda", "--", sys.executable, str(FIXTURES / "inherited_heap.py"), mode,
        timeout=300, env={"NO_COLOR": "1"},
    )  # fmt: skip
    assert res.returncode == 0 and "DONE" in res.stderr, said(res)  # its output: stderr
    return [Event.from_dict(d) for d in stream(res)]


def one_held(events: list[Event]) -> tuple[LedgerFinding, int, int]:
    """The one held-at-exit, the process that received the file, and the one it came from."""
    [held] = [e for e in events if isinstance(e, LedgerFinding) and e.kind == "held-at-exit"]
    [got] = [e for e in events if isinstance(e, FdsReceived)]
    sent = next(e for e in events if type(e).__name__ == "FdsSent")
    return held, got.pid, sent.pid


def test_a_forkserver_child_keeping_the_heap_arena_is_said_inherited_through_the_fork_server():
    events = traced("forkserver")
    held, server, owner = one_held(events)
    forked = {e.child: e.pid for e in events if isinstance(e, ProcessForked)}
    assert forked[held.pid] == server  # the fork server received the arena and forked the child
    assert (held.how, held.through, held.peer, held.via) == (
        "inherited",
        server,
        owner,
        "SCM_RIGHTS",
    )
    assert held.fd in held.fds and held.opens  # its inherited fd first, mmap's dup, the mapping
    [end] = [e for e in events if isinstance(e, ProcessExit) and e.pid == held.pid]
    assert end.code == 0 and held.ktime == end.ktime
    words = finding_words(held)
    assert "kept until exit, inherited" in words.what
    assert f"pid {held.pid} inherited it by fork: pid {server} received it from pid {owner}" in (
        words.detail
    )
    assert "released it" in words.detail
    assert "closed that fd" not in words.detail and "dup" not in words.what


def test_a_worker_forked_while_its_parent_maps_a_received_memfd_is_said_inherited():
    events = traced("fork")
    held, receiver, sender = one_held(events)
    forked = {e.child: e.pid for e in events if isinstance(e, ProcessForked)}
    assert forked[held.pid] == receiver and held.pid != receiver
    assert (held.how, held.through, held.peer) == ("inherited", receiver, sender)
    assert held.name == "memfd" and held.opens and held.fd in held.fds
    words = finding_words(held)
    assert words.what.startswith(f"memfd of pid {sender} kept until exit, inherited")
    assert f"pid {receiver} received it from pid {sender}" in words.detail
    # the receiver itself let it go before its exit: nothing is said of it
    assert not [
        e for e in events if isinstance(e, LedgerFinding) and e.pid == receiver
        and e.kind not in ("shared", "imported")
    ]  # fmt: skip
