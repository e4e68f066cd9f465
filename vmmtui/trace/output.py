"""The traced command's own output, kept while the inspector has the terminal.

The inspector draws on the terminal, so the command cannot write there; its output is not thrown
away either. Its stdout goes to a pseudo-terminal (a program line-buffers its output there as on
a terminal, so lines arrive as they are written, not when a pipe's buffer fills or the program
exits; ONLCR is off, so the bytes are the program's own), its stderr to a pipe (a traceback
arrives whole), its stdin is /dev/null (the keyboard belongs to the inspector). A thread reads
both into memory, bounded: the last ``KEEP_BYTES`` are kept and what was dropped before them is
counted. The inspector shows it on a key; the command line prints it once the inspector closes.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import struct
import termios
import threading
from dataclasses import dataclass

#: how much of the command's output is kept (the newest); what came before is counted
KEEP_BYTES = 256 << 10
#: the longest ``finish`` waits for the last bytes once the command's tree has ended
DRAIN_S = 1.0
STDOUT, STDERR = "stdout", "stderr"


@dataclass(frozen=True)
class Chunk:
    """Bytes one stream gave, in the order they were read."""

    stream: str
    data: bytes


@dataclass(frozen=True)
class Kept:
    """What is kept at one moment: the newest chunks, the bytes dropped before them, in all."""

    chunks: tuple[Chunk, ...]
    dropped: int
    total: int
    #: both streams reached their end (the command and all that held them have exited)
    ended: bool

    def text(self, stream: str | None = None) -> str:
        """The kept bytes as text (undecodable bytes replaced), of one stream or both."""
        data = b"".join(c.data for c in self.chunks if stream is None or c.stream == stream)
        return data.decode("utf-8", errors="replace")

    def lines(self) -> list[tuple[str, str]]:
        """(stream, line) as a terminal would leave them: a line rewritten after ``\r`` (a
        progress bar) is its last version, and terminal control sequences (colours, cursor
        moves) are left out. Not yet escaped: a screen shows each through ``names.shown``."""
        out: list[tuple[str, str]] = []
        partial: dict[str, str] = {}
        for c in self.chunks:
            text = partial.pop(c.stream, "") + c.data.decode("utf-8", errors="replace")
            *whole, rest = text.split("\n")
            out += [(c.stream, _as_left(line)) for line in whole]
            if rest:
                partial[c.stream] = rest
        out += [(stream, _as_left(rest)) for stream, rest in partial.items()]
        return out

    @property
    def stderr_lines(self) -> int:
        return sum(1 for stream, _ in self.lines() if stream == STDERR)


class Output:
    """The command's stdout (a pty) and stderr (a pipe), read by a thread into a bounded buffer.

    ``child_fds()`` gives the ends the command gets; ``started()`` (after the fork) closes them
    here and starts reading; ``finish()`` reads what is left and closes everything."""

    def __init__(self, keep: int = KEEP_BYTES) -> None:
        self.keep = keep
        self._chunks: list[Chunk] = []
        self._size = 0
        self.dropped = 0
        self.total = 0
        self.ended = False
        #: bumped on every read: a screen repaints its view only when it changed
        self.version = 0
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._child: list[int] = []
        self._ours: dict[int, str] = {}
        self._wake_r = self._wake_w = -1

    # -- the command's side ----------------------------------------------------------------------
    def child_fds(self) -> tuple[int, int]:
        """(stdout, stderr) for the command: a pty's terminal end and a pipe's write end."""
        master, slave = pty.openpty()
        attrs = termios.tcgetattr(slave)
        attrs[1] &= ~termios.ONLCR  # "\n" stays "\n": the bytes as the program wrote them
        termios.tcsetattr(slave, termios.TCSANOW, attrs)
        rows, cols = _terminal_size()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))
        err_r, err_w = os.pipe()
        self._ours = {master: STDOUT, err_r: STDERR}
        self._child = [slave, err_w]
        return slave, err_w

    def started(self) -> None:
        """The command has its ends: close ours of them (its exit then ends the streams), read."""
        for fd in self._child:
            with contextlib.suppress(OSError):
                os.close(fd)
        self._child = []
        self._wake_r, self._wake_w = os.pipe()
        self._thread = threading.Thread(target=self._read, name="vmmtui-output", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        open_fds = dict(self._ours)
        draining = False
        while open_fds:
            timeout = 0.0 if draining else None
            ready, _, _ = select.select([*open_fds, self._wake_r], [], [], timeout)
            if self._wake_r in ready:
                draining = True  # finish(): read what is there now, then stop
                ready.remove(self._wake_r)
            if not ready:
                if draining:
                    break
                continue
            for fd in ready:
                try:
                    data = os.read(fd, 65536)
                except OSError:  # a pty's master reads EIO once no process holds its end
                    data = b""
                if not data:
                    del open_fds[fd]
                    continue
                self._add(Chunk(open_fds[fd], data))
        with self._lock:
            self.ended = not open_fds
            self.version += 1

    def _add(self, chunk: Chunk) -> None:
        with self._lock:
            self._chunks.append(chunk)
            self._size += len(chunk.data)
            self.total += len(chunk.data)
            while self._size > self.keep:  # the oldest go first, counted
                first = self._chunks[0]
                over = self._size - self.keep
                if len(first.data) <= over:
                    self._chunks.pop(0)
                    cut = len(first.data)
                else:
                    self._chunks[0] = Chunk(first.stream, first.data[over:])
                    cut = over
                self._size -= cut
                self.dropped += cut
            self.version += 1

    # -- what is kept ----------------------------------------------------------------------------
    def kept(self) -> Kept:
        with self._lock:
            return Kept(tuple(self._chunks), self.dropped, self.total, self.ended)

    def finish(self, wait: float = DRAIN_S) -> None:
        """The command's tree has ended: read until both streams end (at most ``wait`` seconds:
        a process outside the tree may still hold them), then close them."""
        for fd in self._child:  # never started: nothing will write
            with contextlib.suppress(OSError):
                os.close(fd)
        self._child = []
        if self._thread is not None:
            self._thread.join(wait)
            if self._thread.is_alive():
                with contextlib.suppress(OSError):
                    os.write(self._wake_w, b"x")
                self._thread.join(wait)
        for fd in [*self._ours, self._wake_r, self._wake_w]:
            if fd >= 0:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._ours = {}
        self._wake_r = self._wake_w = -1


#: a terminal's control sequences (CSI: colours, cursor moves; OSC: titles)
_CONTROL = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\\\)?")


def _as_left(line: str) -> str:
    """What a terminal shows of one line: after its last carriage return, without controls."""
    line = _CONTROL.sub("", line.rstrip("\r"))
    return line.rsplit("\r", 1)[-1]


def _terminal_size() -> tuple[int, int]:
    """The size of vmmtui's terminal (what the program would have had), else 24×80."""
    for fd in (1, 2, 0):
        with contextlib.suppress(OSError):
            size = os.get_terminal_size(fd)
            return size.lines, size.columns
    return 24, 80
