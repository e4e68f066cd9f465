"""The wire between producer and consumer: a SOCK_SEQPACKET Unix socket that carries the fd.

The fd travels as SCM_RIGHTS ancillary data beside a small versioned JSON message (``AllocMessage``:
sizes, granularity, device, backend); the ``Ack`` comes back the same way. Both go through the codec,
so nothing received is read by key. Every socket call has a deadline (connect included: it is
non-blocking, so a listener whose backlog is full cannot hold it), and the producer accepts only the
peer pid it was told to expect (SO_PEERCRED), dropping anyone else at once.
"""

from __future__ import annotations

import array
import contextlib
import errno
import json
import math
import os
import select
import socket
import stat
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TypeVar

from vmmtui.stream.codec import DecodeError, decode, encode, warm
from vmmtui.stream.failures import StepError, failure
from vmmtui.stream.values import Ack, AllocMessage

VERSION = 1
#: the largest message read; a longer one arrives truncated (MSG_TRUNC) and is refused
MAX_MESSAGE = 64 * 1024
#: the deepest JSON nesting accepted (the messages need 2)
MAX_DEPTH = 16
POLLRDHUP = getattr(select, "POLLRDHUP", 0x2000)
AF_UNIX_PATH_MAX = 107  # sun_path is 108 bytes including the terminating NUL
#: pending connections the listener queues; more than the 8 consumers a session may have, so that
#: a few stray connections (dropped at the next accept) do not lock the consumers out
BACKLOG = 16
#: what connect retries until its deadline: nobody listening yet (ENOENT, ECONNREFUSED), backlog full (EAGAIN)
CONNECT_RETRY = (errno.ENOENT, errno.ECONNREFUSED, errno.EAGAIN)
#: refused peers kept in the worker's state; a flood is counted, not listed
MAX_REFUSED_SHOWN = 16


M = TypeVar("M", AllocMessage, Ack)


@dataclass
class PeerCred:
    pid: int
    uid: int
    gid: int


