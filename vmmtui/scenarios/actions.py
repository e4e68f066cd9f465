"""What a scenario makes the session do around a step; each is real (signals, real processes)."""

from __future__ import annotations

import os
import signal
import sys
from dataclasses import dataclass

from vmmtui.events import Event, Notice
from vmmtui.scenarios.model import Stage

ROGUE = [sys.executable, "-m", "vmmtui.scenarios.rogue"]


@dataclass(frozen=True)
class Kill:
    """Send ``sig`` to a worker and wait for it to die."""

    role: str
    sig: int = signal.SIGKILL
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
