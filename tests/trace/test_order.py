"""Order before conclusions, and honest losses: the reorder window lets records go in the kernel's
order, the ledger matches a receive folded before its send, and a conclusion that a lost record
could overturn is said as unknown with the loss window, never as a leak or an in-flight."""

from vmmtui.model.ledger import Ledger
from vmmtui.stream.observed import (
    FdCloseCall,
    FdsReceived,
    FdsSent,
    MemfdCreated,
    ProcessExit,
    QueuedAtRelease,
    SocketEnd,
    TraceFinished,
    TraceLost,
    TraceStarted,
)
from vmmtui.trace.order import KernelOrder
from vmmtui.words.findings import finding_words as said

SOCK = SocketEnd(100, 101, "@vmm")
#: the receiving end: the socket the sends are queued on
PEER = SocketEnd(101, 100, "@vmm")
A, B = 1000, 2000
MS = 1_000_000
W = 150 * MS


def fold(events, ledger=None):
    ledger = ledger or Ledger(window_ns=W)
    found = [f for e in events for f in ledger.apply(e)]
    return ledger, found + ledger.finish()


def test_the_window_lets_records_go_in_the_kernels_order_and_only_once_old_enough():
    order = KernelOrder(window_ns=W)
    send = FdsSent(A, A, 10 * MS, "sendmsg", SOCK, [5], ["f1"], 1)
    recv = FdsReceived(B, B, 11 * MS, "recvmsg", PEER, [7], ["f1"], 1)
    assert order.push(recv) == [] and order.push(send) == []  # arrived receive first
    assert order.release(100 * MS) == []  # younger than the window: held
    assert order.release(11 * MS + W) == [send, recv]
    late = FdCloseCall(B, B, 5 * MS, 7, "f1", 0)
    assert order.push(late) == [] and order.release(12 * MS + W) == [late]
    assert order.late == 1


def test_a_loss_window_goes_before_the_records_it_covers():
    order = KernelOrder(window_ns=W)
    send = FdsSent(A, A, 10 * MS, "sendmsg", SOCK, [5], ["f1"], 1)
    lost = TraceLost(3, 40 * MS, 0, 5 * MS, 40 * MS)
    order.push(send)
    order.push(lost)
    assert order.release(1000 * MS) == [lost, send]


def test_start_and_finish_flush_what_is_held():
    order = KernelOrder(window_ns=W)
    send = FdsSent(A, A, 10 * MS, "sendmsg", SOCK, [5], ["f1"], 1)
    order.push(send)
    fin = TraceFinished([], 0, None, 1, 0, 0.1)
    assert order.push(fin) == [send, fin] and len(order) == 0


def test_a_receive_before_its_send_within_the_window_is_matched():
    ledger, found = fold(
        [
            MemfdCreated(A, A, 1 * MS, "x", 5, "f1"),
            FdsReceived(B, B, 2 * MS, "recvmsg", PEER, [7], ["f1"], 1),
            FdsSent(A, A, 3 * MS, "sendmsg", SOCK, [5], ["f1"], 1),
            FdCloseCall(B, B, 4 * MS, 7, "f1", 0),
            ProcessExit(B, B, 5 * MS, 0),
        ]
    )
    assert [(f.kind, f.pid, f.peer) for f in found] == [("shared", B, A)]
    [t] = ledger.transfers
    assert (t.from_pid, t.from_fd, t.to_pid, t.to_fd) == (A, 5, B, 7)
    assert ledger.unreceived == 0 and not ledger.in_flight


def test_a_receive_whose_send_never_came_is_from_a_process_not_traced_after_the_window():
    ledger = Ledger(window_ns=W)
    assert ledger.apply(FdsReceived(B, B, 2 * MS, "recvmsg", PEER, [7], ["f1"], 1)) == []
    assert ledger.apply(FdCloseCall(B, B, 3 * MS, 7, "f1", 0)) == []  # still within the window
    [f] = ledger.apply(FdCloseCall(B, B, 2 * MS + W + 1, 99, "", -9))
    assert (f.kind, said(f).what) == ("shared", "fd 7 received")
    assert "not traced" in said(f).detail


def test_twenty_thousand_shares_arriving_out_of_order_give_no_false_claim():
    """The 5,000-a-second story: sends and receives of each share cross between CPUs, every
    receive then closed, nothing lost: 20,000 shares, no in-flight, no leak, no unknown."""
    events = []
    for i in range(20_000):
        t = (i + 1) * 200_000  # 5,000 a second
        f = f"{i:012x}"
        send = FdsSent(A, A, t, "sendmsg", SOCK, [5], [f], 1)
        recv = FdsReceived(B, B, t + 50_000, "recvmsg", PEER, [7], [f], 1)
        close = FdCloseCall(B, B, t + 60_000, 7, f, 0)
        events += [recv, send, close] if i % 3 == 0 else [send, recv, close]
    events.append(ProcessExit(B, B, 20_001 * 200_000, 0))
    ledger, found = fold(events)
    kinds = {f.kind for f in found}
    assert kinds == {"shared"} and len(found) == 20_000
    assert (
        ledger.transfers.total == 20_000 and ledger.unreceived == 0
    )  # every one counted, the newest kept


