"""The ledger folds trace events into who holds what; each test is one story a CUDA engineer
chases (a share, a leak, an exporter killed under its importers)."""

from vmmtui.model.entries import Pin
from vmmtui.model.findings import Weight
from vmmtui.model.ledger import Ledger
from vmmtui.model.policy import weigh
from vmmtui.stream.observed import (
    CallRefused,
    CudaCall,
    FdCloseCall,
    FdDuplicated,
    FdsDropped,
    FdsReceived,
    FdsSent,
    FdTaken,
    MemfdCreated,
    PidfdOpened,
    ProcessExit,
    ProcessForked,
    QueuedAtRelease,
    SocketEnd,
)
from vmmtui.words.findings import finding_words as said
from vmmtui.words.findings import pin_words

SOCK = SocketEnd(100, 101, "@vmm")
#: the receiving end: the socket the sends are queued on
PEER = SocketEnd(101, 100, "@vmm")
A, B = 1000, 2000


def fold(events):
    ledger = Ledger()
    found = [f for e in events for f in ledger.apply(e)]
    return ledger, found


def kinds(found):
    return [(f.kind, f.pid) for f in found]


def test_a_send_is_matched_to_its_receive_by_the_open_file():
    ledger, found = fold(
        [
            MemfdCreated(A, A, 1, "x", 5, "f1"),
            MemfdCreated(A, A, 2, "y", 6, "f2"),
            FdsSent(A, A, 3, "sendmsg", SOCK, [6], ["f2"], 1),
            FdsSent(A, A, 4, "sendmsg", SOCK, [5], ["f1"], 1),
            FdsReceived(
                B,
                B,
                5,
                "recvmsg",
                PEER,
                [
                    9,
                ],
                ["f1"],
                1,
            ),
            FdsReceived(B, B, 6, "recvmsg", PEER, [8], ["f2"], 1),
            FdCloseCall(B, B, 7, 9, "f1", 0),
            FdCloseCall(B, B, 7, 8, "f2", 0),
            FdCloseCall(A, A, 8, 5, "f1", 0),
            ProcessExit(B, B, 9, 0),
        ]
    )
    assert kinds(found) == [("shared", B), ("shared", B)]
    t = {(x.from_fd, x.to_fd) for x in ledger.transfers}
    assert t == {(5, 9), (6, 8)}  # by file, not by order
    assert found[0].peer == A and "fd 9 = pid 1000's fd 5" in said(found[0]).what
    assert [h.fd for h in ledger.holders("f2")] == [6]  # A's own copy; B's went at exit
    assert ledger.finish() == []


def test_a_received_fd_never_closed_is_a_leak_at_exit():
    _, found = fold(
        [
            FdsSent(A, A, 1, "sendmsg", SOCK, [5], ["f1"], 1),
            FdsReceived(B, B, 2, "recvmsg", PEER, [7], ["f1"], 1),
            ProcessExit(B, B, 3, 0),
        ]
    )
    assert kinds(found) == [("shared", B), ("fd-never-closed", B)]
    assert found[1].peer == A


def test_the_fix_for_an_fd_never_closed_follows_what_the_fd_is():
    """A socket or a file made before the trace (nginx's, Chromium's) gets no CUDA advice; a memfd
    gets the memfd's; a driver export the import's."""

    def fix(made: list) -> str:
        _, found = fold(
            [
                *made,
                FdsSent(A, A, 2, "sendmsg", SOCK, [5], ["f1"], 1),
                FdsReceived(B, B, 3, "recvmsg", SOCK, [7], ["f1"], 1),
                ProcessExit(B, B, 4, 0),
            ]
        )
        [never] = [f for f in found if f.kind == "fd-never-closed"]
        return said(never).fix

    unseen = fix([])
    assert "import" not in unseen and "cuMem" not in unseen and "receive" in unseen
    memfd = fix([MemfdCreated(A, A, 1, "pool", 5, "f1")])
    assert "mapped" in memfd and "cuMem" not in memfd
    export = fix(
        [
            CudaCall(A, A, 0, "cuMemCreate", 0, size=2 << 20, handle_types=1, handle=0xA),
            CudaCall(A, A, 1, "cuMemExportToShareableHandle", 0, handle_types=1, handle=0xA, fd=5),
        ]
    )
    assert "cuMemImportFromShareableHandle" in export