def peer_cred(sock: socket.socket) -> PeerCred:
    """The kernel's record of who is on the other end (SO_PEERCRED)."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return PeerCred(*struct.unpack("3i", raw))


def check_path(path: str) -> None:
    if len(os.fsencode(path)) > AF_UNIX_PATH_MAX:
        raise StepError(
            failure(
                "ENAMETOOLONG",
                "bind",
                f"{path} is {len(os.fsencode(path))} bytes, AF_UNIX allows {AF_UNIX_PATH_MAX}",
            )
        )


def _err(exc: OSError, call: str) -> StepError:
    code = errno.errorcode.get(exc.errno or 0, "OSERROR")
    return StepError(failure(code, call, f"{exc.strerror or exc}"))


def remove_if_stale(path: str) -> str | None:
    """If a socket file sits at ``path`` with nobody listening (a dead run's), remove it.

    Returns what was found and done, or None when there is no file. A live listener is left
    alone and reported as EADDRINUSE: two producers must never share a path.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if not stat.S_ISSOCK(st.st_mode):
        raise StepError(
            failure("EADDRINUSE", "bind", f"{path} exists and is not a socket; not touching it")
        )
    err = _try_connect(path)
    if err == errno.ECONNREFUSED:
        os.unlink(path)
        return (
            f"stale socket file {path}: connect() got ECONNREFUSED (nobody listening), removed it"
        )
    if err == errno.EAGAIN:
        raise StepError(
            failure(
                "EADDRINUSE",
                "bind",
                f"another process is listening on {path} (its backlog is full)",
            )
        )
    if err:
        raise StepError(
            failure(errno.errorcode.get(err, "OSERROR"), "connect (stale check)", os.strerror(err))
        )
    raise StepError(failure("EADDRINUSE", "bind", f"another process is listening on {path}"))


def _try_connect(path: str) -> int:
    """One non-blocking connect to ``path`` that is closed at once; its errno (0: someone listens)."""
    probe = socket.socket(
        socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK
    )
    try:
        return probe.connect_ex(path)
    finally:
        probe.close()


def listen(path: str) -> socket.socket:
    check_path(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    try:
        sock.bind(path)
        os.chmod(path, 0o600)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise _err(exc, "bind" if exc.errno == errno.EADDRINUSE else "listen") from exc
    return sock


def accept(
    listener: socket.socket,
    expect_pid: int | None,
    timeout: float,
    on_refused: Callable[[PeerCred], None] | None = None,
) -> tuple[socket.socket, PeerCred]:
    """Accept the expected peer before ``timeout``; anyone else is logged, refused and dropped at once.

    Refused connections are closed as soon as they are accepted, one after the other with no pause,
    so that a flood of them drains from the backlog as fast as it comes in."""
    deadline = time.monotonic() + timeout
    if listener.gettimeout() != 0.0:  # non-blocking from here on: the deadline is ours, with poll
        listener.setblocking(False)
    poller: select.poll | None = None
    while True:
        try:  # the common case, the consumer already connected: no poll, no timeout to set
            conn, _ = listener.accept()
        except BlockingIOError:
            left = deadline - time.monotonic()
            if poller is None:
                poller = select.poll()
                poller.register(listener, select.POLLIN)
            if left <= 0 or not poller.poll(max(1, math.ceil(left * 1000))):
                if time.monotonic() < deadline:
                    continue  # woken early (a signal): the deadline has not passed
                raise StepError(
                    failure("ETIMEDOUT", "accept", f"no consumer connected within {timeout:g} s")
                ) from None
            continue
        except OSError as exc:
            if exc.errno in (errno.ECONNABORTED, errno.EINTR):
                continue
            raise _err(exc, "accept") from exc
        try:
            cred = peer_cred(conn)
        except OSError:
            conn.close()
            continue
        if (expect_pid is None or cred.pid == expect_pid) and cred.uid == os.getuid():
            conn.settimeout(None)
            return conn, cred
        conn.close()
        if on_refused:
            on_refused(cred)


def connect(
    path: str, timeout: float, on_retry: Callable[[str], None] | None = None
) -> tuple[socket.socket, int]:
    """Connect before ``timeout``; returns the socket (blocking again) and the number of tries.

    The connect is non-blocking: on a Unix socket whose listen backlog is full a blocking connect
    waits until the listener accepts, which may be never. EAGAIN (backlog full), ECONNREFUSED and
    ENOENT (not listening yet) are retried until the deadline; running out on EAGAIN is
    LISTENER_UNRESPONSIVE, not a timeout of ours."""
    deadline = time.monotonic() + timeout
    tries = 0
    while True:
        tries += 1
        sock = socket.socket(
            socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC | socket.SOCK_NONBLOCK
        )
        try:
            err = sock.connect_ex(path)
            if err == errno.EINPROGRESS:  # not on AF_UNIX today; bounded all the same
                err = _finish_connect(sock, deadline)
        except OSError as exc:  # not an errno connect returns: a path Python refuses (too long)
            sock.close()
            raise _err(exc, "connect") from exc
        if err == 0:
            sock.setblocking(True)
            return sock, tries
        sock.close()
        left = deadline - time.monotonic()
        if err not in CONNECT_RETRY or left <= 0:
            raise _connect_failure(err, path, timeout, tries)
        if on_retry:
            on_retry(errno.errorcode[err])
        time.sleep(min(0.05, left))


def _finish_connect(sock: socket.socket, deadline: float) -> int:
    poller = select.poll()
    poller.register(sock, select.POLLOUT)
    if not poller.poll(max(0, int((deadline - time.monotonic()) * 1000))):
        return errno.EAGAIN
    return sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)


def _connect_failure(err: int, path: str, timeout: float, tries: int) -> StepError:
    if err == errno.EAGAIN:
        return StepError(
            failure(
                "LISTENER_UNRESPONSIVE",
                "connect",
                f"{path} accepted no connection within {timeout:g} s ({tries} tries, each EAGAIN: "
                "its listen backlog is full)",
            )
        )
    code = errno.errorcode.get(err, "OSERROR")
    return StepError(
        failure(code, "connect", f"{os.strerror(err)}; {tries} tries in {timeout:g} s")
    )


def send_message(
    sock: socket.socket,
    message: AllocMessage | Ack,
    fds: list[int] | None = None,
    timeout: float = 10.0,
) -> int:
    """Send one versioned message (and ``fds`` as SCM_RIGHTS) as a single SOCK_SEQPACKET record.

    A peer that stops reading fills its receive queue and then sendmsg waits: ``timeout`` bounds it."""
    data = json.dumps({"v": VERSION, **encode(message)}).encode()

    rights = [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))] if fds else []

    def send(flags: int = 0) -> int:  # sendmsg itself: socket.send_fds ignores flags before 3.12
        return sock.sendmsg([data], rights, flags)

    try:
        try:  # the common case, room in the peer's queue: no timeout to set and unset, no poll
            return send(_DONTWAIT)
        except BlockingIOError:
            sock.settimeout(timeout)
            try:
                return send()
            finally:
                sock.settimeout(None)
    except TimeoutError as exc:
        raise StepError(
            failure("ETIMEDOUT", "sendmsg", f"the peer took no message within {timeout:g} s")
        ) from exc
    except OSError as exc:
        raise _err(exc, "sendmsg") from exc


