"""A legacy cuMemFree under an importer's open, folded from the calls: "Calling cuMemFree on an
exported memory region before calling cuIpcCloseMemHandle in the importing context will result
in undefined behavior" (CUDA Driver API, cuIpcOpenMemHandle). A healthy teardown (NCCL's legacy
p2p road: each rank frees its own buffer and closes its peer's at once) frees before the peer
closes by a fraction of a second: within the teardown window that is a quiet fact in the past;
an importer still holding past it is the problem, said then (live, on the clock)."""

from vmmtui.model.findings import TORN_DOWN, FindingKind, Weight
from vmmtui.model.handles import TEARDOWN_S
from vmmtui.model.policy import counted_as, tally, weigh
from vmmtui.pipeline.session import RecordingSource, TraceSession
from vmmtui.stream.observed import CudaCall, LedgerFinding, ProcessExit, TraceClock, TraceLost
from vmmtui.words.findings import finding_words as said
from vmmtui.words.findings import quiet_words

A, B = 887, 888
MIB = 1 << 20
S = 10**9
IPC = "5a" * 64
T0 = 12 * S  # the free


def shared(free_at: int = T0) -> list:
    """A allocates, exports as legacy IPC; B opens it; A frees it at ``free_at``."""
    return [
        CudaCall(A, A, 10 * S, "cuMemAlloc_v2", 0, ptr=0x5000, size=MIB),
        CudaCall(A, A, 10 * S + 1, "cuIpcGetMemHandle", 0, ptr=0x5000, ipc=IPC),
        CudaCall(B, B, 11 * S, "cuIpcOpenMemHandle_v2", 0, ptr=0x7000, ipc=IPC),
        CudaCall(A, A, free_at, "cuMemFree_v2", 0, ptr=0x5000),
    ]


def close(t: int) -> CudaCall:
    return CudaCall(B, B, t, "cuIpcCloseMemHandle", 0, ptr=0x7000)


def run(events: list) -> tuple[TraceSession, list[tuple[int, LedgerFinding]]]:
    """Fold ``events`` as the trace does, then its end; each finding with the index of the
    event that brought it (len(events): the end)."""
    session = TraceSession(RecordingSource([]), live=False)
    out = [(i, f) for i, e in enumerate(events) for f in session.fold(e)]
    end = [*session.ledger.finish(), *session.refs.finish()]
    return session, [
        *((i, f) for i, f in out if isinstance(f, LedgerFinding)),
        *((len(events), f) for f in end),
    ]


def kinds(found: list[tuple[int, LedgerFinding]]) -> list[str]:
    return [f.kind for _, f in found if f.kind not in ("shared", "imported")]


def test_a_free_the_importer_closes_within_the_window_is_one_quiet_fact_in_the_past():
    closed = T0 + 410_000_000  # 0.41 s later, as NCCL's two ranks did on two H200s
    _, found = run([*shared(), close(closed)])
    assert kinds(found) == ["freed-at-teardown"]
    [(i, f)] = [(i, f) for i, f in found if f.kind == "freed-at-teardown"]
    assert i == 4 and f.ktime == closed  # said at the close, not at the free
    assert (f.pid, f.peer, f.proof, f.gap_ns, f.via) == (
        A,
        B,
        "handle bytes",
        410_000_000,
        "closed",
    )
    assert weigh(f) is Weight.QUIET
    w = said(f)
    assert w.what == "freed 0x5000 0.41 s before pid 888 closed its handle"
    assert "both sides tore down together" in w.detail and "undefined" in w.detail


def test_a_free_the_importer_still_holds_past_the_window_is_the_problem_said_on_the_clock():
    tick = T0 + int((TEARDOWN_S + 0.5) * S)
    _, found = run([*shared(), TraceClock(T0 + S), TraceClock(tick), close(tick + S)])
    assert kinds(found) == ["freed-while-mapped"]
    [(i, f)] = [(i, f) for i, f in found if f.kind == "freed-while-mapped"]
    assert i == 5 and f.ktime == tick  # live: at the clock past the window, before the close
    assert weigh(f) is Weight.PROBLEM and f.via == ""
    assert "pid 888 still held it 2.50 s after the free" in said(f).detail


def test_an_importer_that_exits_within_the_window_lets_it_go():
    _, found = run([*shared(), ProcessExit(B, B, T0 + S, 0)])
    assert "freed-while-mapped" not in kinds(found)
    [f] = [f for _, f in found if f.kind == "freed-at-teardown"]
    assert f.via == "exited" and said(f).what.endswith("before pid 888 exited")


def test_a_free_still_held_when_the_trace_ends_is_the_problem_at_the_end():
    events = shared()
    _, found = run(events)
    assert kinds(found) == ["freed-while-mapped"]
    assert found[-1][0] == len(events)  # settled by the end


def test_a_free_closed_within_the_window_after_lost_records_stays_quiet_and_unknown():
    lost = TraceLost(3, T0 + 200, 0, T0 + 100, T0 + 200)
    _, found = run([*shared(), lost, close(T0 + S)])
    [f] = [f for _, f in found if f.kind not in ("shared", "imported")]
    assert (f.kind, f.was) == ("unknown", "freed-at-teardown")
    assert weigh(f) is Weight.QUIET


def test_teardowns_are_counted_as_quiet_facts_by_their_own_kind():
    _, found = run([*shared(), close(T0 + S)])
    t = tally(counted_as(f) for _, f in found)
    assert t.bad == 0 and t.quiet_by == {TORN_DOWN: 1}
    assert quiet_words(t.quiet, t.quiet_by) == (
        "1 legacy free let go by the importer within the teardown window"
    )
    assert FindingKind.FREED_AT_TEARDOWN == "freed-at-teardown"


def test_a_second_free_of_the_pointer_while_one_waits_is_not_a_second_fact():
    again = CudaCall(A, A, T0 + 100, "cuMemFree_v2", 0, ptr=0x5000)
    _, found = run([*shared(), again, close(T0 + S)])
    assert kinds(found) == ["freed-at-teardown"]
