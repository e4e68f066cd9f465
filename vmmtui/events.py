"""The one event stream: what a Session (or, later, attach) emits and every renderer consumes.

Each event is a dataclass that serialises to one JSON object and back into an equal event
(``to_dict``/``from_dict``, ``to_json``/``from_json``); ``--json``, transcripts and recordings are
this stream. ``VERSION`` changes whenever a field changes meaning. Events hold data only: their
wording is ``vmmtui/narration.py``'s. No Textual here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, ClassVar

from vmmtui.codec import DecodeError, decode, encode
from vmmtui.names import json_safe
from vmmtui.state import StepReport
from vmmtui.troubleshooting import Failure

#: the event format's version: recordings and --json carry it in every line
VERSION = 1


class EventFormatError(ValueError):
    """A line that is not an event of this format (unknown type, wrong version, wrong shape)."""


@dataclass
class Event:
    types: ClassVar[dict[str, type[Event]]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        Event.types[cls.__name__] = cls

    def to_dict(self) -> dict[str, Any]:
        return {"v": VERSION, "event": type(self).__name__, **encode(self)}

    def to_json(self) -> str:
        # names from /proc, the wire or recordings stay raw in the data; nothing in them that a
        # terminal acts on is written raw (json_safe)
        return json_safe(json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":")))

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Event:
        if not isinstance(data, dict):
            raise EventFormatError(f"expected an object, got {type(data).__name__}")
        if data.get("v") != VERSION:
            raise EventFormatError(
                f"event format version {data.get('v')!r}, this vmmtui reads {VERSION}"
            )
        cls = Event.types.get(str(data.get("event")))
        if cls is None:
            raise EventFormatError(f"unknown event type {data.get('event')!r}")
        body = {k: v for k, v in data.items() if k not in ("v", "event")}
        try:
            return decode(cls, body, cls.__name__)
        except DecodeError as exc:
            raise EventFormatError(str(exc)) from None

    @staticmethod
    def from_json(line: str) -> Event:
        try:
            data = json.loads(line)
        except ValueError as exc:
            raise EventFormatError(f"not JSON: {exc}") from None
        return Event.from_dict(data)


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
    #: the failure scenario this session shows (None: the normal sequence)
    scenario: ScenarioInfo | None = None
    #: how the fd reaches each consumer: scm-rights or pidfd (pidfd_open + pidfd_getfd)
    transport: str = "scm-rights"


@dataclass
class ScenarioInfo:
    """What a scenario is and what it promises, as the session announces it (see ``ScenarioOutcome``)."""

    name: str
    summary: str
    explanation: str
    #: outcomes that count as "happened as described": "verified", an error code, "*" or "any error"
    expect: list[str]
    #: (role, step) where the failure is expected; None when the run verifies
    at: tuple[str, str] | None = None


@dataclass
class WorkerStarted(Event):
    role: str
    pid: int
    backend: str


@dataclass
class StepStarted(Event):
    """Emitted before the worker is asked (``Session.stepping`` yields it while the step runs)."""

    index: int
    role: str
    step: str


@dataclass
class NextStep(Event):
    """Where the plan stands, after the start and after every step: ``done`` steps have run and
    ``role``'s ``step`` (index ``done``) runs next; both are "" once the plan has stopped (run to
    its end, failed, or the session closed)."""

    done: int
    role: str = ""
    step: str = ""

    @property
    def stopped(self) -> bool:
        return not self.step


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
    closed: list[FdRow] = field(
        default_factory=list
    )  # fds the last step closed, with the kernel's view
    error: str | None = None

    @property
    def problems(self) -> list[FdRow]:
        return [
            r for r in self.rows + self.closed if r.check in ("missing", "mismatch", "still-open")
        ]


@dataclass
class KcmpVerdict(Event):
    producer_pid: int
    producer_fd: int
    consumer_pid: int
    consumer_fd: int
    same: bool | None
    detail: str
    consumer: str = "consumer"


@dataclass
class WorkerExited(Event):
    role: str
    pid: int
    returncode: int | None
    signal: str | None
    expected: bool
    log_tail: list[str] = field(default_factory=list)


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
    mechanism: str
    #: the last kcmp verdict for each consumer's received fd (empty for legacy IPC: no fd travels)
    kcmp: list[KcmpVerdict] = field(default_factory=list)


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


# -- attach and watch: programs vmmtui did not start ---------------------------------------------------
@dataclass
class AttachEvent(Event):
    """Events only ``vmmtui attach``/``watch`` produce (a session never does); ``at`` is seconds since the start."""


@dataclass
class ProcessSeen(AttachEvent):
    pid: int
    ppid: int
    name: str
    cmdline: str
    uid: int | None
    at: float
    #: the pid namespace (inode of /proc/PID/ns/pid) when readable, to spot pairs in different ones
    pid_ns: int | None = None


@dataclass
class ProcessGone(AttachEvent):
    pid: int
    name: str
    at: float
    returncode: int | None = None  # known only for vmmtui's own children (watch)
    signal: str | None = None


@dataclass
class ProcessUnreadable(AttachEvent):
    """A target vmmtui may not read ("no permission") or that does not exist: said once, and we go on."""

    pid: int
    reason: str


@dataclass
class FdHolder:
    pid: int
    fd: int


@dataclass
class FdOpened(AttachEvent):
    pid: int
    fd: int
    target: str
    kind: str  # gpu | memfd | shm | socket | pidfd
    #: present (there when first seen) | opened | arrived (kcmp: another process's open file) | inherited
    #: | unknown (the same open file as another process's, both appeared in one poll: direction unseen)
    how: str
    at: float
    source: FdHolder | None = None  # the fd it is the same open file as, for arrived/inherited
    via: str = (
        ""  # the evidence for how it travelled: a pidfd of the source held, a connected socket
    )


@dataclass
class FdClosed(AttachEvent):
    pid: int
    fd: int
    target: str
    kind: str
    at: float


@dataclass
class SharedFile(AttachEvent):
    """An open file description (kcmp-proven), or one memory object, held by two or more processes."""

    kind: str
    target: str
    dev: int
    ino: int
    holders: list[FdHolder]
    mapped_by: list[int] = field(default_factory=list)  # pids with it in /proc/PID/maps
    #: True: one open file description (kcmp); False: same inode, different descriptions; None: kcmp unavailable
    same_description: bool | None = True
    proof: str = ""
    at: float = 0.0


@dataclass
class GpuMemory(AttachEvent):
    """What NVML charges a process, per device (bytes); ``error`` when NVML cannot say."""

    pid: int
    used: dict[int, int] = field(default_factory=dict)
    error: str | None = None
    at: float = 0.0


@dataclass
class PreflightCheck(AttachEvent):
    """One question of ``attach --can A B``: ``ok`` None when it does not apply or cannot be known."""

    a: int
    b: int
    name: str
    ok: bool | None
    finding: str
    cause: str = ""
    fix: str = ""


@dataclass
class Leak(AttachEvent):
    kind: str  # fd-after-peer | held-until-exit | gpu-memory-after-peer | shm-file | socket-file
    what: str
    pid: int | None
    detail: str
    fix: str
    at: float = 0.0


@dataclass
class WatchFinished(AttachEvent):
    """The watched command's end: its exit, how many processes and shares were seen, what could not be seen."""

    command: list[str]
    returncode: int | None
    signal: str | None
    processes: int
    shared: int
    leaks: int
    seconds: float
    unseen: list[str] = field(default_factory=list)


@dataclass
class SocketPair(AttachEvent):
    """Two watched processes connected by a Unix socket (sock_diag's peer): the road an fd can travel."""

    a: FdHolder
    b: FdHolder
    type: str
    path: str
    at: float = 0.0
