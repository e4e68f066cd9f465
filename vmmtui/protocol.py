"""The control channel between the session and a worker: JSON lines over a socketpair.

The worker's stdout and stderr are not used for control, so whatever the driver or Python prints
cannot corrupt it. Session -> worker: ``{"cmd": "step", "step": NAME, "args": {...}}``, ``run``,
``quit``. Worker -> session: ``hello``, one ``report`` per step, ``bye``.
"""

from __future__ import annotations

import json
import os
import select
import socket
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from vmmtui.backends.base import Call
from vmmtui.troubleshooting import Failure

VERSION = 1
MAX_LINE = 8 << 20


class ProtocolError(Exception):
    """A malformed or unexpected control message."""


@dataclass
class HeldFd:
    """An fd a worker says it holds, with the identity the inspector checks against /proc."""

    fd: int
    kind: str  # control | log | listener | connection | allocation | exported | received | imported
    dev: int
    ino: int
    target: str  # what the worker itself reads in /proc/self/fd
    note: str = ""

    @classmethod
    def of(cls, fd: int, kind: str, note: str = "") -> HeldFd:
        st = os.fstat(fd)
        return cls(fd, kind, st.st_dev, st.st_ino, os.readlink(f"/proc/self/fd/{fd}"), note)


@dataclass
class StepReport:
    """Everything one step did, as the worker saw it."""

    role: str
    step: str
    ok: bool
    duration_ns: int
    calls: list[Call] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    opened: list[HeldFd] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    held: list[HeldFd] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    failure: Failure | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> StepReport:
        try:
            return cls(
                role=d["role"], step=d["step"], ok=bool(d["ok"]), duration_ns=int(d["duration_ns"]),
                calls=[Call(**c) for c in d.get("calls", [])],
                log=[str(x) for x in d.get("log", [])],
                opened=[HeldFd(**h) for h in d.get("opened", [])],
                closed=[int(x) for x in d.get("closed", [])],
                held=[HeldFd(**h) for h in d.get("held", [])],
                state=dict(d.get("state", {})),
                failure=Failure(**d["failure"]) if d.get("failure") else None,
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"malformed step report: {exc}") from exc


class LineChannel:
    """Newline-delimited JSON over a stream socket, with timeouts on receive."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buf = b""

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall(json.dumps({"v": VERSION, **message}).encode() + b"\n")

    def receive(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next message; None at end of file; TimeoutError past ``timeout``; ProtocolError if malformed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self._buf:
            if len(self._buf) > MAX_LINE:
                raise ProtocolError("control line longer than 8 MiB")
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([self.sock], [], [], left)
            if not ready:
                raise TimeoutError("no control message in time")
            try:
                chunk = self.sock.recv(1 << 16)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                if self._buf.strip():
                    raise ProtocolError(f"truncated control message: {self._buf[:80]!r}")
                return None
            self._buf += chunk
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            message = json.loads(line)
        except ValueError as exc:
            raise ProtocolError(f"not JSON: {line[:80]!r}") from exc
        if not isinstance(message, dict) or message.get("v") != VERSION:
            raise ProtocolError(f"unexpected control message: {line[:80]!r}")
        return message

    def close(self) -> None:
        self.sock.close()
