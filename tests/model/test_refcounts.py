"""The refcount book through the ledger, on the calls a trace makes: each test one story of a
handle whose count never reaches zero (the same stories run as real processes in
test_refcounts_live.py)."""

from vmmtui.model.findings import FindingKind
from vmmtui.pipeline.session import RecordingSource, TraceSession
from vmmtui.stream.observed import (
    CudaCall,
    FdCloseCall,
    FdsReceived,
    FdsSent,
    LedgerFinding,
    PinnedBytes,
    ProcessExit,
    SocketEnd,
    TraceClock,
)
from vmmtui.words.findings import finding_words as said

SOCK = SocketEnd(100, 101, "@w")
#: the receiving end: the socket the sends are queued on
PEER = SocketEnd(101, 100, "@w")
A, B = 1000, 2000
MIB = 1 << 20


class Run:
    """The ledger and the refcount book of one run, as the trace session folds them."""

    def __init__(self, **kw):
        self.session = TraceSession(RecordingSource([]), live=False, **kw)
        self.book = self.session.refs.book

    def apply(self, e):
        return self.session.fold(e)

    def finish(self, at=0):
        return [*self.session.ledger.finish(at), *self.session.refs.finish(at)]

    def export_of_import(self, pid, handle):
        return self.session.refs.export_of_import(pid, handle)


def fold(events, **kw):
    run = Run(**kw)
    out = [f for e in events for f in run.apply(e)]
    return run, out


def found(out, kind):
    return [f for f in out if isinstance(f, LedgerFinding) and f.kind == kind]


def share(t, handle, fd, rfd, file, size=MIB):
    """A exports ``handle`` as ``fd`` and sends it; B receives it as ``rfd``."""
    return [
        CudaCall(A, A, t, "cuMemCreate", 0, size=size, handle=handle, handle_types=1),
        CudaCall(A, A, t + 1, "cuMemExportToShareableHandle", 0, handle=handle, fd=fd,
                 handle_types=1),
        FdsSent(A, A, t + 2, "sendmsg", SOCK, [fd], [file], 1),
        FdsReceived(B, B, t + 3, "recvmsg", PEER, [rfd], [file], 1),
    ]  # fmt: skip


def imp(t, rfd, handle):
    return CudaCall(B, B, t, "cuMemImportFromShareableHandle", 0, handle=handle, fd=rfd,
                    handle_types=1)  # fmt: skip


def test_a_second_import_of_one_allocation_is_counted_and_is_no_finding():
    """cuMemRelease: "Each time a recipient process imports a shareable handle, it needs to pair
    it with cuMemRelease": two imports are two references, legal; one never paired is said at
    the exit (import-never-released), not at the second import (NCCL imports one buffer per
    request)."""
    events = [*share(10, 0xA1, 5, 9, "f1"), imp(20, 9, 0xB1), imp(30, 9, 0xB2)]
    ledger, out = fold(events)
    assert not found(out, FindingKind.OPENED_TWICE)
    ledger.apply(CudaCall(B, B, 40, "cuMemRelease", 0, handle=0xB1))
    x = ledger.book.exports[0]
    assert x.opens[B] == [0xB2] and x.closes[B] == 1
    [left] = found(ledger.apply(ProcessExit(B, B, 50, 0)), "import-never-released")
    assert left.handle == 0xB2


def test_one_open_one_close_is_no_finding():
    events = [*share(10, 0xA1, 5, 9, "f1"), imp(20, 9, 0xB1)]
    events += [CudaCall(B, B, 30, "cuMemRelease", 0, handle=0xB1), imp(40, 9, 0xB2)]
    _, out = fold(events)
    assert not found(out, FindingKind.OPENED_TWICE)


def test_exported_never_imported_is_said_live_after_the_threshold_and_once():
    events = [
        CudaCall(A, A, 1_000, "cuMemCreate", 0, size=MIB, handle=0xA1, handle_types=1),
        CudaCall(A, A, 2_000, "cuMemExportToShareableHandle", 0, handle=0xA1, fd=5, handle_types=1),
        TraceClock(int(1.5e9)),
        TraceClock(int(2.5e9)),
        TraceClock(int(3.5e9)),
    ]
    ledger, out = fold(events, never_imported_s=2.0)
    [never] = found(out, FindingKind.EXPORTED_NEVER_IMPORTED)
    assert never.ktime == int(2.5e9) and never.pid == A and never.proof == "struct file"
    assert not found(ledger.finish(), FindingKind.EXPORTED_NEVER_IMPORTED)


