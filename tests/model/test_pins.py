"""The pins of a memory file folded from the events (the mapping events come from the kernel's
mmap/munmap capture; here they are fed as the tracer emits them): a mapping pins the memory
after its fd is closed, until munmap, mremap away, exec or exit; fork copies it. What a process
still pins at exit of memory that came from another is said; what it let go is not."""

from vmmtui.model.findings import Weight
from vmmtui.model.ledger import Ledger
from vmmtui.model.policy import weigh
from vmmtui.stream.observed import (
    FdCloseCall,
    FdDuplicated,
    FdsReceived,
    FdsSent,
    MemfdCreated,
    MemoryMapped,
    MemoryUnmapped,
    ProcessExec,
    ProcessExit,
    ProcessForked,
    SocketEnd,
)
from vmmtui.words.findings import finding_words as said

SOCK = SocketEnd(100, 101, "@p")
PEER = SocketEnd(101, 100, "@p")
A, B, C = 1000, 2000, 3000
MAPPED = 0x7F0000000000


def fold(events):
    ledger = Ledger()
    return ledger, [f for e in events for f in ledger.apply(e)]


def kinds(out):
    return [(f.kind, f.pid) for f in out]


def share(t=1, file="f1", name="bucket"):
    """A makes a memfd, sends it and closes its own fd; B receives it as fd 7."""
    return [
        MemfdCreated(A, A, t, name, 5, file),
        FdsSent(A, A, t + 1, "sendmsg", SOCK, [5], [file], 1),
        FdCloseCall(A, A, t + 2, 5, file, 0),
        FdsReceived(B, B, t + 3, "recvmsg", PEER, [7], [file], 1),
    ]


def mapped(t, pid=B, fd=7, file="f1", addr=MAPPED):
    return MemoryMapped(pid, pid, t, fd, file, addr, 1 << 16, kind="memfd:bucket")


def test_a_mapping_kept_after_the_fd_is_closed_is_held_at_exit_by_the_mapping():
    events = [*share(), mapped(10), FdCloseCall(B, B, 11, 7, "f1", 0), ProcessExit(B, B, 20, 0)]
    _, out = fold(events)
    assert kinds(out) == [("shared", B), ("held-at-exit", B)]
    held = out[1]
    assert (held.how, held.ptr, held.opens, held.fds, held.peer) == (
        "mapping",
        MAPPED,
        [MAPPED],
        [],
        A,
    )
    assert f"a mapping at {MAPPED:#x}" in said(held).what and "mapped" in said(held).detail


def test_a_dup_kept_after_the_received_fd_is_closed_is_held_at_exit_by_the_dup():
    events = [
        *share(),
        FdDuplicated(B, B, 10, "dup", 7, 9, "f1"),
        FdCloseCall(B, B, 11, 7, "f1", 0),
        ProcessExit(B, B, 20, 0),
    ]
    _, out = fold(events)
    assert kinds(out) == [("shared", B), ("held-at-exit", B)]
    assert out[1].fds == [9] and "by fd 9" in said(out[1]).what


def test_munmap_or_mremap_away_lets_go_and_a_moved_mapping_still_pins():
    base = [*share(), mapped(10), FdCloseCall(B, B, 11, 7, "f1", 0)]
    _, out = fold([*base, MemoryUnmapped(B, B, 12, MAPPED, 1 << 16), ProcessExit(B, B, 20, 0)])
    assert kinds(out) == [("shared", B)]
    moved = MemoryUnmapped(B, B, 12, MAPPED, 1 << 16, call="mremap", new_addr=MAPPED + (1 << 20))
    _, out = fold([*base, moved, ProcessExit(B, B, 20, 0)])
    assert kinds(out) == [("shared", B), ("held-at-exit", B)] and out[1].ptr == MAPPED + (1 << 20)
    # a munmap of part of it leaves the rest mapped: still pinned
    part = MemoryUnmapped(B, B, 12, MAPPED, 1 << 12)
    _, out = fold([*base, part, ProcessExit(B, B, 20, 0)])
    assert kinds(out) == [("shared", B), ("held-at-exit", B)]


def test_fork_copies_a_mapping_and_exec_drops_it():
    base = [*share(), mapped(10), FdCloseCall(B, B, 11, 7, "f1", 0)]
    ledger, _ = fold([*base, ProcessForked(B, B, 12, C, "child")])
    assert ledger.maps[C][MAPPED].file == "f1"
    _, out = fold(
        [*base, MemoryUnmapped(B, B, 12, MAPPED, 1 << 16), ProcessExec(B, B, 13, "/bin/x", "x"),
         ProcessExit(B, B, 20, 0)]
    )  # fmt: skip
    assert kinds(out) == [("shared", B)]
    _, out = fold([*base, ProcessExec(B, B, 13, "/bin/x", "x"), ProcessExit(B, B, 20, 0)])
    assert kinds(out) == [("shared", B)]  # exec replaced the address space: nothing pinned


def test_an_exporter_killed_while_its_importer_only_maps_is_said_then_in_the_past_at_munmap():
    events = [
        *share(),
        mapped(10),
        FdCloseCall(B, B, 11, 7, "f1", 0),
        ProcessExit(A, A, 1_000_000_000, 9),  # killed by SIGKILL, its own fd closed long ago
        MemoryUnmapped(B, B, 3_500_000_000, MAPPED, 1 << 16),
    ]
    _, out = fold(events)
    assert kinds(out) == [
        ("shared", B),
        ("held-after-exporter-died", B),
        ("released-after-exporter-died", B),
    ]
    held, over = out[1], out[2]
    assert held.fd == -1 and held.ptr == MAPPED and "still maps" in said(held).what
    assert (
        said(over).what
        == f"held pid {A}'s memory 2.5 s after pid {A} was killed by SIGKILL; released by munmap"
    )
    assert weigh(over) is Weight.QUIET and weigh(held) is Weight.PROBLEM


def test_an_fd_made_and_kept_by_the_process_itself_is_no_pin_on_another():
    events = [MemfdCreated(B, B, 1, "own", 5, "f9"), mapped(2, fd=5, file="f9"),
              ProcessExit(B, B, 3, 0)]  # fmt: skip
    _, out = fold(events)
    assert out == []