def test_a_kept_fd_is_named_by_whether_its_file_carries_memory_and_weighs_as_a_fact():
    """nginx's workers and Chromium's processes keep the sockets and pipes they were sent until
    they exit, and Chromium's renderers their shared regions: facts, released by the exit, not
    leaks. A memfd kept so (and a file whose kind the trace did not see: it may carry memory) is
    named as memory held until exit, with its fix; the others by their kind. The one count says
    so."""
    from vmmtui.model.policy import tally

    ledger, found = fold(
        [
            FdsSent(
                A,
                A,
                1,
                "sendmsg",
                SOCK,
                [5, 6, 7],
                ["fs", "fp", "fm"],
                1,
                ["socket", "pipe", "memfd"],
            ),
            FdsReceived(B, B, 2, "recvmsg", PEER, [8, 9, 10], ["fs", "fp", "fm"], 1),
            FdsSent(A, A, 3, "sendmsg", SOCK, [11], ["fu"], 1),  # an old record: no kinds
            FdsReceived(B, B, 4, "recvmsg", PEER, [12], ["fu"], 1),
            ProcessExit(B, B, 5, 0),
        ]
    )
    kept = {f.fd: (f.kind, f.name) for f in found if f.kind != "shared"}
    assert kept == {
        8: ("fd-closed-by-exit", "socket"),
        9: ("fd-closed-by-exit", "pipe"),
        10: ("fd-never-closed", "memfd"),
        12: ("fd-never-closed", ""),
    }
    t = tally([], ledger.findings.by)
    # kept until a normal exit, every one released by it: facts (model/policy.py), the memory
    # ones counted as held until exit, the others by their kind of file
    assert (t.good, t.bad, t.quiet, t.total) == (4, 0, 4, 8)
    assert t.quiet_by == {"socket": 1, "pipe": 1, "held until exit": 2}
    at_exit = {f.fd: said(f) for f in found if f.kind != "shared"}
    assert at_exit[8].fix == "" and "a socket carries no memory" in at_exit[8].detail
    assert "memfd" in at_exit[10].detail and "mapped" in at_exit[10].fix
    assert "may carry memory" in at_exit[12].detail and at_exit[12].fix


def test_a_receive_folded_before_its_send_learns_what_the_file_is_from_the_send():
    _, found = fold(
        [
            FdsReceived(B, B, 2, "recvmsg", PEER, [8], ["fs"], 1),
            FdsSent(A, A, 1, "sendmsg", SOCK, [5], ["fs"], 1, ["socket"]),
            ProcessExit(B, B, 3, 0),
        ]
    )
    assert [(f.kind, f.name) for f in found] == [("shared", ""), ("fd-closed-by-exit", "socket")]


def test_a_socket_taken_with_pidfd_getfd_is_what_its_holder_was_sent():
    C = 3000
    _, found = fold(
        [
            FdsSent(C, C, 1, "sendmsg", SOCK, [4], ["fs"], 1, ["socket"]),
            FdsReceived(A, A, 2, "recvmsg", PEER, [5], ["fs"], 1),
            FdTaken(B, B, 3, pidfd=4, target=A, target_fd=5, fd=9, file="fs"),
            ProcessExit(B, B, 4, 0),
        ]
    )
    assert [(f.pid, f.kind, f.name) for f in found if f.kind != "shared"] == [
        (B, "fd-closed-by-exit", "socket")
    ]


def test_what_a_file_is_follows_its_fd_through_a_fork_and_a_dup():
    C, A2 = 3000, 1001
    _, found = fold(
        [
            FdsSent(C, C, 1, "sendmsg", SOCK, [4], ["fs"], 1, ["socket"]),
            FdsReceived(A, A, 2, "recvmsg", PEER, [5], ["fs"], 1),
            ProcessForked(A, A, 3, A2, "worker"),
            FdDuplicated(A2, A2, 4, "dup", 5, 6, "fs"),
            FdTaken(B, B, 5, pidfd=4, target=A2, target_fd=6, fd=9, file="fs"),
            ProcessExit(B, B, 6, 0),
        ]
    )
    assert [(f.pid, f.kind, f.name) for f in found if f.kind != "shared"] == [
        (B, "fd-closed-by-exit", "socket")
    ]


