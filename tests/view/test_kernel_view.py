"""The kernel's record of the demo's workers in the view model: each call filed under the step that
ran, and "same struct file" said only where the kernel's file identity matched (not fd numbers)."""

from __future__ import annotations

from events_fixture import PRODUCER_PID, pid_of, session_batches

from vmmtui.plan.steps import build_plan
from vmmtui.stream.events import StepStarted
from vmmtui.stream.observed import FdsReceived, FdsSent, SocketEnd, TraceStarted
from vmmtui.view import ScreenState, fold
from vmmtui.view.kernel import OUTSIDE
from vmmtui.words.log import log_text
from vmmtui.words.trace import kernel_step_line

PLAN = build_plan()
SEND, RECEIVE = PLAN.index(("producer", "send")), PLAN.index(("consumer", "receive"))
SOCK = SocketEnd(11, 12, "/tmp/vmmtui-1-x/vmmtui.sock")
PEER = SocketEnd(12, 11, "/tmp/vmmtui-1-x/vmmtui.sock")


def stream(received_file: str):
    consumer = pid_of("consumer")
    return [
        *session_batches()[0],
        TraceStarted("ebpf", [PRODUCER_PID, consumer]),
        StepStarted(SEND, "producer", "send"),
        FdsSent(PRODUCER_PID, PRODUCER_PID, 10, "sendmsg", SOCK, [38], ["f00d"], 229),
        StepStarted(RECEIVE, "consumer", "receive"),
        FdsReceived(consumer, consumer, 20, "recvmsg", PEER, [39], [received_file], 229),
    ]


def test_a_receive_of_the_sent_struct_file_names_the_senders_fd_in_its_step():
    state = fold(stream("f00d"))
    assert state.programs is None  # the demo's own screen, not a trace's
    assert [type(f.event) for f in state.kernel.at(SEND)] == [FdsSent]
    facts = state.kernel.at(RECEIVE)
    assert state.kernel_facts() == facts
    line = kernel_step_line(facts).plain
    assert line == (
        "kernel: producer sendmsg SCM_RIGHTS fd 38 → consumer fd 39 (recvmsg), same struct file"
    )
    assert state.kernel.at(OUTSIDE) == ()
    assert any(log_text(ln).plain.startswith("kern eBPF follows") for ln in state.log_lines())


def test_a_receive_of_another_struct_file_claims_nothing():
    line = kernel_step_line(fold(stream("beef")).kernel_facts()).plain
    assert "same struct file" not in line and "producer" not in line
    assert line == "kernel: consumer recvmsg: SCM_RIGHTS → new fd 39 (its send was not seen)"


def test_a_trace_still_folds_its_calls_into_the_programs_view():
    events = stream("f00d")[-3:]
    state = fold(events, ScreenState.for_programs())
    assert state.kernel is None and state.programs is not None


def test_stable_mode_masks_the_runs_file_keys_and_inodes():
    from vmmtui.view import Display

    state = fold(stream("f00d")[:-2], display=Display(stable=True))
    line = log_text(state.log_lines()[-1]).plain
    assert line.startswith("kern producer sendmsg SCM_RIGHTS fd 38 over unix socket")
    assert "(inode …, peer …)" in line and "11" not in line


def test_a_receive_names_the_send_queued_on_its_own_socket_not_the_file_s_last_sender():
    """One open file sent twice over two socket pairs (the producer to the consumer; a third
    process, also to the consumer, later): the consumer's receive on the producer's socket is
    the producer's send, as the world matches it (``model.matching``), although the other send
    of the same struct file came last."""
    consumer, other = pid_of("consumer"), 4242
    side = SocketEnd(21, 22, "@side", sk="s21", peer_sk="s22")
    side_peer = SocketEnd(22, 21, "@side", sk="s22", peer_sk="s21")
    sock = SocketEnd(11, 12, "/tmp/vmmtui-1-x/vmmtui.sock", sk="s11", peer_sk="s12")
    peer = SocketEnd(12, 11, "/tmp/vmmtui-1-x/vmmtui.sock", sk="s12", peer_sk="s11")
    events = [
        *session_batches()[0],
        TraceStarted("ebpf", [PRODUCER_PID, consumer]),
        StepStarted(SEND, "producer", "send"),
        FdsSent(PRODUCER_PID, PRODUCER_PID, 10, "sendmsg", sock, [38], ["f00d"], 229),
        FdsSent(other, other, 11, "sendmsg", side, [5], ["f00d"], 1),
        StepStarted(RECEIVE, "consumer", "receive"),
        FdsReceived(consumer, consumer, 20, "recvmsg", peer, [39], ["f00d"], 229),
        FdsReceived(consumer, consumer, 21, "recvmsg", side_peer, [40], ["f00d"], 1),
    ]
    first, second = fold(events).kernel.at(RECEIVE)
    assert [(s.pid, s.fd) for s in first.sources if s] == [(PRODUCER_PID, 38)]
    assert [(s.pid, s.fd) for s in second.sources if s] == [(other, 5)]