def test_exported_never_imported_at_the_end_and_not_when_imported():
    _, out = fold([*share(10, 0xA1, 5, 9, "f1"), imp(20, 9, 0xB1)])
    ledger, _ = fold(share(10, 0xA1, 5, 9, "f1"))
    assert not found(out, FindingKind.EXPORTED_NEVER_IMPORTED)
    [end] = found(ledger.finish(100), FindingKind.EXPORTED_NEVER_IMPORTED)
    assert end.pid == A


def test_a_double_release_is_said_instead_of_a_bare_refusal():
    events = [
        CudaCall(A, A, 10, "cuMemCreate", 0, size=MIB, handle=0xA1, handle_types=1),
        CudaCall(A, A, 20, "cuMemRelease", 0, handle=0xA1),
        CudaCall(A, A, 30, "cuMemRelease", 1, handle=0xA1),
    ]
    _, out = fold(events)
    [twice] = found(out, FindingKind.RELEASED_TWICE)
    assert twice.ktime == 30 and "cuMemRelease(0xa1)" in said(twice).what
    assert not found(out, "refused")


def test_a_legacy_export_of_vmm_memory_is_explained_with_its_fix():
    events = [
        CudaCall(A, A, 10, "cuMemCreate", 0, size=2 * MIB, handle=0xA1, handle_types=1),
        CudaCall(A, A, 20, "cuMemMap", 0, ptr=0x7F0000, size=2 * MIB, handle=0xA1),
        CudaCall(A, A, 30, "cuIpcGetMemHandle", 1, ptr=0x7F1000),
    ]
    _, out = fold(events)
    [legacy] = found(out, FindingKind.LEGACY_EXPORT_OF_VMM)
    assert "cuMemExportToShareableHandle" in said(legacy).fix and "expandable" in said(legacy).fix
    assert not found(out, "refused")
    # a pointer outside every mapping is a refusal as before
    _, other = fold([*events[:2], CudaCall(A, A, 30, "cuIpcGetMemHandle", 1, ptr=0x100)])
    assert found(other, "refused") and not found(other, FindingKind.LEGACY_EXPORT_OF_VMM)


def test_the_exporter_releasing_its_vmm_handle_while_the_importer_maps_is_legal():
    """cuMemRelease: "The generic memory handle can be freed when there are still outstanding
    mappings made with this handle": the memory lives until the importer's handle and mapping
    go, so the exporter's release is no finding (NCCL releases at once after the export)."""
    events = [*share(10, 0xA1, 5, 9, "f1"), imp(20, 9, 0xB1)]
    events += [
        CudaCall(B, B, 25, "cuMemMap", 0, ptr=0x9000, size=MIB, handle=0xB1),
        CudaCall(A, A, 30, "cuMemRelease", 0, handle=0xA1),
    ]
    _, out = fold(events)
    assert not found(out, FindingKind.FREED_WHILE_MAPPED)
    assert [f.kind for f in out if isinstance(f, LedgerFinding)] == ["shared", "imported"]


def test_pinned_bytes_grow_one_buffer_per_step_when_one_open_of_two_is_released():
    events = []
    for step in range(3):
        t = 100 * (step + 1)
        h, rfd, file = 0xA0 + step, 9 + step, f"f{step}"
        events += share(t, h, 5 + step, rfd, file)
        events += [imp(t + 10, rfd, 0xB0 + 2 * step), imp(t + 11, rfd, 0xB1 + 2 * step)]
        events += [
            CudaCall(B, B, t + 20, "cuMemRelease", 0, handle=0xB0 + 2 * step),
            CudaCall(A, A, t + 30, "cuMemRelease", 0, handle=h),
        ]
    _, out = fold(events)
    pins = [p.bytes for p in out if isinstance(p, PinnedBytes) and p.pid == A]
    assert pins == [MIB, 2 * MIB, 3 * MIB]
    assert not found(out, FindingKind.OPENED_TWICE)


def test_the_road_and_handle_types_of_a_share_and_an_import():
    _, out = fold([*share(10, 0xA1, 5, 9, "f1"), imp(20, 9, 0xB1)])
    [shared] = found(out, "shared")
    [imported] = found(out, "imported")
    assert (shared.road, shared.exported_as) == ("scm-rights", "posix-fd")
    assert (imported.road, imported.exported_as, imported.imported_as) == (
        "scm-rights",
        "posix-fd",
        "posix-fd",
    )
    ipc = "5a" * 64
    _, legacy = fold([
        CudaCall(A, A, 10, "cuIpcGetMemHandle", 0, ptr=0x5000, ipc=ipc),
        CudaCall(B, B, 20, "cuIpcOpenMemHandle_v2", 0, ptr=0x7000, ipc=ipc),
    ])  # fmt: skip
    [opened] = found(legacy, "imported")
    assert (opened.road, opened.exported_as, opened.imported_as) == (
        "legacy-ipc",
        "ipc-handle",
        "ipc-handle",
    )