def test_a_failed_send_sends_nothing_and_an_unreceived_one_is_no_finding_by_itself():
    _, found = fold(
        [
            FdsSent(A, A, 1, "sendmsg", SOCK, [5], ["f1"], -32),
            FdsSent(A, A, 2, "sendmsg", SOCK, [6], ["f2"], 1),
        ]
    )
    assert found == []
    ledger, _ = fold([FdsSent(A, A, 2, "sendmsg", SOCK, [6], ["f2"], 1)])
    assert ledger.finish() == []  # a receive not seen is no evidence: a process not traced?
    assert ledger.unreceived == 1


def test_in_flight_is_the_kernels_word_that_the_fd_was_left_queued():
    ledger, found = fold(
        [
            FdsSent(A, A, 2, "sendmsg", SOCK, [6], ["f2"], 1),
            QueuedAtRelease(B, B, 3, SOCK.ino, ("f2",), 3),
        ]
    )
    [f] = found
    assert (f.kind, f.pid, f.file) == ("in-flight", A, "f2")
    assert "fd 6 sent, never received" in said(f).what and "still queued" in said(f).detail
    assert ledger.fds_not_read == {
        "queued": 2
    }  # the kernel counted 3, the record held 1: nothing claimed
    assert ledger.finish() == [] and ledger.unreceived == 0


def test_pidfd_getfd_is_a_share_and_its_refusal_carries_the_cause():
    _, found = fold(
        [
            MemfdCreated(A, A, 1, "x", 5, "f1"),
            PidfdOpened(B, B, 2, A, 3),
            FdTaken(B, B, 3, 3, A, 5, 4, "f1"),
            FdTaken(B, B, 4, 3, A, 6, -1),
            CallRefused(B, "pidfd_getfd", "EPERM", A, "another PID namespace", "--pid=host", 4),
            FdCloseCall(B, B, 5, 4, "f1", 0),
            ProcessExit(B, B, 6, 0),
        ]
    )
    assert kinds(found) == [("shared", B), ("refused", B)]
    assert found[0].peer == A and said(found[1]).fix == "--pid=host"


def test_close_range_closes_every_fd_in_it():
    ledger, found = fold(
        [
            FdsSent(A, A, 1, "sendmsg", SOCK, [5, 6], ["f1", "f2"], 1),
            FdsReceived(B, B, 2, "recvmsg", PEER, [7, 8], ["f1", "f2"], 1),
            FdCloseCall(B, B, 3, 3, "", 0, last=2**31 - 1, call="close_range"),
            ProcessExit(B, B, 4, 0),
        ]
    )
    assert [k for k, _ in kinds(found)] == ["shared", "shared"]
    assert [(h.pid, h.how) for h in ledger.holders("f1")] == [(A, "sent")]  # never closed its own


def cuda(pid, t, func, **kw):
    return CudaCall(pid, pid, t, func, kw.pop("result", 0), **kw)


def vmm_story(exporter_exits_first: bool):
    events = [
        cuda(A, 1, "cuMemCreate", size=2 << 20, device=0, handle_types=1, handle=0xA1),
        cuda(A, 2, "cuMemExportToShareableHandle", handle=0xA1, fd=37, handle_types=1),
        FdsSent(A, A, 3, "sendmsg", SOCK, [37], ["g1"], 1),
        FdsReceived(B, B, 4, "recvmsg", PEER, [38], ["g1"], 1),
        cuda(B, 5, "cuMemImportFromShareableHandle", handle=0xB1, fd=38),
        FdCloseCall(B, B, 6, 38, "g1", 0),
        cuda(B, 7, "cuMemMap", ptr=0x7000, size=2 << 20, handle=0xB1),
    ]
    if exporter_exits_first:
        events.append(ProcessExit(A, A, 8, 9))
    events.append(ProcessExit(B, B, 9, 0))
    return fold(events)


def test_an_import_is_traced_back_to_its_exporters_allocation():
    ledger, found = vmm_story(False)
    alloc = ledger.allocations[(A, 0xA1)]
    assert alloc.exported == [(37, "g1")]  # the driver's fd, linked to its file by the send
    assert [(i.pid, i.handle) for i in alloc.imports] == [(B, 0xB1)]
    assert [m.ptr for m in alloc.mappings] == [0x7000]
    imported = [f for f in found if f.kind == "imported"]
    assert imported[0].peer == A and "2097152 bytes" in said(imported[0]).detail
    assert ("import-never-released", B) in kinds(found)


def test_an_exporter_killed_under_its_importers_is_said():
    ledger, found = vmm_story(True)
    held = [f for f in found if f.kind == "held-after-exporter-died"]
    assert [(f.pid, f.peer) for f in held] == [(B, A)]


