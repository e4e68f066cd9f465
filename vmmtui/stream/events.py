"""The one event stream: what a Session (or, later, attach) emits and every renderer consumes.

Each event is a dataclass that serialises to one JSON object and back into an equal event
(``to_dict``/``from_dict``, ``to_json``/``from_json``); ``--json``, transcripts and recordings are
this stream. ``VERSION`` changes whenever a field changes meaning. Events hold data only: their
wording is ``vmmtui/words/narration.py``'s. No Textual here.
"""

from __future__ import annotations

import importlib
import json
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar

from vmmtui.stream.codec import DecodeError, decode, encode
from vmmtui.stream.failures import Failure
from vmmtui.stream.names import json_safe
from vmmtui.stream.state import HeldKind, StepReport

#: one encoder for every event (``json.dumps`` with options builds a new one each call)
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def line_of(data: dict[str, Any]) -> str:
    """An event's JSON object as its one line: nothing a terminal acts on is written raw."""
    return json_safe(_ENCODE(data))


#: the event format's version: recordings and --json carry it in every line
VERSION = 1


class EventFormatError(ValueError):
    """A line that is not an event of this format (unknown type, wrong version, wrong shape)."""


#: modules that add event types of their own (a subclass of Event registers itself by its name).
#: A reader that meets a type it does not know imports these first, so that a recording of any
#: kind reads back without its reader importing them; a new module of events adds its name here.
EVENT_MODULES = ("vmmtui.stream.observed", "vmmtui.stream.gpu")


