"""The inspector in a real pseudo-terminal, as a user runs it: keys typed, signals sent, the terminal
closed under it (what an SSH drop or closing the window does: the kernel sends SIGHUP)."""

from __future__ import annotations

import contextlib
import fcntl
import os
import pty
import re
import select
import subprocess
import sys
import termios
import threading
import time

import psutil

ANSI = re.compile(r"\x1b(\[[0-9;?<>=]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|[=>78])")


class Terminal:
    """``vmmtui ARGS`` on a pty of ``width`` × ``height``, its own session, the pty its terminal;
    ``term`` its TERM (None: unset), ``extra`` more of its environment. ``controlling=False``: the
    pty is its stdio but not its controlling terminal (``setsid -w vmmtui …``, ``runuser``), so
    that the kernel sends it no SIGHUP when the terminal goes away."""

    def __init__(
        self,
        tmp_path,
        *args: str,
        width: int = 120,
        height: int = 40,
        term: str | None = "xterm-256color",
        extra: dict[str, str] | None = None,
        controlling: bool = True,
    ):
        self.tmp = tmp_path
        master, slave = pty.openpty()
        fcntl.ioctl(slave, termios.TIOCSWINSZ, bytes(8) if False else _winsize(height, width))
        env = dict(os.environ, TMPDIR=str(tmp_path), **(extra or {}))
        for name in ("COLUMNS", "LINES", "TERM"):
            env.pop(name, None)
        if term is not None:  # None: no TERM at all
            env["TERM"] = term
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "vmmtui", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
            preexec_fn=(lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0)) if controlling else None,
            close_fds=True,
        )
        os.close(slave)
        self.master: int | None = master
        self.output = bytearray()
        self._closing = False
        self._seen: set[int] = set()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        # select with a timeout, never a blocking read: a read in flight would keep the pty open
        # after close_terminal() (the kernel hangs up only when the last reference goes)
        while not self._closing:
            ready, _, _ = select.select([self.master], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return
            if not data:
                return
            self.output += data

    @property
    def text(self) -> str:
        return ANSI.sub("", self.output.decode("utf-8", "replace"))

    def wait_for(self, needle: str, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while needle not in self.text:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError(f"{needle!r} not on screen: {self.text[-2000:]!r}")
            time.sleep(0.05)

    def press(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def workers(self) -> list[int]:
        try:
            found = [p.pid for p in psutil.Process(self.proc.pid).children(recursive=True)]
        except psutil.NoSuchProcess:
            found = []
        self._seen.update(found)
        return found

    def close_terminal(self) -> None:
        """The terminal goes away: the kernel hangs up the session (SIGHUP), reads and writes fail."""
        self._closing = True
        self._reader.join()
        master, self.master = self.master, None
        os.close(master)

    def ended_within(self, seconds: float) -> float | None:
        """Seconds until the process ended; None if it did not within ``seconds`` (it is killed)."""
        t0 = time.monotonic()
        try:
            self.proc.wait(timeout=seconds)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return None
        return time.monotonic() - t0

    def close(self) -> None:
        """Whatever the test found: nothing of this run is left (the app and any worker)."""
        self.workers()
        left = alive(sorted(self._seen))
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in left:
            with contextlib.suppress(psutil.NoSuchProcess):
                psutil.Process(pid).kill()
        if self.master is not None:
            self.close_terminal()


def _winsize(rows: int, cols: int) -> bytes:
    import struct

    return struct.pack("HHHH", rows, cols, 0, 0)


def alive(pids: list[int]) -> list[int]:
    return [
        p
        for p in pids
        if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE
    ]
