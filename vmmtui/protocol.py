"""The control channel between the session and a worker: JSON lines over a socketpair.

The worker's stdout and stderr are not used for control, so whatever the driver or Python prints
cannot corrupt it. Session -> worker: ``{"cmd": "step", "step": NAME, "args": {...}}``,
``{"cmd": "run", "args": {STEP: {...}}}``, ``{"cmd": "quit"}``. Worker -> session:
``{"type": "hello", **Hello}``, one ``{"type": "report", "report": StepReport}`` per step,
``{"type": "error", "message": ...}`` for a command it cannot read, ``{"type": "bye"}`` at exit.
Every line carries ``"v": VERSION``; reports and hellos are decoded with the codec.
"""

from __future__ import annotations

import json
import select
import socket
import time
from dataclasses import dataclass, field
from typing import Any

from vmmtui.codec import DecodeError, decode
from vmmtui.state import HeldFd, StepReport

VERSION = 1
MAX_LINE = 8 << 20


class ProtocolError(Exception):
    """A malformed or unexpected control message."""


@dataclass
class Hello:
    """The worker's first message: who it is, its steps in order, and the fds it holds from the start."""

    role: str
    pid: int
    steps: list[str]
    backend: str
    label: str
    held: list[HeldFd] = field(default_factory=list)


def decode_report(data: Any) -> StepReport:
    """A ``report`` message's payload as a StepReport; ProtocolError when its shape is wrong."""
    try:
        return decode(StepReport, data, "report")
    except DecodeError as exc:
        raise ProtocolError(f"malformed step report: {exc}") from exc


def decode_hello(message: dict[str, Any]) -> Hello:
    """A ``hello`` message as a Hello; ProtocolError when it is not one."""
    if message.get("type") != "hello":
        raise ProtocolError(f"expected hello, got {str(message)[:80]}")
    try:
        return decode(Hello, message, "hello")
    except DecodeError as exc:
        raise ProtocolError(f"malformed hello: {exc}") from exc


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
        except (ValueError, RecursionError) as exc:
            raise ProtocolError(f"not JSON: {line[:80]!r}") from exc
        if not isinstance(message, dict) or message.get("v") != VERSION:
            raise ProtocolError(f"unexpected control message: {line[:80]!r}")
        return message

    def close(self) -> None:
        self.sock.close()