def test_an_exporter_exit_says_what_it_exported_and_nobody_opened():
    """Said at the exit where the exported fd pinned the memory until then (kept by the
    exporter to its exit, or a copy outliving it); one closed at once pinned nothing."""
    ledger, out = fold([*share(10, 0xA1, 5, 9, "f1"), ProcessExit(A, A, 30, 0)])
    [never] = found(out, FindingKind.EXPORTED_NEVER_IMPORTED)
    assert never.ktime == 30
    alone, out = fold(
        [
            CudaCall(A, A, 10, "cuMemCreate", 0, size=MIB, handle=0xA1, handle_types=1),
            CudaCall(A, A, 20, "cuMemExportToShareableHandle", 0, handle=0xA1, fd=5,
                     handle_types=1),
            ProcessExit(A, A, 30, 0),
        ]
    )  # fmt: skip
    assert [f.ktime for f in found(out, FindingKind.EXPORTED_NEVER_IMPORTED)] == [30]
    _, out = fold(
        [
            CudaCall(A, A, 10, "cuMemCreate", 0, size=MIB, handle=0xA1, handle_types=1),
            CudaCall(A, A, 20, "cuMemExportToShareableHandle", 0, handle=0xA1, fd=5,
                     handle_types=1),
            FdCloseCall(A, A, 25, 5, "", 0),
            ProcessExit(A, A, 30, 0),
        ]
    )  # fmt: skip
    assert not found(out, FindingKind.EXPORTED_NEVER_IMPORTED)


def test_the_help_names_the_default_threshold():
    import argparse

    from vmmtui.cli.trace import add_arguments
    from vmmtui.model.handles import NEVER_IMPORTED_S

    p = argparse.ArgumentParser(prog="trace")
    add_arguments(p)
    assert f"(default {NEVER_IMPORTED_S:g};" in " ".join(p.format_help().split())


def test_an_open_file_reused_by_the_kernel_names_the_newest_export():
    """The kernel frees a closed export's struct file and may hand the same address (so the same
    ``file``) to the next export: an import of it is of the newest allocation."""
    events = []
    for step in range(2):
        t = 100 * (step + 1)
        events += [*share(t, 0xA0 + step, 5, 9, "same"), imp(t + 10, 9, 0xB0 + step)]
    ledger, out = fold(events)
    imported = found(out, "imported")
    assert [said(f).detail.split("allocation ")[1].split()[0] for f in imported] == ["0xa0", "0xa1"]
    assert ledger.export_of_import(B, 0xB1) == (A, 0xA1)


def test_a_second_release_after_lost_records_is_unknown_not_a_problem():
    """A release with no reference left, but a retain may be among the records lost: unknown."""
    from vmmtui.stream.observed import TraceLost

    events = [
        CudaCall(A, A, 10, "cuMemCreate", 0, size=MIB, handle=0xA1, handle_types=1),
        CudaCall(A, A, 20, "cuMemRelease", 0, handle=0xA1),
        TraceLost(5, 24, 0, 22, 24),
        CudaCall(A, A, 30, "cuMemRelease", 0, handle=0xA1),
    ]
    _, out = fold(events)
    assert not found(out, FindingKind.RELEASED_TWICE)
    [unknown] = found(out, "unknown")
    assert "released-twice" in said(unknown).detail and unknown.lost == 5


def test_legacy_ipc_closed_twice_and_freed_under_its_importer():
    """The importer closes 3 s after the free, past the teardown window: the problem."""
    ipc = "5a" * 64
    late = 30 + 3 * 10**9
    events = [
        CudaCall(A, A, 10, "cuMemAlloc_v2", 0, ptr=0x5000, size=MIB),
        CudaCall(A, A, 11, "cuIpcGetMemHandle", 0, ptr=0x5000, ipc=ipc),
        CudaCall(B, B, 20, "cuIpcOpenMemHandle_v2", 0, ptr=0x7000, ipc=ipc),
        CudaCall(A, A, 30, "cuMemFree_v2", 0, ptr=0x5000),
        CudaCall(B, B, late, "cuIpcCloseMemHandle", 0, ptr=0x7000),
        CudaCall(B, B, late + 10, "cuIpcCloseMemHandle", 0, ptr=0x7000),
    ]
    _, out = fold(events)
    [freed] = found(out, FindingKind.FREED_WHILE_MAPPED)
    assert (freed.pid, freed.peer, freed.proof) == (A, B, "handle bytes")
    assert "freed memory" in said(freed).detail and "only 3.00 s after" in said(freed).detail
    [twice] = found(out, FindingKind.RELEASED_TWICE)
    assert (twice.pid, twice.ktime) == (B, late + 10)
    assert "cuIpcCloseMemHandle" in said(twice).what


