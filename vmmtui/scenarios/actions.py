"""What a scenario makes the session do around a step; each is real (signals, real processes)."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass

from vmmtui.scenarios.model import Stage
from vmmtui.stream.events import Event, Notice

ROGUE = [sys.executable, "-m", "vmmtui.scenarios.rogue"]
#: the signal no process can catch; by number where the platform has no name for it (Windows, where
#: the scenarios are listed but never run: live runs need Linux)
SIGKILL: int = getattr(signal, "SIGKILL", 9)


@dataclass(frozen=True)
class Kill:
    """Send ``sig`` to a worker and wait for it to die."""

    role: str
    sig: int = SIGKILL
    when: str = ""

    def run(self, stage: Stage) -> list[Event]:
        return stage.kill(self.role, self.sig, self.when)


@dataclass(frozen=True)
class Freeze:
    """SIGSTOP a worker: its sockets stay open, nothing arrives (the session resumes it to close)."""

    role: str

    def run(self, stage: Stage) -> list[Event]:
        return stage.freeze(self.role)


@dataclass(frozen=True)
class PlantStaleSocket:
    """A real process binds the socket path and is SIGKILLed, leaving the file as a crashed run would."""

    def run(self, stage: Stage) -> list[Event]:
        path = stage.socket_path
        stage.start_helper("dead-listener", [*ROGUE, "dead-listener", path])
        line = stage.helper_line("dead-listener", 30.0)
        stage.stop_helper("dead-listener")
        there = os.path.exists(path)
        return [
            Notice(
                f"scenario: pid {line.get('pid', '?')} bound {path} and was SIGKILLed; the socket file "
                f"{'is left behind' if there else 'did not stay (unexpected)'}"
            )
        ]


@dataclass(frozen=True)
class IntruderConnects:
    """Another process of the same user connects to the socket before the consumer."""

    def run(self, stage: Stage) -> list[Event]:
        stage.start_helper("intruder", [*ROGUE, "intruder", stage.socket_path])
        line = stage.helper_line("intruder", 5.0)
        if line.get("event") == "connected":
            return [
                Notice(
                    f"scenario: intruder pid {line.get('pid')} (uid {line.get('uid')}) connected to the "
                    "socket before the consumer"
                )
            ]
        return [Notice(f"scenario: the intruder did not connect: {line}")]


@dataclass(frozen=True)
class IntruderReport:
    """What the intruder received (it must be no fd), then it is reaped."""

    def run(self, stage: Stage) -> list[Event]:
        line = stage.helper_line("intruder", 5.0)
        stage.stop_helper("intruder")
        return [
            Notice(
                f"scenario: the intruder received {line.get('fds_received', '?')} fd(s): "
                f"{line.get('result', line)}"
            )
        ]


@dataclass(frozen=True)
class Quit:
    """A worker exits on its own, as a program that is done would (after its cleanup step)."""

    role: str
    when: str = ""

    def run(self, stage: Stage) -> list[Event]:
        return stage.quit(self.role, self.when)


#: the memfd backend's allocation as /proc/PID/maps names it
MEMFD_MAPPED = "/memfd:vmmtui-alloc"


@dataclass(frozen=True)
class ShowPinned:
    """The kernel's view of who still maps the shared memory: ``role``'s /proc/PID/maps, read now.

    Device memory does not appear in maps (the workers report cuMemGetInfo instead); memfd pages do."""

    role: str

    def run(self, stage: Stage) -> list[Event]:
        pid = stage.pid(self.role)
        if pid is None:
            return [Notice(f"scenario: {self.role} is not running: no mapping to read")]
        try:
            with open(f"/proc/{pid}/maps") as f:
                lines = [line.split() for line in f if MEMFD_MAPPED in line]
        except OSError as exc:
            return [Notice(f"scenario: /proc/{pid}/maps unreadable: {exc.strerror}")]
        if not lines:
            return [
                Notice(
                    f"kernel: /proc/{pid}/maps of the {self.role} holds no {MEMFD_MAPPED} mapping "
                    "now (on cuda device memory never shows there: see cuMemGetInfo in the steps)"
                )
            ]
        spans = []
        for fields in lines:
            start, end = (int(x, 16) for x in fields[0].split("-"))
            spans.append(f"{fields[0]} ({(end - start) >> 10} KiB, inode {fields[4]})")
        return [
            Notice(
                f"kernel: /proc/{pid}/maps of the {self.role} still maps {MEMFD_MAPPED}: "
                + ", ".join(spans)
                + ": its pages stay allocated while any mapping or fd refers to them"
            )
        ]
