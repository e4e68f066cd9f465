"""One fold for every source: traces recorded of each road (tests/data/traces, made with
``vmmtui trace --record`` of the fixtures), polling events and the demo's session fold into the
same ``ScreenState``; a process view is keyed by pid. No app here."""

from __future__ import annotations

from pathlib import Path

import pytest
from events_fixture import session_events

from vmmtui.model.ends import End
from vmmtui.pipeline.replay import read, trace_timeline
from vmmtui.stream.events import (
    Arrival,
    AttachKind,
    FdClosed,
    FdHolder,
    FdOpened,
    GpuMemory,
    Leak,
    LeakKind,
    ProcessGone,
    ProcessSeen,
    SharedFile,
)
from vmmtui.stream.observed import LedgerFinding, SocketEnd
from vmmtui.view import FrameStates, ScreenState, fold
from vmmtui.view.frames import EVERY
from vmmtui.view.model import Found
from vmmtui.words.findings import words_of
from vmmtui.words.log import log_text
from vmmtui.words.status import status_words

TRACES = Path(__file__).parent.parent / "data" / "traces"


def traced(name: str) -> ScreenState:
    return fold(read(TRACES / f"{name}.jsonl.gz").events, ScreenState.for_programs())


def by_how(state: ScreenState) -> dict[str, list[tuple[int, int]]]:
    """(pid, fd) of every fd each way it came, open or closed, over the processes."""
    v = state.programs
    assert v is not None
    out: dict[str, list[tuple[int, int]]] = {}
    for p in v.procs.values():
        for f in (*p.fds.values(), *p.closed):
            out.setdefault(f.how, []).append((p.pid, f.fd))
    return out


def test_scm_rights_road_a_share_with_both_fd_numbers_and_the_kernels_file():
    v = traced("scm_pair").programs
    assert v is not None and v.mode == "ebpf"
    [t] = v.transfer_list()
    assert t.how == "SCM_RIGHTS" and t.from_fd == 4 and t.to_fd == 3 and t.file
    assert isinstance(t.via, SocketEnd) and t.via.family == "unix" and t.latency_ms is not None
    sender, receiver = v.procs[t.from_pid], v.procs[t.to_pid]
    got = next(f for f in receiver.closed if f.how == "received")
    assert got.source == (sender.pid, 4) and got.proof == "struct file" and got.file == t.file
    assert got.target == "memfd:fixture-scm"  # named by the sender's memfd_create
    assert not sender.alive and sender.end == End(0) and not receiver.alive
    assert [f.kind for f in v.finding_list()] == ["shared"]


def test_pidfd_road_a_take_is_a_transfer():
    v = traced("pidfd_pair").programs
    assert v is not None
    [t] = v.transfer_list()
    assert t.how == "pidfd_getfd" and t.file
    taker = v.procs[t.to_pid]
    assert any(f.how == "taken" and f.source == (t.from_pid, t.from_fd) for f in taker.closed)


def test_a_refused_pidfd_getfd_is_a_verdict_with_cause_and_fix():
    state = traced("pidfd_refused")
    v = state.programs
    assert v is not None and v.transfers_len == 0
    [f] = v.finding_list()
    assert f.kind == "refused" and "pidfd_getfd refused (EPERM)" in words_of(f.of).what
    assert "uid 65534" in words_of(f.of).detail and "CAP_SYS_PTRACE" in words_of(f.of).fix
    assert state.status["findings"] == Found(0, 1)  # a fact; words.status words it
    assert status_words(state.status)["findings"] == "0 shared/imported · 1 to look at"
    child = v.procs[f.pid]
    assert [c.name for c in v.calls_of(child.pid)][-2:] == ["pidfd_getfd", "exit"]
    assert v.calls_of(child.pid)[-2].failed


def test_driver_calls_allocations_imports_and_legacy_handles():
    v = traced("fake_cuda_calls").programs
    assert v is not None
    [p] = v.shown_procs()
    kinds = {m.kind for m in p.mems.values()}
    assert {"allocation", "import", "mapping", "ipc export", "ipc open"} <= kinds
    alloc = next(m for m in p.mems.values() if m.kind == "allocation")
    assert alloc.size == 2 << 20 and alloc.exported == (42,)
    calls = v.calls_of(p.pid)
    create = next(c for c in calls if c.name == "cuMemCreate")
    assert create.event.result == 0 and not create.failed and create.duration_ns > 0
    assert any(c.failed and c.name == "cuMemExportToShareableHandle" for c in calls)
    assert [t.how for t in v.transfer_list()] == ["IPC handle"]


def test_pool_road_pool_export_data_and_who_pins_what():
    state = fold(
        read(TRACES / "fake_pool_calls.jsonl.gz").events[:-12], ScreenState.for_programs()
    )  # before the exits
    v = state.programs
    assert v is not None
    assert [t.how for t in v.transfer_list()] == [
        "SCM_RIGHTS",
        "pool export data",
        "pool export data",
    ]
    exporter, importer = v.transfer_list()[0].from_pid, v.transfer_list()[0].to_pid
    pool = next(m for m in v.procs[exporter].mems.values() if m.kind == "pool")
    imported = next(m for m in v.procs[importer].mems.values() if m.kind == "pool import")
    assert imported.of == (exporter, pool.key)
    assert f"{importer} pool import" in v.pins(exporter, pool)
    final = traced("fake_pool_calls").programs
    assert final is not None
    assert {"held-after-exporter-died", "pool-never-destroyed", "pool-pointer-never-freed"} <= {
        f.kind for f in final.finding_list()
    }