def test_64_export_bytes_never_opened_pin_nothing_and_are_no_finding():
    """A pool pointer's export data and a legacy IPC handle are 64 bytes that take no reference
    (NCCL's init cudaIpcGetMemHandle is never opened): nothing is pinned, nothing to look at."""
    data = "07" * 64
    ledger, _ = fold(
        [
            CudaCall(A, A, 10, "cuMemPoolExportPointer", 0, ptr=0xB000, ipc=data),
            CudaCall(A, A, 11, "cuMemAlloc_v2", 0, ptr=0x5000, size=MIB),
            CudaCall(A, A, 12, "cuIpcGetMemHandle", 0, ptr=0x5000, ipc="5a" * 64),
        ]
    )
    assert not found(ledger.finish(20), FindingKind.EXPORTED_NEVER_IMPORTED)


def test_an_exported_fd_closed_at_once_pins_nothing_and_is_never_said_unimported():
    """NCCL's proxy exports a handle per request and closes the fd as soon as it is sent: once
    every copy is closed the export pins nothing, whatever became of it."""
    events = [
        *share(10, 0xA1, 5, 9, "f1"),
        FdCloseCall(A, A, 12, 5, "f1", 0),
        FdCloseCall(B, B, 13, 9, "f1", 0),
    ]
    ledger, _ = fold(events)
    assert not found(ledger.finish(100), FindingKind.EXPORTED_NEVER_IMPORTED)
    kept, _ = fold(events[:-1])  # the receiver still holds its copy: that pins the memory
    assert found(kept.finish(100), FindingKind.EXPORTED_NEVER_IMPORTED)


def test_nccls_retain_then_two_releases_is_no_finding_and_a_third_is():
    """cuMemRetainAllocationHandle: "The returned handle must be released with corresponding
    number of calls to cuMemRelease": create + retain are two references, two releases are
    right; a third has none left."""
    events = [
        CudaCall(A, A, 10, "cuMemCreate", 0, size=MIB, handle=0xA1, handle_types=1),
        CudaCall(A, A, 11, "cuMemMap", 0, ptr=0x9000, size=MIB, handle=0xA1),
        CudaCall(A, A, 12, "cuMemRetainAllocationHandle", 0, handle=0xA1, ptr=0x9000),
        CudaCall(A, A, 13, "cuMemRelease", 0, handle=0xA1),
        CudaCall(A, A, 14, "cuMemUnmap", 0, ptr=0x9000, size=MIB),
        CudaCall(A, A, 15, "cuMemRelease", 0, handle=0xA1),
    ]
    ledger, out = fold(events)
    assert [f for f in out if isinstance(f, LedgerFinding)] == []
    [third] = found(
        ledger.apply(CudaCall(A, A, 16, "cuMemRelease", 1, handle=0xA1)), "released-twice"
    )
    assert third.since == 15 and not found(out, "refused")


def test_a_mapping_left_after_the_import_was_released_is_said_when_the_exporter_dies():
    events = [*share(10, 0xA1, 5, 9, "f1"), imp(20, 9, 0xB1)]
    events += [
        CudaCall(B, B, 25, "cuMemMap", 0, ptr=0x9000, size=MIB, handle=0xB1),
        CudaCall(B, B, 26, "cuMemRelease", 0, handle=0xB1),  # the mapping keeps the memory
        ProcessExit(A, A, 40, 9),
        TraceClock(40 + 3_000_000_000),  # still mapped past the teardown window
    ]
    _, out = fold(events)
    [held] = found(out, "held-after-exporter-died")
    assert (held.pid, held.peer, held.since) == (B, A, 40) and "0x9000" in said(held).what
    assert held.ktime == 40 + 3_000_000_000  # said once the window passed, live
    # unmapped 5 ms after the exporter died: only its end, a quiet fact
    events[-1] = CudaCall(B, B, 40 + 5_000_000, "cuMemUnmap", 0, ptr=0x9000, size=MIB)
    _, out = fold(events)
    assert not found(out, "held-after-exporter-died")
    assert [f.kind for f in out if isinstance(f, LedgerFinding)][-1] == (
        "released-after-exporter-died"
    )


