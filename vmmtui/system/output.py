"""Our stdout and stderr once a stop signal came: never waited on.

A command that writes a stream (``run --json``, ``trace --json``, ``replay --text``…) into a pipe
nobody reads (``| sleep 1000``) waits in write() once the pipe is full. A stop signal then
interrupts that write, but the write starts again (a trace hands the signal to its command and goes
on), or the cleanup's next line waits in a write of its own: the process never ends.

So every stop signal first calls ``unblock()``: each of fd 1 and fd 2 that is a pipe, FIFO or
socket is moved onto a pipe of our own that a relay thread drains at once into the original
without ever blocking on it. What the reader takes goes on, in order; once the reader has taken
nothing for ``GRACE_S``, the rest is dropped. Terminals, files and ``/dev/null`` never fill, so they
are left as they are. ``settle()``, where the command ends, hands the relays what is still
buffered, waits at most ``GRACE_S`` for them and puts the original fds back (an in-process caller
gets its own; the buffers are empty, so nothing more is written to them).

Only the main thread calls these (signal handlers, the end of ``cli.main``). No Textual here.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import stat
import sys
import threading
import time
from dataclasses import dataclass, field

from vmmtui.system.early import STOP_SIGNALS

#: how long the reader may take nothing before what is left for it is dropped
GRACE_S = 0.5
#: the fds moved: stdout and stderr
STREAMS = (1, 2)


@dataclass
class Relay:
    """One fd moved onto our pipe (``write_end``, now at ``fd``), drained into ``original``."""

    fd: int
    original: int  # a duplicate of what ``fd`` was: put back by ``settle``
    write_end: int
    read_end: int
    target: int | socket.socket | None  # a non-blocking way into the original; None: dropped
    gone: bool = False  # the reader took nothing for GRACE_S, or left: the rest is dropped
    thread: threading.Thread | None = field(default=None, repr=False)

    def run(self) -> None:
        """Until every write end is closed: what comes in goes on, or is dropped."""
        try:
            while chunk := os.read(self.read_end, 1 << 16):
                if not self.gone and not self._send(memoryview(chunk)):
                    self.gone = True
        except OSError:
            self.gone = True
        finally:
            with contextlib.suppress(OSError):
                os.close(self.read_end)
            if isinstance(self.target, socket.socket):
                self.target.close()
            elif self.target is not None:
                with contextlib.suppress(OSError):
                    os.close(self.target)

    def _send(self, data: memoryview) -> bool:
        """``data`` into the original; False once the reader has taken nothing for GRACE_S."""
        if self.target is None:
            return False
        since: float | None = None
        while data:
            try:
                n = self._write(data)
            except BlockingIOError:
                n = 0
            except OSError:  # the reader left (EPIPE), the socket was shut
                return False
            if n:
                data, since = data[n:], None
                continue
            now = time.monotonic()
            since = now if since is None else since
            if now - since >= GRACE_S:
                return False
            poller = select.poll()
            poller.register(self._fileno(), select.POLLOUT)
            poller.poll(max(1, int((GRACE_S - (now - since)) * 1000)))
        return True

    def _write(self, data: memoryview) -> int:
        if isinstance(self.target, socket.socket):
            return self.target.send(data, socket.MSG_DONTWAIT)
        assert self.target is not None
        return os.write(self.target, data)

    def _fileno(self) -> int:
        assert self.target is not None
        return self.target.fileno() if isinstance(self.target, socket.socket) else self.target


#: the relays of this process, by fd, once a stop signal came
_relays: dict[int, Relay] = {}


def can_fill(fd: int) -> bool:
    """Whether a write to ``fd`` can wait on a reader: a pipe, a FIFO or a socket."""
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


def _nonblocking(original: int) -> int | socket.socket | None:
    """A way into ``original`` whose writes never wait: a pipe reopened through /proc as a file
    of its own with O_NONBLOCK (the flag is the open file's, so the original one, which a traced
    command may share, is left blocking), a socket's sends with MSG_DONTWAIT. None: no reader
    (a FIFO's open says ENXIO), or no /proc: what is written is dropped."""
    if stat.S_ISSOCK(os.fstat(original).st_mode):
        try:
            return socket.socket(fileno=os.dup(original))
        except OSError:
            return None
    try:
        return os.open(f"/proc/self/fd/{original}", os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None


def unblock() -> None:
    """From here on no write to our stdout or stderr waits on their reader (see the module).
    Called by every stop signal's handler; once is enough, again does nothing. A second signal
    meanwhile waits until the fds are moved (its handler would find one half done)."""
    if not hasattr(signal, "pthread_sigmask") or not hasattr(select, "poll"):
        return  # Windows: no signal masks, no poll (and no live runs)
    held = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        for fd in STREAMS:
            if fd not in _relays and can_fill(fd):
                _move(fd)
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _move(fd: int) -> None:
    try:
        original = os.dup(fd)
    except OSError:  # out of fds: left as it is
        return
    try:
        read_end, write_end = os.pipe()
    except OSError:
        os.close(original)
        return
    relay = Relay(fd, original, write_end, read_end, _nonblocking(original))
    relay.thread = threading.Thread(target=relay.run, name=f"output-{fd}", daemon=True)
    try:
        relay.thread.start()
    except RuntimeError:  # no thread to be had: the fd is left as it is
        for end in (write_end, read_end, original):
            os.close(end)
        if isinstance(relay.target, socket.socket):
            relay.target.close()
        elif relay.target is not None:
            os.close(relay.target)
        return
    os.dup2(write_end, fd)  # a write waiting on the old pipe returns EINTR and comes here
    _relays[fd] = relay


def settle() -> None:
    """Where the command ends: what Python still buffers goes to the relays, which get at most
    ``GRACE_S`` more to pass it on; the original fds come back. Nothing to do without a signal."""
    if not _relays:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, RuntimeError):
            stream.flush()
    relays = list(_relays.values())
    _relays.clear()
    for relay in relays:
        os.dup2(relay.original, relay.fd)
        os.close(relay.original)
        os.close(relay.write_end)  # the relay reads to the end, then stops
    deadline = time.monotonic() + GRACE_S + 0.25
    for relay in relays:
        if relay.thread is not None:
            relay.thread.join(max(0.0, deadline - time.monotonic()))
