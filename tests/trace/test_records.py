"""The records of trace.bpf.c decoded in ring order: a message's head record and its continuation
records make one event with every fd; a continuation that never came is counted as fds not read
(never guessed); the fds freed in a socket's queue come as one event whatever their number."""

from vmmtui.stream.observed import (
    FdsDropped,
    FdsReceived,
    FdsSent,
    MemfdCreated,
    QueuedAtRelease,
)
from vmmtui.trace import records as r


def head(kind, tid=10, nfds=0, ktime=1000, ret=0, arg=(0, 0, 0), file=0) -> bytes:
    return r.HEAD.pack(kind, 10, tid, nfds, ktime, ret, *arg, file)


def pad(values, fill):
    return list(values) + [fill] * (r.MAXFDS - len(values))


#: trace.bpf.c's file_kind of a memfd: tmpfs's magic, no device, a regular file (0o100777)
MEMFD_KIND = 0x01021994 << 32 | 0o100777


def message(kind, total, fds, tid=10, ktime=1000, sk=0x51, peer_sk=0x52) -> bytes:
    files, kinds = pad([0x1000 + f for f in fds], 0), pad([MEMFD_KIND] * len(fds), 0)
    tail = r.MSG.pack(7, 8, sk, peer_sk, 1, 0, b"", *pad(fds, -1), *files, *kinds)
    return head(kind, tid, len(fds), ktime, 1, (3, total, 46)) + tail


def more(total, first, fds, tid=10, ktime=1000, kind=r.FDS, arg=None, ret=0, file=0) -> bytes:
    files, kinds = pad([0x1000 + f for f in fds], 0), pad([MEMFD_KIND] * len(fds), 0)
    tail = r.FDLIST.pack(*pad(fds, -1), *files, *kinds)
    return head(kind, tid, len(fds), ktime, ret, arg or (first, total, 46), file) + tail


def memfd(tid=10) -> bytes:
    return head(r.MEMFD, tid, 0, 2000, 5, file=0x9999) + r.NAMED.pack(b"", b"x")


def run(*raws):
    d = r.Decoder(r.FileNames(b"k" * 16))
    return [e for raw in raws for e in d(raw)], d


def test_a_message_of_253_fds_is_one_event_with_every_fd():
    fds = list(range(100, 353))
    raws = [message(r.SEND, 253, fds[:16])]
    raws += [more(253, i, fds[i : i + 16]) for i in range(16, 253, 16)]
    events, d = run(*raws)
    (e,) = events
    assert isinstance(e, FdsSent) and e.fds == fds and e.fds_not_read == 0
    assert e.kinds == ["memfd"] * 253  # what each file is, read in the kernel at the send
    assert len(set(e.files)) == 253 and not d.flush()


def test_a_missing_continuation_is_counted_not_guessed():
    fds = list(range(100, 164))
    raws = [message(r.RECV, 64, fds[:16]), more(64, 16, fds[16:32]), memfd()]
    events, _ = run(*raws)  # the records of 32..63 were lost; that thread's next record ends it
    e = events[0]
    assert isinstance(e, FdsReceived) and e.fds == fds[:32] and e.fds_not_read == 32
    assert e.sock.sk and e.sock.peer_sk and e.sock.sk != e.sock.peer_sk
    assert isinstance(events[1], MemfdCreated)


def test_the_end_of_the_trace_ends_a_message_waiting_for_fds():
    events, d = run(message(r.SEND, 20, list(range(16))))
    assert events == []
    (e,) = d.flush()
    assert e.fds_not_read == 4


def test_other_threads_records_between_a_head_and_its_continuation():
    fds = list(range(40))
    raws = [
        message(r.SEND, 40, fds[:16], tid=10),
        memfd(tid=11),
        more(40, 16, fds[16:32], tid=10),
        more(40, 32, fds[32:40], tid=10),
    ]
    events, _ = run(*raws)
    assert [type(e) for e in events] == [MemfdCreated, FdsSent]
    assert events[1].fds == fds


def test_a_continuation_without_its_head_is_dropped():
    events, d = run(more(40, 16, list(range(16))))
    assert events == [] and d.flush() == []


