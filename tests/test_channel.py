import os
import socket
import threading

import pytest

from vmmtui import channel
from vmmtui.troubleshooting import StepError


def test_fd_travels_with_metadata(seqpacket_pair):
    a, b = seqpacket_pair
    fd = os.memfd_create("t")
    os.write(fd, b"hello")
    channel.send_message(a, {"type": "alloc", "alloc_size": 5}, [fd])
    meta, fds = channel.receive_message(b, 1, "alloc", want_fds=1)
    try:
        assert meta["alloc_size"] == 5 and meta["v"] == channel.VERSION
        assert fds[0] != fd
        assert os.pread(fds[0], 5, 0) == b"hello"
    finally:
        os.close(fd)
        for f in fds:
            os.close(f)


def test_extra_fds_are_all_closed_and_reported(seqpacket_pair):
    a, b = seqpacket_pair
    r, w = os.pipe()
    before = set(os.listdir("/proc/self/fd"))
    channel.send_message(a, {"type": "alloc"}, [r, w])
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 1, "alloc", want_fds=1)
    assert err.value.failure.code == "FD_COUNT"
    assert set(os.listdir("/proc/self/fd")) == before
    os.close(r)
    os.close(w)


def test_missing_fd_and_wrong_type_and_timeout(seqpacket_pair):
    a, b = seqpacket_pair
    channel.send_message(a, {"type": "alloc"})
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 1, "alloc", want_fds=1)
    assert err.value.failure.code == "FD_COUNT"
    channel.send_message(a, {"type": "other"})
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 1, "alloc")
    assert err.value.failure.code == "BAD_MESSAGE"
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 0.05, "ack")
    assert err.value.failure.code == "ETIMEDOUT"
    a.send(b"\xff garbage")
    with pytest.raises(StepError) as err:
        channel.receive_message(b, 1, "ack")
    assert err.value.failure.code == "BAD_MESSAGE"


def test_connect_retries_then_deadline(tmp_path):
    path = str(tmp_path / "s.sock")
    with pytest.raises(StepError) as err:
        channel.connect(path, 0.2)
    assert err.value.failure.code == "ENOENT"
    assert "producer" in err.value.failure.fix


def test_connect_succeeds_once_producer_listens(tmp_path):
    path = str(tmp_path / "s.sock")
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


def test_accept_refuses_an_unexpected_peer_and_times_out(tmp_path):
    path = str(tmp_path / "s.sock")
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


def test_stale_socket_file_is_eaddrinuse(tmp_path):
    path = str(tmp_path / "s.sock")
    channel.listen(path).close()  # leaves the file behind, like a crashed producer
    with pytest.raises(StepError) as err:
        channel.listen(path)
    assert err.value.failure.code == "EADDRINUSE"


def test_path_too_long_is_refused_before_bind():
    with pytest.raises(StepError) as err:
        channel.listen("/tmp/" + "x" * 120)
    assert err.value.failure.code == "ENAMETOOLONG"


def test_stale_socket_is_removed_but_a_live_listener_is_not(tmp_path):
    path = str(tmp_path / "s.sock")
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