def test_pins_say_who_keeps_an_allocation_alive():
    ledger = Ledger()
    for e in [
        cuda(A, 1, "cuMemCreate", size=4096, device=0, handle_types=1, handle=0xA1),
        cuda(A, 2, "cuMemExportToShareableHandle", handle=0xA1, fd=37),
        FdsSent(A, A, 3, "sendmsg", SOCK, [37], ["g1"], 1),
        FdsReceived(B, B, 4, "recvmsg", PEER, [38], ["g1"], 1),
        cuda(B, 5, "cuMemImportFromShareableHandle", handle=0xB1, fd=38),
        cuda(A, 6, "cuMemRelease", handle=0xA1),
        FdCloseCall(A, A, 7, 37, "g1", 0),
    ]:
        ledger.apply(e)
    pins = ledger.pins(ledger.allocations[(A, 0xA1)])
    assert pins == [Pin(B, "fd", 38, "received"), Pin(B, "import", 0xB1)]
    assert [pin_words(p) for p in pins] == [
        "pid 2000: fd 38 (received)",
        "pid 2000: imported handle 0xb1",
    ]


def test_legacy_ipc_is_matched_by_the_handle_bytes():
    ipc = "5a" * 64
    _, found = fold(
        [
            cuda(A, 1, "cuIpcGetMemHandle", ptr=0x9000, ipc=ipc),
            cuda(B, 2, "cuIpcOpenMemHandle_v2", ptr=0x5000, ipc=ipc),
            cuda(B, 3, "cuIpcOpenMemHandle_v2", ptr=0x6000, ipc="00" * 64),
            ProcessExit(A, A, 4, 9),
        ]
    )
    assert [(f.kind, f.pid, f.peer) for f in found] == [
        ("imported", B, A),
        ("imported", B, 0),
        ("held-after-exporter-died", B, A),
    ]


def test_a_failed_driver_call_is_a_refusal_with_a_fix():
    _, found = fold([cuda(A, 1, "cuMemExportToShareableHandle", result=801, handle=1)])
    assert found[0].kind == "refused" and "requestedHandleTypes" in said(found[0]).fix


def test_a_refused_fabric_allocation_is_a_probe_until_fabric_worked_then_names_the_imex_channel():
    """A capability probe's fabric cuMemCreate (vmmtui's, PyTorch's, NCCL's) is refused with
    CUDA_ERROR_NOT_PERMITTED where there is no IMEX channel (seen on the H100): a probe, no finding.
    Once fabric allocations worked in that process, a refusal is a refusal, said by name."""
    ledger, found = fold([CudaCall(A, A, 1, "cuMemCreate", 800, size=2 << 20, handle_types=8)])
    assert [type(f).__name__ for f in found] == ["CapabilityProbe"] and not ledger.findings
    _, found = fold(
        [
            CudaCall(A, A, 1, "cuMemCreate", 0, size=2 << 20, handle_types=8, handle=0xA),
            CudaCall(A, A, 2, "cuMemCreate", 800, size=2 << 20, handle_types=8),
        ]
    )
    assert kinds(found) == [("refused", A)]
    assert "CUDA_ERROR_NOT_PERMITTED" in said(found[0]).detail and "IMEX" in said(found[0]).detail
    assert "nvidia-imex" in said(found[0]).fix


def test_the_exporter_of_a_memfd_dies_while_its_importer_holds_it():
    """Seen from the first call: A made the memfd and sent it, B received it and holds it."""
    _, found = fold(
        [
            MemfdCreated(A, A, 1, "pool", 5, "f1"),
            FdsSent(A, A, 2, "sendmsg", SOCK, [5], ["f1"], 1),
            FdsReceived(B, B, 3, "recvmsg", PEER, [7], ["f1"], 1),
            ProcessExit(A, A, 4, 9),  # kill -9
            FdCloseCall(B, B, 5, 7, "f1", 0),
            ProcessExit(B, B, 6, 0),
        ]
    )
    assert kinds(found) == [
        ("shared", B),
        ("held-after-exporter-died", B),
        ("released-after-exporter-died", B),
    ]
    held, over = found[1], found[2]
    assert held.peer == A and held.file == "f1" and "SIGKILL" in said(held).detail
    assert "memfd pool" in said(held).detail and "fd 7" in said(held).detail
    # once B closes its fd the hold is over: said in the past, a fact (the problem counted once)
    assert (over.ktime, over.since, over.via) == (5, 4, "close")
    assert (
        said(over).what
        == f"held pid {A}'s memory 0.0 s after pid {A} was killed by SIGKILL; released by close"
    )
    assert weigh(over) is Weight.QUIET


