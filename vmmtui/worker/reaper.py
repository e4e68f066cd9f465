"""What removes a producer's socket file and session directory when nobody else can.

A worker dies with its parent: PR_SET_PDEATHSIG is SIGKILL, which the kernel delivers even to a
SIGSTOPped worker (SIGTERM would wait for SIGCONT and keep the memory). A process killed that way
runs no cleanup of its own, so the producer forks this small reaper at start, before it allocates
anything or opens a socket. The reaper closes every fd it inherited (it keeps no memory and no
control channel alive) and waits for the producer's end of a pipe to close, which happens however
the producer ends. Then it removes the socket file if nobody listens on it any more (connect()
gets ECONNREFUSED, as the producer's own stale check), and the session directory, only if it is
the private ``vmmtui-<session pid>-*`` directory, the session is gone and the directory is empty.
While the session lives, the directory is the session's to remove.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import socket
import stat
import time

PR_SET_NAME = 15
#: how long after the producer's end the reaper waits to see the session gone (a multi-threaded
#: session's pdeath signal can come from its forking thread before the whole process has exited)
SESSION_GRACE_S = 0.5
DIR_PREFIX = "vmmtui-"


def start(socket_path: str, session_pid: int) -> int | None:
    """Fork the reaper; returns its pid, or None where it cannot be started (no fork, no pipe).

    The write end of the pipe stays open in the producer, close-on-exec, until the producer ends."""
    try:
        pidfd = os.pidfd_open(session_pid)
    except (OSError, AttributeError):
        pidfd = -1
    try:
        r, w = os.pipe2(os.O_CLOEXEC)
        pid = os.fork()
    except OSError:
        if pidfd >= 0:
            os.close(pidfd)
        return None
    if pid == 0:  # the reaper: never returns
        try:
            os.close(w)
            _watch(r, pidfd, socket_path, session_pid)
        finally:
            os._exit(0)
    os.close(r)
    if pidfd >= 0:
        os.close(pidfd)
    return pid


def _watch(r: int, pidfd: int, socket_path: str, session_pid: int) -> None:
    for sig in (
        signal.SIGINT,
        signal.SIGTERM,
        signal.SIGHUP,
        signal.SIGQUIT,
        signal.SIGTSTP,
        signal.SIGTTIN,
        signal.SIGTTOU,
        signal.SIGPIPE,
    ):
        signal.signal(sig, signal.SIG_IGN)
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(PR_SET_NAME, b"vmmtui-reaper", 0, 0, 0)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    keep = {0, 1, 2, r, pidfd}
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in keep:
            with contextlib.suppress(OSError):
                os.close(int(name))
    while _read(r):
        pass
    # the producer is gone: the kernel has released what it held; files are left to us
    _remove_stale_socket(socket_path)
    directory = os.path.dirname(os.path.abspath(socket_path))
    if os.path.basename(directory).startswith(f"{DIR_PREFIX}{session_pid}-") and _session_gone(
        pidfd, session_pid
    ):
        with contextlib.suppress(OSError):
            st = os.lstat(directory)
            if stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid():
                os.rmdir(directory)  # only an empty directory goes


def _remove_stale_socket(path: str) -> None:
    """Unlink ``path`` if it is a socket nobody listens on; a live listener's file stays."""
    try:
        if not stat.S_ISSOCK(os.lstat(path).st_mode):
            return
    except OSError:
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET | socket.SOCK_CLOEXEC)
    probe.settimeout(1.0)
    try:
        probe.connect(path)
    except ConnectionRefusedError:
        with contextlib.suppress(OSError):
            os.unlink(path)
    except OSError:
        pass
    finally:
        probe.close()


def _read(fd: int) -> bytes:
    while True:
        try:
            return os.read(fd, 4096)
        except InterruptedError:
            continue
        except OSError:
            return b""


def _session_gone(pidfd: int, session_pid: int) -> bool:
    """Whether the session exits within the grace time (a pidfd turns readable when it has)."""
    if pidfd >= 0:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        return bool(poller.poll(int(SESSION_GRACE_S * 1000)))
    return _gone_by_proc(session_pid)


def _gone_by_proc(pid: int) -> bool:
    deadline = time.monotonic() + SESSION_GRACE_S
    while True:
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
            if state in (b"Z", b"X"):
                return True
        except (OSError, IndexError):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