def test_a_second_legacy_open_refused_as_already_mapped_is_said_as_opened_twice():
    ipc = "5a" * 64
    events = [
        CudaCall(A, A, 10, "cuIpcGetMemHandle", 0, ptr=0x5000, ipc=ipc),
        CudaCall(B, B, 20, "cuIpcOpenMemHandle_v2", 0, ptr=0x7000, ipc=ipc),
        CudaCall(B, B, 30, "cuIpcOpenMemHandle_v2", 208, ipc=ipc),
    ]
    _, out = fold(events)
    [twice] = found(out, FindingKind.OPENED_TWICE)
    assert (twice.pid, twice.peer, twice.ktime, twice.proof) == (B, A, 30, "handle bytes")
    assert "CUDA_ERROR_ALREADY_MAPPED" in said(twice).detail and "0x7000" in said(twice).what
    assert not found(out, "refused")
    # refused with nothing open in this process: a refusal as before
    _, other = fold([events[0], CudaCall(B, B, 30, "cuIpcOpenMemHandle_v2", 208, ipc=ipc)])
    assert found(other, "refused") and not found(other, FindingKind.OPENED_TWICE)


def test_a_call_that_brings_nothing_never_reaches_the_book_and_a_waiting_export_still_matures():
    """The book's fast path: a close, a memfd or a send with no finding and no export waiting
    costs three tests, not the book's clock and words; with an export waiting, any call's clock
    (not only the trace's own ticks) says it never imported."""
    from vmmtui.stream.observed import FdCloseCall, MemfdCreated

    run = Run(never_imported_s=2.0)

    def untouched(*_a, **_k):
        raise AssertionError("the book was asked about a call that brings nothing")

    run.book.clock = untouched  # type: ignore[method-assign]
    plain = [MemfdCreated(A, A, 10, "x", 5, "f"), FdCloseCall(A, A, 11, 5, "f", 0)]
    assert [f for e in plain for f in run.apply(e)] == []
    del run.book.clock
    out = [f for e in [
        CudaCall(A, A, 1_000, "cuMemCreate", 0, size=MIB, handle=0xA1, handle_types=1),
        CudaCall(A, A, 2_000, "cuMemExportToShareableHandle", 0, handle=0xA1, fd=5, handle_types=1),
        FdCloseCall(A, A, int(2.5e9), 7, "g", 0),
    ] for f in run.apply(e)]  # fmt: skip
    [never] = found(out, FindingKind.EXPORTED_NEVER_IMPORTED)
    assert never.ktime == int(2.5e9) and never.pid == A


def test_a_shares_road_is_the_finding_replaced_and_the_ledger_keeps_that_one():
    import dataclasses

    run, out = fold(share(10, 0xA1, 5, 9, "f1"))
    [shared] = found(out, "shared")
    [kept] = found(run.session.ledger.findings, "shared")
    assert kept is shared and shared.road == "scm-rights"
    bare = dataclasses.replace(shared, road="", exported_as="", imported_as="")
    assert dataclasses.replace(bare, road="scm-rights", exported_as="posix-fd",
                               imported_as="posix-fd") == shared  # fmt: skip


def test_a_legacy_handle_opened_again_in_one_context_is_a_reference_closed_once_per_open():
    """cuIpcOpenMemHandle: "If the memory handle has already been opened by the current
    context, the reference count on the handle is incremented by 1 and the existing device
    pointer is returned": two opens, two closes, nothing held when the exporter goes; one close
    of two leaves it held."""
    ipc = "5a" * 64
    opened = [
        CudaCall(A, A, 10, "cuMemAlloc_v2", 0, ptr=0x5000, size=MIB),
        CudaCall(A, A, 11, "cuIpcGetMemHandle", 0, ptr=0x5000, ipc=ipc),
        CudaCall(B, B, 20, "cuIpcOpenMemHandle_v2", 0, ptr=0x7000, ipc=ipc),
        CudaCall(B, B, 21, "cuIpcOpenMemHandle_v2", 0, ptr=0x7000, ipc=ipc),
        CudaCall(B, B, 30, "cuIpcCloseMemHandle", 0, ptr=0x7000),
    ]
    _, out = fold([*opened, CudaCall(B, B, 31, "cuIpcCloseMemHandle", 0, ptr=0x7000),
                   ProcessExit(A, A, 40, 0)])  # fmt: skip
    assert [f.kind for f in out if isinstance(f, LedgerFinding)] == ["imported"]
    _, out = fold([*opened, ProcessExit(A, A, 40, 0), TraceClock(40 + 3_000_000_000)])
    [held] = found(out, "held-after-exporter-died")
    assert held.pid == B and not found(out, FindingKind.OPENED_TWICE)