def test_the_drivers_own_mappings_are_left_out_of_a_steps_line_and_counted():
    """CUDA maps its own device files (/dev/nvidia*) and moves those mappings by the dozen
    (MAP_FIXED, munmap): none is shared memory, so a step's line leaves them out and counts them;
    a mapping of the memfd the worker shares, and its unmap, are told."""
    from vmmtui.stream.observed import MemfdCreated, MemoryMapped, MemoryUnmapped
    from vmmtui.view.kernel import fold_kernel
    from vmmtui.words.trace import kernel_step_facts, plumbing_left_out

    roles = {PRODUCER_PID: "producer"}
    p = PRODUCER_PID
    events = [
        MemoryMapped(p, p, 1, 9, "dev1", 0x200000, 2 << 20, kind="/dev/nvidiactl"),
        MemoryUnmapped(p, p, 2, 0x200000, 4096, call="mmap"),
        MemfdCreated(p, p, 3, "buf", 5, "m1"),
        MemoryMapped(p, p, 4, 5, "m1", 0x7F0000, 1 << 20, kind="memfd:buf"),
        MemoryUnmapped(p, p, 5, 0x7F0000, 1 << 20),
        MemoryUnmapped(p, p, 6, 0x900000, 1 << 20),
    ]
    view, facts = None, []
    for e in events:
        view, fact = fold_kernel(view, e, roles, 3)
        facts.append(fact)
    assert [f.plumbing for f in facts] == [True, True, False, False, False, True]
    told = kernel_step_facts(facts)
    assert [type(f.event).__name__ for f in told].count("MemoryMapped") == 1
    assert [type(f.event).__name__ for f in told].count("MemoryUnmapped") == 1
    assert plumbing_left_out(3) == "kernel: +3 calls of the CUDA driver on its own files, in --json"


def test_the_drivers_and_runtimes_own_files_and_helpers_are_churn_the_sessions_fds_are_told():
    """The CUDA driver's start-up opens and closes dozens of its own files (only the close is
    recorded), and a worker's libraries run helpers (``ldconfig -p``): none of it is the session's,
    so a step's line leaves it out and counts it. A close of an fd the session made, sent or got,
    by its number or by its struct file, is told; so is what a helper process does that shares."""
    from vmmtui.stream.observed import (
        CallRefused,
        CudaCall,
        FdCloseCall,
        FdsReceived,
        MemfdCreated,
        ProcessExec,
        ProcessExit,
        ProcessForked,
    )
    from vmmtui.view.kernel import fold_kernel
    from vmmtui.words.trace import kernel_step_facts, plumbing_left_out

    p, helper = PRODUCER_PID, PRODUCER_PID + 1000
    roles = {p: "producer"}
    events = [
        FdCloseCall(p, p, 1, 17, "drv1", 0),  # the driver's own file: never made, sent or got
        FdCloseCall(p, p, 2, 19, "drv2", 0),
        ProcessForked(p, p, 3, helper, "python3"),  # ctypes' find_library runs ldconfig -p
        ProcessExec(helper, helper, 4, "/sbin/ldconfig", "ldconfig"),
        FdCloseCall(helper, helper, 5, 3, "ld1", 0),
        ProcessExit(helper, helper, 6, 0, "ldconfig"),
        MemfdCreated(p, p, 7, "buf", 5, "m1"),
        CudaCall(p, p, 8, "cuMemExportToShareableHandle", 0, fd=6, file="x1"),
        FdsReceived(p, p, 9, "recvmsg", PEER, [7], ["r1"], 1),
        FdCloseCall(p, p, 10, 5, "m1", 0),  # the memfd it made
        FdCloseCall(p, p, 11, 6, "", 0),  # the export's fd, by its number
        FdCloseCall(p, p, 12, 7, "r1", 0),  # the fd it received
        FdCloseCall(p, p, 13, 7, "drv3", 0),  # the same number later: the driver's again
        CallRefused(helper, "pidfd_getfd", "EPERM", p, "another uid", "run it as the same user"),
    ]
    view, facts = None, []
    for e in events:
        view, fact = fold_kernel(view, e, roles, 0)
        facts.append(fact)
    churn = [f.plumbing for f in facts]
    assert churn == [True] * 6 + [False] * 6 + [True, False]
    told = kernel_step_facts(facts)
    assert len(told) == 7 and sum(churn) == 7
    assert plumbing_left_out(7, "cuda", start=True) == (
        "kernel: +7 calls of the CUDA driver's start-up on its own files, in --json"
    )
    assert plumbing_left_out(1, "memfd") == (
        "kernel: +1 call of the worker's runtime (Python, its libraries) on its own files, in --json"
    )
