"""One fold: the run's world (``model.world``: the ledger and its refcount book) is folded once,
by the trace session, and the renderers, the exporters and the timeline read it or its stream;
none of them builds or folds one of its own. The programs panel's own per-frame fold
(``view/programs.py``) is still one, proven equal here: the same processes, the same fds of
interest for each at every event, the same transfers and the same count of findings, over every
recorded trace and over polling's events. Which fds are of interest is the ledger's
(``Ledger.fds_of``); the panel, the timeline's frames and plain output's lines all ask the one
rule (``model.interest``) of them.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

import pytest

from vmmtui.model.findings import Memory
from vmmtui.model.ledger import Ledger
from vmmtui.model.probes import reclassified
from vmmtui.pipeline.replay import trace_timeline
from vmmtui.pipeline.session import TraceSession
from vmmtui.record.calls import CallTimeline
from vmmtui.record.recording import read
from vmmtui.stream.events import (
    Arrival,
    AttachKind,
    Event,
    FdClosed,
    FdHolder,
    FdOpened,
    ProcessGone,
    ProcessSeen,
    SharedFile,
)
from vmmtui.stream.observed import (
    FdCloseCall,
    FdDuplicated,
    FdsReceived,
    FdsSent,
    LedgerFinding,
    MemfdCreated,
    SocketEnd,
    TraceStarted,
)
from vmmtui.view.programs import ProgramsView, fold_program_event
from vmmtui.words.trace import worth_a_line

ROOT = Path(__file__).resolve().parents[2]
TRACES = sorted(
    [
        *(ROOT / "vmmtui/record/gallery").glob("*trace*.jsonl.gz"),
        *(ROOT / "tests/data/traces").glob("*.jsonl.gz"),
    ]
)
A, B = 1000, 2000
SOCK = SocketEnd(100, 101, "@vmm")
PEER = SocketEnd(101, 100, "@vmm")


#: what makes or moves a world: built only by ``model/world.py`` (the ledger, the book) and the
#: pipeline (the session), folded only by the session
BUILDS = {"Ledger", "Refcounts", "HandleBook", "TraceSession"}
FOLDS = {"apply", "fold", "finish"}
#: the packages that read the world or its stream: the screen's state, storage and the timeline,
#: the renderers, the exporters
READERS = ("view", "record", "render", "fleet")


def _folds_in(path: Path) -> list[str]:
    """Each place in a module that builds a ledger, a book or a session, or folds a world or a
    ledger (``x.apply(...)``, ``x.fold(...)``, ``x.finish()`` of something named for one)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
            continue
        f = node.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        owner = ast.unparse(f.value) if isinstance(f, ast.Attribute) else ""
        folds = name in FOLDS and any(
            w in owner.lower() for w in ("ledger", "world", "session", "refs")
        )
        if name in BUILDS or owner in BUILDS or folds:
            out.append(f"{path.name}:{node.lineno} {ast.unparse(f)}")
    return out


def test_no_reader_of_the_world_builds_or_folds_one_of_its_own():
    """The timeline, Perfetto's file, the exporters and the screen's state take the run's world
    (or its stream); a recording is run through the pipeline by the replay
    (``pipeline.replay.trace_timeline``), never by them."""
    found = []
    for package in READERS:
        for path in sorted((ROOT / "vmmtui" / package).rglob("*.py")):
            found += [f"{package}/{x}" for x in _folds_in(path)]
    assert found == []


def _disagree(ledger: Ledger, v: ProgramsView) -> list[tuple[int, set[int], set[int]]]:
    """Each process whose fds of interest the ledger and the panel tell apart."""
    pids = set(ledger.procs) | set(v.procs)
    out = []
    for pid in sorted(pids):
        theirs, ours = set(ledger.fds_of(pid)), set(v.proc(pid).fds)
        if theirs != ours:
            out.append((pid, theirs, ours))
    return out


def _fold_both(events: list[Event]) -> tuple[TraceSession, ProgramsView, list[str]]:
    """The trace session's ledger and the panel's fold over one stream, checked at every event
    (each is yielded before the ledger folds it, so both stand just before it)."""
    session = TraceSession.replay(events)
    v, said = ProgramsView(), []
    for n, e in enumerate(session.events()):
        if set(session.ledger.procs) != set(v.procs):
            said.append(f"event {n}: processes {set(session.ledger.procs) ^ set(v.procs)}")
        said += [f"event {n} ({type(e).__name__}): pid {d}" for d in _disagree(session.ledger, v)]
        v = fold_program_event(v, e)
    return session, v, said


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_the_panel_and_the_ledger_agree_at_every_event(path: Path):
    session, v, said = _fold_both(list(reclassified(read(path).events)))
    assert said == []
    ledger = session.ledger
    assert _disagree(ledger, v) == []
    assert {p: r.alive for p, r in ledger.procs.items()} == {p: r.alive for p, r in v.procs.items()}
    # every fd that went from one process to another: the same, by how it went
    wire = Counter(t.how for t in v.transfer_list())
    assert {h: wire[h] for h in ("SCM_RIGHTS", "pidfd_getfd")} == {
        h: ledger.transfers.by[h] for h in ("SCM_RIGHTS", "pidfd_getfd")
    }
    # an IPC handle or a pool pointer's export data opened: the ledger's import with its exporter
    imports = Counter(
        f.memory
        for f in ledger.findings
        if f.kind == "imported" and f.peer and f.memory in (Memory.IPC, Memory.POOL_POINTER)
    )
    assert wire["IPC handle"] == imports[Memory.IPC]
    assert wire["pool export data"] == imports[Memory.POOL_POINTER]
    # the verdicts are the ledger's findings, each one
    shown = [f for f in v.finding_list() if isinstance(f.of, LedgerFinding)]
    assert len(shown) == len(ledger.findings) + ledger.findings.dropped > 0
    count = session.count()  # the one count: problems and quiet facts alike on the panel
    assert (v.bad_findings, v.quiet_findings) == (count.bad, count.quiet)


