"""Every fd a worker owns is declared here, so that the inspector can check it against /proc."""

from __future__ import annotations

import os
import socket

from vmmtui.backends.base import CallLog
from vmmtui.stream.state import HeldFd, HeldKind


class FdBook:
    """The fds a worker holds, and those opened and closed since the last step report."""

    def __init__(self, calls: CallLog):
        self.calls = calls
        self._held: dict[int, HeldFd] = {}
        self._opened: list[HeldFd] = []
        self._closed: list[int] = []

    def hold(self, fd: int, kind: HeldKind, note: str = "", report: bool = True) -> None:
        """Declare ``fd`` (its identity read now from /proc/self/fd); ``report``: list it as opened."""
        held = HeldFd.of(fd, kind, note)
        self._held[fd] = held
        if report:
            self._opened.append(held)

    def close_fd(self, fd: int | None, what: str = "") -> None:
        """Close a declared fd, as a recorded call; an fd we do not hold is left alone."""
        if fd is None or fd not in self._held:
            return
        del self._held[fd]
        self.calls.timed(
            "close",
            {"fd": fd, **({"what": what} if what else {})},
            lambda: os.close(fd),
            lambda _: "0",
        )
        self._closed.append(fd)

    def close_socket(self, sock: socket.socket, what: str) -> None:
        """Close a socket object (its fd is declared or not), as a recorded call."""
        fd = sock.fileno()
        self._held.pop(fd, None)
        self.calls.timed("close", {"fd": fd, "what": what}, sock.close, lambda _: "0")
        self._closed.append(fd)

    def forget(self, fd: int) -> None:
        """``fd`` was closed by someone else (the backend's release of a memfd handle): report it closed."""
        if self._held.pop(fd, None) is not None:
            self._closed.append(fd)

    def __contains__(self, fd: int) -> bool:
        return fd in self._held

    def of_kind(self, kind: HeldKind) -> list[int]:
        return [h.fd for h in self._held.values() if h.kind == kind]

    def held(self) -> list[HeldFd]:
        return list(self._held.values())

    def take(self) -> tuple[list[HeldFd], list[int]]:
        """The fds opened and closed since the last call (one step's worth)."""
        opened, closed = self._opened, self._closed
        self._opened, self._closed = [], []
        return opened, closed
