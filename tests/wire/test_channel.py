import json
import os
import socket
import threading

import pytest

from vmmtui.stream.codec import encode
from vmmtui.stream.failures import StepError
from vmmtui.stream.values import Ack, AllocMessage
from vmmtui.wire import channel
from vmmtui.words.troubleshooting import worded

ALLOC = AllocMessage(65536, 65536, 4096, 0, "CPU memory (memfd)", "memfd", "vmm")


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


def raw(payload, fds=()):
    """What a hostile or buggy peer might send: any bytes, with any fds."""
    data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return data, list(fds)


def test_fd_travels_with_metadata(seqpacket_pair):
    a, b = seqpacket_pair
    fd = os.memfd_create("t")
    os.write(fd, b"hello")
    channel.send_message(a, ALLOC, [fd])
    meta, fds = channel.receive_message(b, 1, AllocMessage, want_fds=1)
    try:
        assert meta == ALLOC
        assert fds[0] != fd
        assert os.pread(fds[0], 5, 0) == b"hello"
    finally:
        os.close(fd)
        for f in fds:
            os.close(f)


def test_ack_round_trips_with_its_slice(seqpacket_pair):
    a, b = seqpacket_pair
    channel.send_message(a, Ack(True, "slice written", slice=(0, 16)))
    ack, fds = channel.receive_message(b, 1, Ack)
    assert ack == Ack(True, "slice written", slice=(0, 16)) and fds == []


def test_extra_fds_are_all_closed_and_reported(seqpacket_pair):
    a, b = seqpacket_pair
    r, w = os.pipe()
    before = open_fds()
    channel.send_message(a, ALLOC, [r, w])
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 1, AllocMessage, want_fds=1)
    assert err.value.failure.code == "FD_COUNT"
    assert open_fds() == before
    os.close(r)
    os.close(w)


def test_missing_fd_and_wrong_type_and_timeout(seqpacket_pair):
    a, b = seqpacket_pair
    channel.send_message(a, ALLOC)
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 1, AllocMessage, want_fds=1)
    assert err.value.failure.code == "FD_COUNT"
    channel.send_message(a, Ack(True, "verified"))
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 1, AllocMessage)
    assert err.value.failure.code == "BAD_MESSAGE"
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 0.05, Ack)
    assert err.value.failure.code == "ETIMEDOUT"
    a.send(b"\xff garbage")
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 1, Ack)
    assert err.value.failure.code == "BAD_MESSAGE"


def test_a_deep_message_closes_the_fd_it_carried(seqpacket_pair):
    """30 000 nested [ used to raise RecursionError past the fd cleanup: the fd leaked."""
    a, b = seqpacket_pair
    fd = os.memfd_create("deep")
    before = open_fds()
    socket.send_fds(a, [b"[" * 30000], [fd])
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 1, AllocMessage, want_fds=1)
    assert err.value.failure.code == "BAD_MESSAGE" and "nested" in err.value.failure.message
    assert open_fds() == before
    os.close(fd)


def test_brackets_inside_strings_do_not_count_as_depth():
    assert not channel.too_deep(json.dumps({"device_name": "[" * 100 + '\\"{' * 50}).encode())
    assert channel.too_deep(b'{"a": ' + b"[" * 17 + b"]" * 17 + b"}")
    assert not channel.too_deep(b"[" * 16 + b"]" * 16)


@pytest.mark.parametrize(
    "bad, why",
    [
        ({k: v for k, v in encode(ALLOC).items() if k != "alloc_size"}, "lacks 'alloc_size'"),
        ({**encode(ALLOC), "alloc_size": "64MiB"}, "alloc_size"),
        ({**encode(ALLOC), "device": None}, "device"),
        ({**encode(ALLOC), "alloc_size": True}, "alloc_size"),
    ],
)
def test_a_missing_or_malformed_field_is_bad_message_and_closes_the_fd(seqpacket_pair, bad, why):
    a, b = seqpacket_pair
    fd = os.memfd_create("meta")
    before = open_fds()
    socket.send_fds(a, [json.dumps({"v": channel.VERSION, **bad}).encode()], [fd])
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 1, AllocMessage, want_fds=1)
    assert err.value.failure.code == "BAD_MESSAGE" and why in err.value.failure.message
    assert open_fds() == before
    os.close(fd)


def test_an_oversized_message_is_refused_and_its_fd_closed(seqpacket_pair):
    a, b = seqpacket_pair
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 20)
    fd = os.memfd_create("big")
    before = open_fds()
    socket.send_fds(a, [b" " * (channel.MAX_MESSAGE + 1)], [fd])
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 1, AllocMessage, want_fds=1)
    assert err.value.failure.code == "BAD_MESSAGE" and "truncated" in err.value.failure.message
    assert open_fds() == before
    os.close(fd)


def test_any_exception_while_parsing_closes_the_fds(seqpacket_pair, monkeypatch):
    a, b = seqpacket_pair
    fd = os.memfd_create("boom")
    before = open_fds()

    def explode(*args):
        raise RecursionError("maximum recursion depth exceeded")

    monkeypatch.setattr(channel, "decode", explode)
    channel.send_message(a, ALLOC, [fd])
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 1, AllocMessage, want_fds=1)
    assert err.value.failure.code == "BAD_MESSAGE"
    assert open_fds() == before
    monkeypatch.setattr(channel, "too_deep", lambda data: (_ for _ in ()).throw(MemoryError()))
    channel.send_message(a, ALLOC, [fd])
    with pytest.raises(MemoryError):
        channel.receive_message(b, 1, AllocMessage, want_fds=1)
    assert open_fds() == before
    os.close(fd)