def too_deep(data: bytes, limit: int = MAX_DEPTH) -> bool:
    """Whether JSON ``data`` nests arrays/objects more than ``limit`` deep (brackets inside strings do not count).

    Checked before parsing: json.loads recurses once per level, and 30 000 ``[`` raise RecursionError."""
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    depth, in_string, escaped = 0, False, False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == 0x5C:  # backslash
                escaped = True
            elif byte == 0x22:  # quote
                in_string = False
        elif byte == 0x22:
            in_string = True
        elif byte in (0x5B, 0x7B):  # [ {
            depth += 1
            if depth > limit:
                return True
        elif byte in (0x5D, 0x7D):  # ] }
            depth -= 1
    return False


def _peer_gone(sock: socket.socket) -> bool:
    """Whether the peer has closed its end (POLLRDHUP/POLLHUP), without reading anything."""
    poller = select.poll()
    poller.register(sock, select.POLLIN | POLLRDHUP)
    return any(ev & (POLLRDHUP | select.POLLHUP) for _, ev in poller.poll(0))


def receive_message(
    sock: socket.socket, timeout: float, expect: type[M], want_fds: int = 0
) -> tuple[M, list[int]]:
    """One message of type ``expect`` with exactly ``want_fds`` fds (``receive_sized``)."""
    message, fds, _ = receive_sized(sock, timeout, expect, want_fds)
    return message, fds


def receive_sized(
    sock: socket.socket, timeout: float, expect: type[M], want_fds: int = 0
) -> tuple[M, list[int], int]:
    """One message of type ``expect`` with exactly ``want_fds`` fds, and the bytes that came over
    the socket (the record's size: what a student should see recvmsg return, not the allocation's
    size the message names); or StepError with every fd closed.

    The fds that arrive are closed on every path but success, whatever is raised (a malformed
    message must not leak the fd it carried). Size and nesting depth are bounded before parsing;
    fields are checked by the codec, so a missing or mistyped one is BAD_MESSAGE.

    recvmsg returns 0 bytes both at EOF and for an empty record; the two are told apart by asking
    poll whether the peer has hung up. An empty record sent just before the peer closed cannot be
    told from EOF (the kernel reports them identically), and is reported as PEER_CLOSED: the peer
    is in fact gone.
    """
    name = _TYPE_NAMES[expect]
    room = max(want_fds, 1) + 4
    try:
        try:  # the common case, the record already here: no timeout to set and unset, no poll
            data, fds, flags = _recv_fds(sock, room, _DONTWAIT)
        except BlockingIOError:
            sock.settimeout(timeout)
            try:
                data, fds, flags = _recv_fds(sock, room)
            finally:
                sock.settimeout(None)
    except TimeoutError as exc:
        raise StepError(
            failure("ETIMEDOUT", "recvmsg", f"no {name} message within {timeout:g} s")
        ) from exc
    except OSError as exc:
        raise _err(exc, "recvmsg") from exc
    try:
        return _parse(sock, data, fds, flags, expect, name, want_fds), fds, len(data)
    except BaseException:
        for fd in fds:
            with contextlib.suppress(OSError):
                os.close(fd)
        raise