def test_fds_freed_in_a_queue_come_as_one_event():
    files = list(range(20))
    raws = [
        more(20, 0, files[:16], kind=r.QUEUED, arg=(77, 20, 0)),
        more(20, 16, files[16:], kind=r.QUEUED, arg=(77, 20, 16)),
    ]
    events, _ = run(*raws)
    (e,) = events
    assert isinstance(e, QueuedAtRelease)
    assert e.socket_file == 77 and e.count == 20 and len(e.files) == 20


def test_fds_a_read_dropped_come_as_one_event_naming_the_receiving_socket():
    files = list(range(20))
    raws = [
        more(20, 0, files[:16], kind=r.DROPPED, arg=(77, 20, 0), ret=0, file=0x51),
        more(20, 16, files[16:], kind=r.DROPPED, arg=(77, 20, 16), ret=0, file=0x51),
    ]
    events, _ = run(*raws)
    (e,) = events
    assert isinstance(e, FdsDropped) and e.call == "read" and e.count == 20
    assert len(e.files) == 20 and e.sock.ino == 77
    # the receiving socket is named as a send's peer is: the sock's keyed hash
    assert e.sock.sk == r.FileNames(b"k" * 16)(0x51)


def test_the_kind_of_a_file_sent_is_named_from_the_kernels_inode():
    assert r.file_kind(MEMFD_KIND) == "memfd"
    assert r.file_kind(0x534F434B << 32 | 0o140777) == "socket"
    assert r.file_kind(0x1373 << 32 | 195 << 16 | 0o020666) == "gpu"  # /dev/nvidia0 (devtmpfs)
    assert r.file_kind(0) == ""


def close(tid=10, fd=4, ktime=3000) -> bytes:
    return head(r.CLOSE, tid, 0, ktime, 0, (fd, 0, 3), file=0x9999)


def test_a_batch_decodes_as_the_records_one_by_one():
    """The batch's inline closes and memfds give the same events, in the same order, as one
    record at a time, a message waiting for its fds in between included."""
    fds = list(range(100, 120))
    raws = [
        memfd(tid=11),
        message(r.SEND, 20, fds[:16]),
        close(tid=10, fd=3),  # the same thread: the message is ended (fds not read) first
        close(tid=11),
        more(20, 16, fds[16:]),  # its head is gone: dropped
        memfd(tid=10),
        b"\0" * 8,  # too short: skipped
    ]
    one_by_one, _ = run(*raws)
    batched = r.Decoder(r.FileNames(b"k" * 16)).batch(raws)
    assert batched == one_by_one
    kinds = [type(e).__name__ for e in batched]
    assert kinds == ["MemfdCreated", "FdsSent", "FdCloseCall", "FdCloseCall", "MemfdCreated"]
    assert batched[1].fds_not_read == 4


def test_whole_messages_decode_in_one_pass_and_a_socket_is_one_object():
    """A message whose record holds all its fds is decoded inline by the batch (the most of a
    trace's messages) into the event one record at a time gives; every message on a socket
    names one SocketEnd, so a ledger that keeps each transfer keeps one socket, not one each."""
    raws = [message(r.SEND, 1, [5], ktime=1000 + i) for i in range(3)]
    raws += [message(r.RECV, 2, [7, 8], ktime=2000 + i, sk=0x52, peer_sk=0x51) for i in range(3)]
    raws += [message(r.SEND, 20, list(range(16))), more(20, 16, [16, 17, 18, 19])]
    one_by_one, _ = run(*raws)
    batched = r.Decoder(r.FileNames(b"k" * 16)).batch(raws)
    assert batched == one_by_one and len(batched) == 7
    sent, got = batched[:3], batched[3:6]
    assert all(isinstance(e, FdsSent) and e.kinds == ["memfd"] and e.fds == [5] for e in sent)
    assert all(isinstance(e, FdsReceived) and e.fds == [7, 8] for e in got)
    assert len({id(e.sock) for e in sent}) == 1 and len({id(e.sock) for e in got}) == 1
    assert sent[0].sock.sk == got[0].sock.peer_sk
    assert batched[6].fds == list(range(20)) and batched[6].fds_not_read == 0