def test_a_thousand_shares_fold_and_every_frame_is_a_call():
    events = read(TRACES / "shares_1000.jsonl.gz").events
    timeline = trace_timeline(events)
    states = FrameStates(timeline, ScreenState.for_programs())
    last = states.at(states.last).programs
    assert last is not None and last.transfers_len == 1000
    assert timeline.frames[-1].steps == last.calls_len == states.last
    tenth = states.at(10).programs
    assert tenth is not None and tenth.calls_len == 10
    # states are kept every EVERY events, not one per frame
    assert len(states._states) <= len(events) // EVERY + 1
    again = states.at(states.last).programs
    assert again is not None and again.transfers_len == 1000


def test_step_back_folds_forward_from_a_snapshot_and_agrees_with_a_fold_from_the_start():
    events = read(TRACES / "shares_1000.jsonl.gz").events
    states = FrameStates(trace_timeline(events), ScreenState.for_programs())
    states.at(states.last)
    for k in (10, 777, 3001, states.last - 1):
        end = states.timeline.frames[k].end
        direct = fold(events[:end], ScreenState.for_programs())
        got = states.at(k)
        assert got.programs is not None and direct.programs is not None
        assert got.programs.procs == direct.programs.procs
        assert got.programs.transfer_list() == direct.programs.transfer_list()
        assert [log_text(x).plain for x in got.log_lines()] == [
            log_text(x).plain for x in direct.log_lines()
        ]


def test_polling_events_fold_into_the_same_views():
    events = [
        ProcessSeen(10, 1, "producer", "producer --x", 1000, 0.0),
        ProcessSeen(20, 1, "consumer", "consumer", 1000, 0.0),
        FdOpened(10, 5, "/memfd:pool (deleted)", AttachKind.MEMFD, Arrival.PRESENT, 0.1),
        FdOpened(
            20, 7, "/memfd:pool (deleted)", AttachKind.MEMFD, Arrival.ARRIVED, 0.2, FdHolder(10, 5)
        ),
        SharedFile(
            AttachKind.MEMFD, "/memfd:pool (deleted)", 1, 99, [FdHolder(10, 5), FdHolder(20, 7)]
        ),
        GpuMemory(20, {0: 1 << 20}),
        ProcessGone(10, "producer", 0.5),
        Leak(
            LeakKind.FD_AFTER_PEER,
            "fd 7 held after its peer exited",
            20,
            "pid 10 exited",
            "close it",
        ),
        FdClosed(20, 7, "/memfd:pool (deleted)", AttachKind.MEMFD, 0.7),
    ]
    state = fold(events, ScreenState.for_programs())
    v = state.programs
    assert v is not None
    consumer = v.procs[20]
    assert consumer.comm == "consumer" and consumer.gpu_used == {0: 1 << 20}
    [closed] = consumer.closed
    assert closed.how == "arrived" and closed.source == (10, 5) and closed.proof == "kcmp"
    assert not v.procs[10].alive
    assert [t.how for t in v.transfer_list()] == ["kcmp"]
    assert [f.kind for f in v.finding_list()] == ["fd-after-peer"]
    assert len(trace_timeline(events).frames) == 1 + 7  # each change a frame (not GPU, not leak)


def test_a_finding_of_a_kind_the_fold_does_not_know_still_shows():
    """Other kinds (an "unknown", a queued-at-release) are folded by kind, and said by it."""
    e = LedgerFinding("queued-at-release", 5, fd=9)
    v = fold([e], ScreenState.for_programs()).programs
    assert v is not None
    [f] = v.finding_list()
    assert (f.kind, f.of, f.good) == ("queued-at-release", e, False)
    assert words_of(f.of).what == "queued-at-release"


def test_the_demo_session_folds_as_before_with_no_programs():
    state = fold(session_events())
    assert state.programs is None and state.done and state.finished is not None


@pytest.mark.parametrize("name", ["scm_pair", "quick_share", "fake_cuda_calls"])
def test_each_call_is_a_frame_and_noise_is_not(name):
    events = read(TRACES / f"{name}.jsonl.gz").events
    timeline = trace_timeline(events)
    v = fold(events, ScreenState.for_programs()).programs
    assert v is not None and timeline.frames[-1].steps == v.calls_len
    assert len(timeline.frames) < len(events)  # closes of stdio and the like are no frames


def test_how_an_fd_travelled_is_kept_as_data_and_worded_where_drawn():
    from vmmtui.stream.observed import FdTaken, MemfdCreated
    from vmmtui.view.programs import ThroughPidfd
    from vmmtui.words.programs import via_words

    events = [MemfdCreated(10, 10, 1, "pool", 5, "a1"), FdTaken(11, 11, 2, 9, 10, 5, 7, "a1")]
    v = fold(events, ScreenState.for_programs()).programs
    assert v is not None
    [t] = v.transfer_list()
    assert (t.how, t.via) == ("pidfd_getfd", ThroughPidfd(9))
    assert v.proc(11).fds[7].via == ThroughPidfd(9)
    assert via_words(t.via) == "pidfd_getfd through pidfd 9"
