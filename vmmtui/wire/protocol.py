"""The control channel between the session and a worker: JSON lines over a socketpair.

The worker's stdout and stderr are not used for control, so whatever the driver or Python prints
cannot corrupt it. Session -> worker: a ``Command`` (``RunStep``, ``RunAll``, ``Quit``), written
``{"cmd": "step", "step": NAME, "args": {...}}``, ``{"cmd": "run", "args": {STEP: {...}}}``,
``{"cmd": "quit"}`` by ``command_message`` and read back typed by ``decode_command``. Worker -> session:
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

from vmmtui.stream.codec import DecodeError, decode, encode
from vmmtui.stream.state import HeldFd, StepReport

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


@dataclass(frozen=True)
class StepArgs:
    """What a step needs from the session: the pid the peer check must find (accept, connect)."""

    expect_pid: int | None = None


@dataclass(frozen=True)
class RunStep:
    """Run one step of the worker's plan."""

    step: str
    args: StepArgs = field(default_factory=StepArgs)


@dataclass(frozen=True)
class RunAll:
    """Run every step not yet done, in order, up to the first failure (the worker tests, the bench)."""

    args: dict[str, StepArgs] = field(default_factory=dict)


@dataclass(frozen=True)
class Quit:
    """Release everything and exit."""


Command = RunStep | RunAll | Quit
#: each command's name on the wire (the ``cmd`` key)
COMMANDS: dict[str, type[RunStep] | type[RunAll] | type[Quit]] = {
    "step": RunStep,
    "run": RunAll,
    "quit": Quit,
}


def command_message(command: Command) -> dict[str, Any]:
    """``command`` as the control line's object."""
    name = next(n for n, cls in COMMANDS.items() if isinstance(command, cls))
    return {"cmd": name, **encode(command)}


def decode_command(message: dict[str, Any]) -> Command:
    """A control line from the session as a Command; ProtocolError when it is not one."""
    cls = COMMANDS.get(str(message.get("cmd")))
    if cls is None:
        raise ProtocolError(f"unknown command {str(message.get('cmd'))[:40]!r}")
    body = {k: v for k, v in message.items() if k not in ("v", "cmd")}
    try:
        return decode(cls, body, message["cmd"])
    except DecodeError as exc:
        raise ProtocolError(f"malformed command: {exc}") from None


@dataclass(frozen=True)
class Report:
    """One step's report."""

    report: StepReport


@dataclass(frozen=True)
class WorkerError:
    """A command the worker could not read."""

    message: str


@dataclass(frozen=True)
class Bye:
    """The worker released everything and exits."""


Reply = Hello | Report | WorkerError | Bye
#: each reply's name on the wire (the ``type`` key)
REPLIES: dict[str, type[Hello] | type[Report] | type[WorkerError] | type[Bye]] = {
    "hello": Hello,
    "report": Report,
    "error": WorkerError,
    "bye": Bye,
}


def reply_message(reply: Reply) -> dict[str, Any]:
    """``reply`` as the control line's object."""
    name = next(n for n, cls in REPLIES.items() if isinstance(reply, cls))
    return {"type": name, **encode(reply)}


def decode_reply(message: dict[str, Any]) -> Reply:
    """A control line from a worker as a Reply; ProtocolError when it is not one."""
    name = str(message.get("type"))
    cls = REPLIES.get(name)
    if cls is None:
        raise ProtocolError(f"unexpected message {str(message)[:80]}")
    body = {k: v for k, v in message.items() if k not in ("v", "type")}
    try:
        return decode(cls, body, name)
    except (DecodeError, RecursionError) as exc:
        raise ProtocolError(
            f"malformed {'step report' if name == 'report' else name}: {exc}"
        ) from None


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
