"""Typed events a Session emits; the CLI prints them and the TUI renders them. No Textual here."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from vmmtui.protocol import StepReport
from vmmtui.troubleshooting import Failure


@dataclass
class Event:
    def to_dict(self) -> dict[str, Any]:
        return {"event": type(self).__name__, **asdict(self)}


@dataclass
class Notice(Event):
    text: str


@dataclass
class SessionStarted(Event):
    backend: str
    reason: str
    label: str
    requested_size: int
    socket_dir: str
    socket_path: str
    plan: list[tuple[str, str]]
    mechanism: str = "vmm"
    consumers: list[str] = field(default_factory=lambda: ["consumer"])
    direction: str = "producer-writes"
    #: the device each worker runs on, by worker name
    devices: dict[str, int] = field(default_factory=dict)


@dataclass
class WorkerStarted(Event):
    role: str
    pid: int
    backend: str


@dataclass
class StepStarted(Event):
    index: int
    role: str
    step: str


@dataclass
class StepDone(Event):
    index: int
    report: StepReport
    roundtrip_ns: int
    overhead_ns: int  # roundtrip minus the step's own duration: what the inspector's plumbing cost

    @property
    def role(self) -> str:
        return self.report.role

    @property
    def step(self) -> str:
        return self.report.step


@dataclass
class FdRow:
    """One fd as the kernel shows it, with what it is to us and whether the worker's word matches."""

    fd: int
    target: str
    kind: str  # what the worker declared (exported, received, ...) or a class from the target
    note: str = ""
    check: str | None = None  # ok | missing | mismatch | None (not one of the worker's own fds)
    detail: str = ""


@dataclass
class FdSnapshot(Event):
    role: str
    pid: int
    status: str
    rows: list[FdRow] = field(default_factory=list)
    closed: list[FdRow] = field(default_factory=list)  # fds the last step closed, with the kernel's view
    error: str | None = None

    @property
    def problems(self) -> list[FdRow]:
        return [r for r in self.rows + self.closed if r.check in ("missing", "mismatch", "still-open")]


@dataclass
class KcmpVerdict(Event):
    producer_pid: int
    producer_fd: int
    consumer_pid: int
    consumer_fd: int
    same: bool | None
    detail: str
    consumer: str = "consumer"

    def describe(self) -> str:
        sign = {True: "≡", False: "≢", None: "?"}[self.same]
        return f"producer fd {self.producer_fd} {sign} {self.consumer} fd {self.consumer_fd}: {self.detail}"


@dataclass
class WorkerExited(Event):
    role: str
    pid: int
    returncode: int | None
    signal: str | None
    expected: bool
    log_tail: list[str] = field(default_factory=list)

    def describe(self) -> str:
        how = f"killed by {self.signal}" if self.signal else f"exit code {self.returncode}"
        return f"{self.role} (pid {self.pid}) {how}"


@dataclass
class SessionFailed(Event):
    role: str
    step: str
    failure: Failure


@dataclass
class SessionFinished(Event):
    verified: bool
    integers: int
    fd_checks: int
    fd_problems: int
    kcmp: str


@dataclass
class SessionClosed(Event):
    clean: bool
    leftovers: list[str] = field(default_factory=list)


@dataclass
class ScenarioOutcome(Event):
    """How a failure scenario ended, against what it promised to show."""

    name: str
    outcome: str  # "verified" or the failure code
    at: str  # "role step" where it ended, or ""
    expected: list[str]
    as_expected: bool
    explanation: str