def test_a_leak_whose_close_may_be_lost_is_unknown_with_the_window():
    t0 = 1_000 * MS
    ledger, found = fold(
        [
            TraceStarted("ebpf", [A], ktime0=t0),
            FdsSent(A, A, t0 + 1 * MS, "sendmsg", SOCK, [5], ["f1"], 1),
            FdsReceived(B, B, t0 + 2 * MS, "recvmsg", PEER, [7], ["f1"], 1),
            TraceLost(812, t0 + 30 * MS, 1, t0 + 5 * MS, t0 + 30 * MS),
            TraceLost(10, t0 + 30 * MS, 0, t0 + 5 * MS, t0 + 30 * MS),
            ProcessExit(B, B, t0 + 40 * MS, 0),
        ]
    )
    shared, unknown = found
    assert shared.kind == "shared"
    assert (unknown.kind, unknown.pid, unknown.lost) == ("unknown", B, 822)
    assert (unknown.lost_first_ns, unknown.lost_last_ns) == (t0 + 5 * MS, t0 + 30 * MS)
    assert (
        "fd-never-closed" in said(unknown).detail and "fd 7 held until exit" in said(unknown).what
    )
    assert ledger.losses.by_cpu == {1: 812, 0: 10}


def test_a_loss_before_the_fd_was_received_leaves_its_leak_a_leak():
    _, found = fold(
        [
            TraceLost(5, 3 * MS, 0, 1 * MS, 3 * MS),
            FdsSent(A, A, 10 * MS, "sendmsg", SOCK, [5], ["f1"], 1),
            FdsReceived(B, B, 11 * MS, "recvmsg", PEER, [7], ["f1"], 1),
            ProcessExit(B, B, 12 * MS, 0),
        ]
    )
    assert [f.kind for f in found] == ["shared", "fd-never-closed"]


def test_an_unreceived_send_with_a_loss_after_it_is_unknown_not_in_flight():
    ledger, found = fold(
        [
            FdsSent(A, A, 10 * MS, "sendmsg", SOCK, [5], ["f1"], 1),
            FdsSent(A, A, 11 * MS, "sendmsg", SOCK, [6], ["f2"], 1),
            TraceLost(40, 30 * MS, 0, 12 * MS, 30 * MS),
            FdsReceived(B, B, 31 * MS, "recvmsg", PEER, [8], ["f2"], 1),
        ]
    )
    assert [f.kind for f in found] == ["shared", "unknown"]
    u = found[1]
    assert u.pid == A and u.lost == 40 and "1 fd sent (fd 5)" in said(u).what
    assert not any(f.kind == "in-flight" for f in found)


def test_a_send_whose_receive_was_lost_before_the_sends_record_is_put_down_to_the_loss():
    # the receiver took the message, and its record was lost, before the sender's call returned
    # and wrote the send's record: the loss comes first in the kernel's clock
    ledger, found = fold(
        [
            TraceLost(1, 10 * MS, 0, 9 * MS, 9 * MS),
            FdsSent(A, A, 10 * MS, "sendmsg", SOCK, [5], ["f1"], 1),
        ]
    )
    assert [f.kind for f in found] == ["unknown"] and ledger.unreceived == 0
    assert found[0].lost == 1 and "among the records lost" in said(found[0]).detail


def test_a_send_never_received_in_a_trace_that_lost_nothing_is_counted_not_found():
    ledger, found = fold([FdsSent(A, A, 10 * MS, "sendmsg", SOCK, [5], ["f1"], 1)])
    assert found == [] and ledger.unreceived == 1


def test_the_kernels_queued_at_release_is_in_flight_even_across_losses():
    _, found = fold(
        [
            FdsSent(A, A, 10 * MS, "sendmsg", SOCK, [5], ["f1"], 1),
            TraceLost(40, 30 * MS, 0, 12 * MS, 30 * MS),
            QueuedAtRelease(A, A, 40 * MS, SOCK.ino, ("f1",), 1),
        ]
    )
    assert [(f.kind, f.pid) for f in found] == [("in-flight", A)]


def test_loss_windows_merge_and_an_old_recordings_unplaced_loss_makes_every_leak_unknown():
    ledger = Ledger()
    ledger.apply(TraceLost(1, 0, 0, 10, 20))
    ledger.apply(TraceLost(2, 0, 1, 15, 30))
    ledger.apply(TraceLost(3, 0, 0, 50, 60))
    assert ledger.losses.windows == [[10, 30, 3], [50, 60, 3]]
    assert ledger.losses.between(25, 55) == (6, 10, 60)
    assert ledger.losses.between(31, 49) == (0, 0, 0)
    _, found = fold(
        [
            FdsSent(A, A, 10, "sendmsg", SOCK, [5], ["f1"], 1),
            FdsReceived(B, B, 11, "recvmsg", PEER, [7], ["f1"], 1),
            TraceLost(3),
            ProcessExit(B, B, 12, 0),
        ]
    )
    assert [f.kind for f in found] == ["shared", "unknown"]


def test_the_ledger_waits_for_a_send_as_long_as_the_order_holds_a_record():
    from vmmtui.model import ledger
    from vmmtui.trace import order

    assert ledger.WINDOW_NS == order.WINDOW_NS == Ledger().window_ns