@dataclass(frozen=True)
class Event:
    """One thing that happened. Subclasses are frozen dataclasses (``@dataclass(frozen=True)``;
    a non-frozen one fails at import), registered by class name, which must be unique."""

    types: ClassVar[dict[str, type[Event]]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        known = Event.types.get(cls.__name__)
        if known is not None and known.__module__ != cls.__module__:
            raise TypeError(
                f"event type {cls.__name__} of {cls.__module__} is already "
                f"{known.__module__}'s: a line names its type by class name only"
            )
        Event.types[cls.__name__] = cls

    @staticmethod
    def all_types() -> dict[str, type[Event]]:
        """Every event type, those of ``EVENT_MODULES`` included."""
        for module in EVENT_MODULES:
            importlib.import_module(module)
        return Event.types

    def to_dict(self) -> dict[str, Any]:
        return {"v": VERSION, "event": type(self).__name__, **encode(self)}

    def to_json(self) -> str:
        # names from /proc, the wire or recordings stay raw in the data; nothing in them that a
        # terminal acts on is written raw (json_safe)
        return line_of(self.to_dict())

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Event:
        if not isinstance(data, dict):
            raise EventFormatError(f"expected an object, got {type(data).__name__}")
        if data.get("v") != VERSION:
            raise EventFormatError(
                f"event format version {data.get('v')!r}, this vmmtui reads {VERSION}"
            )
        name = str(data.get("event"))
        cls = Event.types.get(name) or Event.all_types().get(name)
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


class NoticeCode(StrEnum):
    """What a notice says, as a code: ``vmmtui/words/notices.py`` words each from its facts."""

    STALE_DIR_REMOVED = "stale-dir-removed"  # facts: path (a dead session's directory)
    SCENARIO = "scenario"  # facts: name (the words are its catalogue entry's explanation)
    IN_BACKGROUND = "step-in-background"  # facts: role, step (sent without waiting)
    INTERRUPTED = "step-interrupted"  # facts: role, step ("" when none was pending)
    CLEANUP_FAILED = "cleanup-failed"  # facts: role; the failed call is the notice's failure
    #: /dev/shm files made during a watch that no followed process was seen to hold: not theirs
    SHM_STRANGERS = "shm-strangers"  # facts: count, names (the first three, comma-separated)
    #: facts: role, before and after (the fd table's sizes around the receive), via ("scm",
    #: "pidfd" or "legacy": no fd is to arrive), and each new fd as "fd.N": its target
    FD_DELTA = "fd-delta"
    SCENARIO_KILLED = "scenario-killed"  # facts: role, pid, signal (its name), when
    SCENARIO_EXITED = "scenario-exited"  # facts: role, pid, when
    SCENARIO_FROZEN = "scenario-frozen"  # facts: role, pid (SIGSTOP: its socket stays open)


@dataclass(frozen=True)
class Notice(Event):
    #: the notice in words: an older recording's, or one that a layer below words/ still words
    #: (tests/test_house.py's ratchet lists them); "" when ``code`` says what it is
    text: str = ""
    #: the failed call the notice is about (a worker's cleanup that failed): its cause and fix
    #: are worded where the notice is drawn
    failure: Failure | None = None
    #: what it says, as a ``NoticeCode`` (a code this version does not know is shown as it is),
    #: and the facts it is worded from
    code: str = ""
    facts: dict[str, str | int] = field(default_factory=dict)


@dataclass(frozen=True)
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


@dataclass(frozen=True)
class ScenarioInfo:
    """What a scenario is and what it promises, as the session announces it (see ``ScenarioOutcome``)."""

    name: str
    summary: str
    explanation: str
    #: outcomes that count as "happened as described": "verified", an error code, "*" or "any error"
    expect: list[str]
    #: (role, step) where the failure is expected; None when the run verifies
    at: tuple[str, str] | None = None


@dataclass(frozen=True)
class WorkerStarted(Event):
    role: str
    pid: int
    backend: str


@dataclass(frozen=True)
class StepStarted(Event):
    """Emitted before the worker is asked (``Session.stepping`` yields it while the step runs)."""

    index: int
    role: str
    step: str


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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


class FdCheck(StrEnum):
    """What /proc says of an fd a worker declared (or closed), against the worker's word."""

    OK = "ok"
    MISSING = "missing"  # declared, not in /proc
    MISMATCH = "mismatch"  # in /proc, but another file than the worker says
    STILL_OPEN = "still-open"  # closed by the worker's word, open in /proc
    CLOSED = "closed"  # closed, and gone from /proc
    REUSED = "reused"  # closed, and the number now names a newer fd
    LEAKED = "leaked"  # still open after the worker's cleanup (FD_LEAK)

    @property
    def problem(self) -> bool:
        return self in FD_PROBLEMS


#: the checks that are a problem: the worker's word and the kernel disagree
FD_PROBLEMS = frozenset({FdCheck.MISSING, FdCheck.MISMATCH, FdCheck.STILL_OPEN, FdCheck.LEAKED})


class FdClass(StrEnum):
    """What an fd no worker declared is, from its /proc target (``fdchecks.classify``)."""

    DRIVER = "driver"
    SOCKET = "socket"
    PIPE = "pipe"
    ANON = "anon"
    OTHER = "other"
    CLOSED = "closed"  # a row of ``FdSnapshot.closed``


@dataclass(frozen=True)
class FdRow:
    """One fd as the kernel shows it, with what it is to us and whether the worker's word matches."""

    fd: int
    target: str
    #: what the worker declared, or (no worker declared it) a class from the target
    kind: HeldKind | FdClass | AttachKind
    note: str = ""
    #: None: not one of the worker's own fds
    check: FdCheck | None = None
    detail: str = ""


@dataclass(frozen=True)
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
        return [r for r in self.rows + self.closed if r.check in FD_PROBLEMS]


@dataclass(frozen=True)
class KcmpVerdict(Event):
    producer_pid: int
    producer_fd: int
    consumer_pid: int
    consumer_fd: int
    same: bool | None
    detail: str
    consumer: str = "consumer"


@dataclass(frozen=True)
class WorkerExited(Event):
    role: str
    pid: int
    returncode: int | None
    signal: str | None
    expected: bool
    log_tail: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SessionFailed(Event):
    role: str
    step: str
    failure: Failure


@dataclass(frozen=True)
class SessionFinished(Event):
    verified: bool
    integers: int
    fd_checks: int
    fd_problems: int
    mechanism: str
    #: the last kcmp verdict for each consumer's received fd (empty for legacy IPC: no fd travels)
    kcmp: list[KcmpVerdict] = field(default_factory=list)


@dataclass(frozen=True)
class SessionClosed(Event):
    clean: bool
    leftovers: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ScenarioOutcome(Event):
    """How a failure scenario ended, against what it promised to show."""

    name: str
    outcome: str  # "verified" or the failure code
    at: str  # "role step" where it ended, or ""
    expected: list[str]
    as_expected: bool
    explanation: str


# -- attach and watch: programs vmmtui did not start ---------------------------------------------------
@dataclass(frozen=True)
class AttachEvent(Event):
    """Events only ``vmmtui attach``/``watch`` produce (a session never does); ``at`` is seconds since the start."""


@dataclass(frozen=True)
class ProcessSeen(AttachEvent):
    pid: int
    ppid: int
    name: str
    cmdline: str
    uid: int | None
    at: float
    #: the pid namespace (inode of /proc/PID/ns/pid) when readable, to spot pairs in different ones
    pid_ns: int | None = None
    #: its container, from /proc/PID/cgroup (``docker 3f2a1b4c5d6e``; "" where none was found)
    container: str = ""
    #: its Kubernetes pod's uid ("" outside a pod)
    pod: str = ""
    #: its pid in its own PID namespace (NSpid), None where that is the pid seen here
    inner_pid: int | None = None


@dataclass(frozen=True)
class ProcessGone(AttachEvent):
    pid: int
    name: str
    at: float
    returncode: int | None = None  # known only for vmmtui's own children (watch)
    signal: str | None = None


@dataclass(frozen=True)
class ProcessUnreadable(AttachEvent):
    """A target vmmtui may not read ("no permission") or that does not exist: said once, and we go on."""

    pid: int
    reason: str


@dataclass(frozen=True)
class FdHolder:
    pid: int
    fd: int


class AttachKind(StrEnum):
    """The fds attach follows, from their /proc target: memory (the first four) and the roads."""

    GPU = "gpu"
    MEMFD = "memfd"
    SHM = "shm"
    DMABUF = "dmabuf"
    SOCKET = "socket"
    PIDFD = "pidfd"


class Arrival(StrEnum):
    """How an fd came to be in a process, as attach can prove it."""

    #: found at attach: open before ``attach``/``trace -p`` first read the process (a command
    #: that ``watch`` or ``trace --poll`` started has nothing found at attach: its fds are opened)
    PRESENT = "present"
    OPENED = "opened"
    ARRIVED = "arrived"  # kcmp: the same open file as another process's fd
    INHERITED = "inherited"
    #: the same open file as another process's, both appeared in one poll: the direction is unseen
    UNKNOWN = "unknown"


@dataclass(frozen=True)
class FdOpened(AttachEvent):
    pid: int
    fd: int
    target: str
    kind: AttachKind
    how: Arrival
    at: float
    source: FdHolder | None = None  # the fd it is the same open file as, for arrived/inherited
    via: str = (
        ""  # the evidence for how it travelled: a pidfd of the source held, a connected socket
    )


@dataclass(frozen=True)
class FdClosed(AttachEvent):
    pid: int
    fd: int
    target: str
    kind: AttachKind
    at: float


@dataclass(frozen=True)
class SharedFile(AttachEvent):
    """An open file description (kcmp-proven), or one memory object, held by two or more processes."""

    kind: AttachKind
    target: str
    dev: int
    ino: int
    holders: list[FdHolder]
    mapped_by: list[int] = field(default_factory=list)  # pids with it in /proc/PID/maps
    #: True: one open file description (kcmp); False: same inode, different descriptions; None: kcmp unavailable
    same_description: bool | None = True
    proof: str = ""
    at: float = 0.0


@dataclass(frozen=True)
class GpuMemory(AttachEvent):
    """What NVML charges a process, per device (bytes); ``error`` when NVML cannot say."""

    pid: int
    used: dict[int, int] = field(default_factory=dict)
    error: str | None = None
    at: float = 0.0
    #: device index -> the GPU's UUID as NVML names it (only what NVML said)
    uuids: dict[int, str] = field(default_factory=dict)


@dataclass(frozen=True)
class PreflightCheck(AttachEvent):
    """One question of ``attach --can A B``: ``ok`` None when it does not apply or cannot be known.
    What it found is a code and its facts (``trace/procfs/preflight.py``), worded with its cause
    and fix where it is drawn (``words/preflight.py``); ``finding``, ``cause`` and ``fix`` are the
    words an older vmmtui wrote into the stream, read when there is no code."""

    a: int
    b: int
    name: str
    ok: bool | None
    finding: str = ""
    cause: str = ""
    fix: str = ""
    code: str = ""
    facts: dict[str, str | int | bool | None] = field(default_factory=dict)


class LeakKind(StrEnum):
    FD_AFTER_PEER = "fd-after-peer"
    HELD_UNTIL_EXIT = "held-until-exit"
    GPU_MEMORY_AFTER_PEER = "gpu-memory-after-peer"
    SHM_FILE = "shm-file"
    SOCKET_FILE = "socket-file"
    #: the same findings where attach did not see which process made the fd (present at attach,
    #: or both ends appeared within one poll)
    POSSIBLE_FD_AFTER_PEER = "possible-fd-after-peer"
    #: memory that came from another process (an fd, or a mapping kept after its fd closed) still
    #: held when last read before the process exited: polling cannot see a close or an munmap
    #: after its last read, so every held-until-exit it says is possible
    POSSIBLE_HELD_UNTIL_EXIT = "possible-held-until-exit"
    #: memory that came from a process polling saw gone, still mapped by a live one
    POSSIBLE_HELD_AFTER_EXPORTER_DIED = "possible-held-after-exporter-died"
    #: a process whose pins on another's memory (fds and mappings) rose poll after poll with
    #: none released: a loop that keeps what it is sent, as far as the polls saw it
    POSSIBLE_GROWTH = "possible-growth"


@dataclass(frozen=True)
class Leak(AttachEvent):
    """Memory or a file polling found kept after its peers or owners were gone, as facts:
    ``words/leaks.py`` words what it is, why it is a leak and its fix where it is drawn.
    ``what``, ``detail`` and ``fix`` are the words an older vmmtui wrote into the stream (this
    one leaves them ""; a ``--json`` line carries them worded, as a finding's)."""

    kind: LeakKind
    what: str = ""
    pid: int | None = None
    detail: str = ""
    fix: str = ""
    at: float = 0.0
    #: an fd's kind as the kernel showed it (``AttachKind``'s memory values: gpu, memfd, shm,
    #: dmabuf; "" when not seen): the fact its fix is worded from
    memory: str = ""
    #: the other process of the relation (the one the memory came from), None where not seen
    peer: int | None = None
    #: the pins it counts (fds and mappings of pieces of the peer's memory), 0 where one fd
    pins: int = 0
    #: their bytes, from fstat of the fd or the length of the mapping (0: not seen)
    size: int = 0
    #: a growth's pins at the polls where they rose, the first the count it rose from
    trail: list[int] = field(default_factory=list)
    #: a growth's seconds from its first pin to this poll
    seconds: float = 0.0
    #: a hold after its peer was gone: when a poll found the peer gone, and this poll (ns of the
    #: polls' clock), so the policy weighs how long it lasted; 0 where not a hold
    since: int = 0
    ktime: int = 0
    #: the holder's name (its comm), the fd it keeps and what that points at (a file's path)
    name: str = ""
    fd: int = -1
    target: str = ""
    #: the processes it was shared with, all exited: pid → name
    peers: dict[int, str] = field(default_factory=dict)
    #: how polling saw the fd come (``FdOpened.how``); for a /dev/shm file "torch" (PyTorch's
    #: refcount file of a dead process) or "watched" (made during the watch, held by no one)
    how: str = ""
    #: when the fd appeared or arrived (seconds into the watch), and who sent it (pid, name)
    appeared: float = 0.0
    source: int | None = None
    source_name: str = ""
    #: GPU memory NVML still charges the holder, MiB
    mib: int = 0


@dataclass(frozen=True)
class MappingSeen(AttachEvent):
    """A memfd or /dev/shm file in a process's ``/proc/PID/maps``, first seen at a poll or with
    another length. mmap(2): "closing the file descriptor does not unmap the region", so a
    mapping pins the memory as an fd does (memfd_create(2): the memory is released when "all
    references to the file are dropped"): what came from another process and is still mapped
    after its fd closed is a pin. ``how``/``source``: where polling saw it come from (arrived:
    ``source`` held it first; inherited: the parent; found at attach; opened: its own, as far as
    the polls saw)."""

    pid: int
    path: str
    kind: AttachKind
    dev: int
    ino: int
    #: bytes mapped: the sum of its mappings' lengths
    size: int
    how: Arrival
    at: float
    #: the process it came from (None: its own, or not seen)
    source: int | None = None
    #: the evidence for ``how``, a ``MappingVia`` ("" where it is plain; ``fd:N``: mapped
    #: through its fd N, whose arrival polling saw)
    via: str = ""


class MappingVia(StrEnum):
    """How polling told where a mapping came from (worded in ``words/polling.py``)."""

    #: another process held the same memory at the poll before, and this one did not
    HELD_BEFORE = "held-before"
    #: its parent held it when this process was first seen
    PARENT = "parent"
    #: both held it at a command's first poll
    FIRST_POLL = "first-poll"
    #: both held it when first seen together: which came first was not seen
    TOGETHER = "together"


@dataclass(frozen=True)
class MappingGone(AttachEvent):
    """A mapping seen before is no longer in ``/proc/PID/maps`` (munmap, or the process exec'ed)."""

    pid: int
    path: str
    kind: AttachKind
    dev: int
    ino: int
    at: float


@dataclass(frozen=True)
class WatchFinished(AttachEvent):
    """The watched command's end: its exit, how many processes and shares were seen, what could not be seen."""

    command: list[str]
    returncode: int | None
    signal: str | None
    processes: int
    shared: int
    #: the claims polling made (every one possible: what happens between two polls is not seen)
    leaks: int
    seconds: float
    unseen: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class SocketPair(AttachEvent):
    """Two watched processes connected by a Unix socket (sock_diag's peer): the road an fd can travel."""

    a: FdHolder
    b: FdHolder
    type: str
    path: str
    at: float = 0.0