def _recv_fds(sock: socket.socket, room: int, flags: int = 0) -> tuple[bytes, list[int], int]:
    """One record and the fds that came with it (socket.recv_fds, whose ``flags`` are ignored before
    Python 3.12): (data, fds, the message's flags)."""
    fds = array.array("i")
    data, ancdata, msg_flags, _ = sock.recvmsg(
        MAX_MESSAGE, socket.CMSG_LEN(room * fds.itemsize), flags
    )
    for level, kind, payload in ancdata:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(payload[: len(payload) - len(payload) % fds.itemsize])
    return data, list(fds), msg_flags


def _parse(
    sock: socket.socket,
    data: bytes,
    fds: list[int],
    flags: int,
    expect: type[M],
    name: str,
    want_fds: int,
) -> M:
    def reject(code: str, detail: str) -> StepError:
        return StepError(failure(code, "recvmsg", detail))

    if not data and not fds:
        if _peer_gone(sock):
            raise reject("PEER_CLOSED", f"the peer closed the socket before sending {name}")
        raise reject("BAD_MESSAGE", f"an empty message (0 bytes, no fd) instead of {name}")
    if flags & _TRUNCATED:
        raise reject(
            "FD_COUNT" if flags & _CTRUNC else "BAD_MESSAGE",
            f"message truncated (flags 0x{flags:x}); closed {len(fds)} fd(s)",
        )
    if len(fds) != want_fds:
        raise reject("FD_COUNT", f"expected {want_fds} fd(s), received {len(fds)}; closed them all")
    if too_deep(data):
        raise reject(
            "BAD_MESSAGE",
            f"nested more than {MAX_DEPTH} levels deep ({len(data)} bytes); closed "
            f"{len(fds)} fd(s)",
        )
    try:
        message = json.loads(data)
    except (ValueError, RecursionError):
        raise reject("BAD_MESSAGE", f"not JSON: {data[:60]!r}") from None
    if not isinstance(message, dict) or message.get("v") != VERSION or message.get("type") != name:
        raise reject(
            "BAD_MESSAGE", f"expected a v{VERSION} {name!r} message, got {str(message)[:80]}"
        )
    try:
        return decode(expect, message, name)
    except (DecodeError, RecursionError) as exc:
        raise reject("BAD_MESSAGE", f"malformed {name} message: {str(exc)[:160]}") from None


#: plain ints: an IntFlag ``|`` costs tens of microseconds the first time, inside the timed step
_CTRUNC = int(socket.MSG_CTRUNC)
_DONTWAIT = int(socket.MSG_DONTWAIT)
_TRUNCATED = _CTRUNC | int(socket.MSG_TRUNC)


def _type_name(expect: type) -> str:
    """The ``type`` a message class carries on the wire (its field's default: ``alloc``, ``ack``)."""
    default = next(f.default for f in fields(expect) if f.name == "type")
    if not isinstance(default, str):
        raise TypeError(f"{expect.__name__} has no default ``type``")
    return default


_TYPE_NAMES = {cls: _type_name(cls) for cls in (AllocMessage, Ack)}
warm(AllocMessage(0, 0, 1, 0, "", "", ""), Ack(True, ""))


def rehearse() -> str:
    """One AllocMessage with an fd and one Ack over a private socketpair, through the same send and
    receive code (every check included) and SO_PEERCRED, so that the first runs of that code (0.1-0.2 ms
    a socket step in a fresh worker) are paid at init, not inside the timed sharing steps."""
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    try:
        cred = peer_cred(b)
        send_message(a, AllocMessage(0, 0, 1, 0, "", "", ""), [b.fileno()])
        _, fds = receive_message(b, 1.0, AllocMessage, want_fds=1)
        for fd in fds:
            os.close(fd)
        send_message(b, Ack(True, ""))
        receive_message(a, 1.0, Ack)
        return f"socketpair round trip (AllocMessage + {len(fds)} fd, Ack), peer pid {cred.pid}"
    finally:
        a.close()
        b.close()