@pytest.mark.parametrize("path", TRACES, ids=lambda p: p.name)
def test_the_timeline_cuts_where_the_session_s_world_says(path: Path):
    """The call timeline takes the run's word for which calls matter (``TraceSession.marked``);
    given a recording alone, the replay runs it through the one pipeline and keeps that fold's
    world (``trace_timeline``): the same frames, and the same fds as the run's."""
    raw = list(reclassified(read(path).events))
    session = TraceSession.replay(raw)
    marked = list(session.marked())
    told = CallTimeline([e for e, _ in marked], [call for _, call in marked])
    alone = trace_timeline(raw)
    assert told.world is None and alone.world is not None
    assert [f.label for f in told.frames] == [f.label for f in alone.frames]
    assert len(told.frames) > 1
    pids = set(session.ledger.procs) | set(alone.world.ledger.procs)
    assert {p: set(alone.world.ledger.fds_of(p)) for p in pids} == {
        p: set(session.ledger.fds_of(p)) for p in pids
    }


def test_an_fd_first_seen_sent_is_held_by_its_sender_until_it_closes_it():
    """A socket made before the trace, sent: the panel lists it under the sender, and the ledger
    has the sender pinning the file too, until its close."""
    events: list[Event] = [
        TraceStarted("ebpf", [A]),
        FdsSent(A, A, 1, "sendmsg", SOCK, [5], ["f1"], 1),
        FdsReceived(B, B, 2, "recvmsg", PEER, [7], ["f1"], 1),
    ]
    session, v, said = _fold_both(events)
    assert said == [] and _disagree(session.ledger, v) == []
    assert [(h.pid, h.how) for h in session.ledger.holders("f1")] == [(A, "sent"), (B, "received")]
    _, v, said = _fold_both([*events, FdCloseCall(A, A, 3, 5, "f1", 0)])
    assert said == [] and set(v.proc(A).fds) == set()


def test_a_dup_of_an_fd_of_no_interest_is_nothing_anywhere():
    """``dup`` of a log file, then its close: no fd of interest in the ledger, no call row, no
    frame and no line of plain output; a dup of a memfd is all of those."""
    events: list[Event] = [
        TraceStarted("ebpf", [A]),
        FdDuplicated(A, A, 1, "dup", 3, 9, "flog"),
        MemfdCreated(A, A, 2, "buf", 4, "f4"),
        FdDuplicated(A, A, 3, "dup", 4, 10, "f4"),
    ]
    session, v, said = _fold_both(events)
    assert said == [] and session.ledger.fds_of(A) == {4, 10}
    assert not worth_a_line(FdCloseCall(A, A, 4, 9, "flog", 0), session.ledger)
    assert worth_a_line(FdCloseCall(A, A, 4, 10, "f4", 0), session.ledger)
    assert trace_timeline(events).frames[-1].steps == v.calls_len == 2


def test_a_dup2_onto_an_fd_of_interest_closes_it_everywhere():
    """``dup2(log, 4)`` over a memfd's fd 4: the kernel closed the memfd's fd. The ledger and the
    panel both let it go, and the call is a row, a frame and a line."""
    events: list[Event] = [
        TraceStarted("ebpf", [A]),
        MemfdCreated(A, A, 1, "buf", 4, "f4"),
        FdDuplicated(A, A, 2, "dup2", 3, 4, "flog"),
    ]
    session, v, said = _fold_both(events[:2])
    assert worth_a_line(events[2], session.ledger)
    session, v, said = _fold_both(events)
    assert said == [] and not session.ledger.fds_of(A) and not v.proc(A).fds
    assert not session.ledger.holders("f4")
    assert trace_timeline(events).frames[-1].steps == v.calls_len == 2


def test_polling_folds_to_the_same_fds():
    """Polling's fds (a memfd and a socket open at the first poll, one that arrived later, a
    kcmp share) and a process gone: the same fds in the ledger as on the panel."""
    seen = [ProcessSeen(A, 1, "prod", "prod", 0, 0.0), ProcessSeen(B, 1, "cons", "cons", 0, 0.0)]
    events: list[Event] = [
        TraceStarted("polling", [A, B]),
        *seen,
        FdOpened(A, 5, "/memfd:w (deleted)", AttachKind.MEMFD, Arrival.PRESENT, 0.0),
        FdOpened(A, 6, "socket:[77]", AttachKind.SOCKET, Arrival.PRESENT, 0.0),
        FdOpened(B, 7, "/memfd:w (deleted)", AttachKind.MEMFD, Arrival.ARRIVED, 0.5),
        SharedFile(
            AttachKind.MEMFD, "/memfd:w", 1, 42, [FdHolder(A, 5), FdHolder(B, 7), FdHolder(B, 8)]
        ),
        FdClosed(A, 6, "socket:[77]", AttachKind.SOCKET, 1.0),
    ]
    session, v, said = _fold_both(events)
    assert said == []
    assert session.ledger.fds_of(A) == {5} and session.ledger.fds_of(B) == {7, 8}
    session, v, said = _fold_both([*events, ProcessGone(B, "cons", 2.0)])
    assert said == [] and not session.ledger.fds_of(B) and not v.proc(B).fds