def test_a_share_from_before_the_trace_is_judged_at_an_exit_without_naming_a_direction():
    """``trace -p``'s frame 0 (what /proc and kcmp showed at the start): A and B hold one open
    file. When A dies, B still holding it is said as possible: who made it was not seen. The
    kernel's name for the file, learnt later from a send, joins the two."""
    from vmmtui.stream.events import FdHolder, FdOpened, ProcessSeen, SharedFile

    target = "/memfd:held (deleted)"
    start = [
        ProcessSeen(A, 1, "exporter", "", 0, 0.0),
        FdOpened(A, 4, target, "memfd", "present", 0.0, FdHolder(B, 3)),
        ProcessSeen(B, A, "importer", "", 0, 0.0),
        FdOpened(B, 3, target, "memfd", "present", 0.0, FdHolder(A, 4)),
        FdOpened(B, 5, target, "memfd", "present", 0.0, FdHolder(A, 4)),
        SharedFile("memfd", target, 1, 15, [FdHolder(A, 4), FdHolder(B, 3), FdHolder(B, 5)]),
    ]
    shares = [("shared", B), ("shared", B)]  # B's two fds are A's open file: kcmp proves each
    ledger, found = fold([*start, ProcessExit(A, A, 10, 9)])
    assert (
        found[0].proof == "kcmp"
        and found[0].peer == A
        and said(found[0]).what == f"fd 3 = pid {A}'s fd 4"
    )
    assert kinds(found) == [*shares, ("possible-held-after-exporter-died", B)]  # once for B's two
    assert "which of them made it was not seen" in said(found[-1]).detail and found[-1].peer == A
    ledger, found = fold(
        [*start, FdsSent(B, B, 2, "sendmsg", SOCK, [3], ["f9"], 1), ProcessExit(A, A, 10, 0)]
    )
    assert {h.file for h in ledger.holdings.values()} == {"f9"}  # the kernel's name, for all
    assert found[-1].kind == "possible-held-after-exporter-died" and found[-1].file == "f9"
    _, found = fold([*start, ProcessExit(B, B, 9, 0)])  # either may have made it: said alike
    assert kinds(found) == [*shares, ("possible-held-after-exporter-died", A)]
    ledger, found = fold(
        [
            *start,
            FdCloseCall(B, B, 5, 3, "", 0),
            FdCloseCall(B, B, 6, 5, "", 0),
            ProcessExit(A, A, 10, 9),
        ]
    )
    assert kinds(found) == shares  # B let go before A died: nothing held


def test_fds_inherited_in_a_process_tree_are_no_share_at_an_exit():
    _, found = fold(
        [
            MemfdCreated(A, A, 1, "x", 5, "f1"),
            ProcessForked(A, A, 2, B),
            ProcessExit(A, A, 3, 0),
        ]
    )
    assert found == []


def test_one_file_over_two_sockets_names_the_sender_of_each_socket():
    other, other_peer = SocketEnd(200, 201, "@b"), SocketEnd(201, 200, "@b")
    C = 3000
    ledger, found = fold(
        [
            FdsSent(A, A, 1, "sendmsg", SOCK, [5], ["f"], 1),
            FdsSent(C, C, 2, "sendmsg", other, [7], ["f"], 1),  # the same open file
            FdsReceived(B, B, 3, "recvmsg", other_peer, [9], ["f"], 1),
            FdsReceived(B + 1, B + 1, 4, "recvmsg", PEER, [9], ["f"], 1),
        ]
    )
    assert [(f.pid, f.peer, said(f).what) for f in found] == [
        (B, C, "fd 9 = pid 3000's fd 7"),
        (B + 1, A, "fd 9 = pid 1000's fd 5"),
    ]


def test_an_fd_dropped_by_read_ends_its_send():
    ledger, found = fold(
        [
            FdsSent(A, A, 1, "sendmsg", SOCK, [5], ["f"], 1),
            FdsDropped(B, B, 2, "read", PEER, ("f",), 1),
        ]
    )
    [f] = found
    assert (f.kind, f.pid, f.peer, f.file) == ("fds-dropped", B, A, "f")
    assert not ledger.in_flight and not ledger.finish()