def test_an_empty_message_is_not_the_peer_closing(seqpacket_pair):
    a, b = seqpacket_pair
    a.send(b"")
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 1, Ack)
    assert err.value.failure.code == "BAD_MESSAGE" and "empty" in err.value.failure.message
    a.close()
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 1, Ack)
    assert err.value.failure.code == "PEER_CLOSED"


def test_connect_retries_then_deadline(sock_dir):
    path = str(sock_dir / "s.sock")
    with pytest.raises(StepError) as err:
        channel.connect(path, 0.2)
    assert err.value.failure.code == "ENOENT"
    assert "producer" in worded(err.value.failure)[1]


def test_connect_succeeds_once_producer_listens(sock_dir):
    path = str(sock_dir / "s.sock")
    listener: list[socket.socket] = []
    t = threading.Timer(0.2, lambda: listener.append(channel.listen(path)))
    t.start()
    retries: list[str] = []
    sock, tries = channel.connect(path, 5, retries.append)
    t.join()
    try:
        assert tries > 1 and retries
        conn, cred = channel.accept(listener[0], os.getpid(), 1)
        assert cred.pid == os.getpid() and cred.uid == os.getuid()
        conn.close()
    finally:
        sock.close()
        listener[0].close()


def test_accept_refuses_an_unexpected_peer_and_times_out(sock_dir):
    path = str(sock_dir / "s.sock")
    listener = channel.listen(path)
    intruder = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    intruder.connect(path)
    refused = []
    try:
        with pytest.raises(StepError) as err:
            channel.accept(listener, os.getpid() + 1_000_000, 0.3, refused.append)
        assert err.value.failure.code == "ETIMEDOUT"
        assert [c.pid for c in refused] == [os.getpid()]
        assert intruder.recv(10) == b""  # the intruder was dropped, never sent anything
    finally:
        intruder.close()
        listener.close()


def test_stale_socket_file_is_eaddrinuse(sock_dir):
    path = str(sock_dir / "s.sock")
    channel.listen(path).close()  # leaves the file behind, like a crashed producer
    with pytest.raises(StepError) as err:
        channel.listen(path)
    assert err.value.failure.code == "EADDRINUSE"


def test_path_too_long_is_refused_before_bind():
    with pytest.raises(StepError) as err:
        channel.listen("/tmp/" + "x" * 120)
    assert err.value.failure.code == "ENAMETOOLONG"


def test_stale_socket_is_removed_but_a_live_listener_is_not(sock_dir):
    path = str(sock_dir / "s.sock")
    assert channel.remove_if_stale(path) is None
    channel.listen(path).close()  # nobody listens any more; the file stays
    found = channel.remove_if_stale(path)
    assert "ECONNREFUSED" in found and not os.path.exists(path)
    live = channel.listen(path)
    try:
        with pytest.raises(StepError) as err:
            channel.remove_if_stale(path)
        assert err.value.failure.code == "EADDRINUSE" and os.path.exists(path)
    finally:
        live.close()


def test_send_to_a_peer_that_never_reads_gives_up_at_its_deadline(seqpacket_pair):
    a, _ = seqpacket_pair
    with pytest.raises(StepError) as err:
        for _ in range(1000):  # the peer's queue fills after a few; then sendmsg would wait forever
            channel.send_message(a, Ack(True, "x" * 60000), timeout=0.2)
    assert err.value.failure.code == "ETIMEDOUT" and "0.2 s" in err.value.failure.message


def test_rehearse_runs_the_real_round_trip_and_leaves_no_fd(tmp_path):
    """The worker's init rehearses the wire on a socketpair: the fd that went through SCM_RIGHTS and
    both sockets are closed after, and the init step's call log says it was done."""
    from vmmtui.plan.config import WorkerConfig
    from vmmtui.worker.core import Worker

    before = set(os.listdir("/proc/self/fd"))
    said = channel.rehearse()
    assert "1 fd" in said and f"peer pid {os.getpid()}" in said
    assert set(os.listdir("/proc/self/fd")) == before
    w = Worker(WorkerConfig("consumer", "memfd", 4096, str(tmp_path / "s")))
    report = w.run_step("init")
    assert report.ok
    assert any("rehearsal" in c.name and "round trip" in c.result for c in report.calls)


def test_accept_takes_a_queued_connection_at_once_and_keeps_its_deadline(sock_dir):
    """A consumer already queued is taken with no wait at all (a non-blocking accept first, no poll
    and no timeout set on the listener); with nobody queued the deadline still holds."""
    path = str(sock_dir / "s")
    listener = channel.listen(path)
    try:
        client, _ = channel.connect(path, 5.0)
        conn, cred = channel.accept(listener, os.getpid(), 0.0)
        assert cred.pid == os.getpid() and conn.gettimeout() is None  # blocking, as before
        conn.close()
        client.close()
        with pytest.raises(StepError) as err:
            channel.accept(listener, os.getpid(), 0.2)
        assert err.value.failure.code == "ETIMEDOUT"
    finally:
        listener.close()
