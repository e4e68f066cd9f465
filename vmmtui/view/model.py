"""``fold(events) -> ScreenState``: what the inspector shows, as data, from the event stream alone.

A state is immutable: ``fold_one(state, event)`` returns a new one that shares every part the
event did not touch (a renderer repaints only the parts that are not the same object). The event
log is the one growing part: every state of one fold shares one append-only ``LogBook`` and holds
how many of its entries it shows, so a state per frame costs no copy of the log. An entry is data
(the event and what its words need: ``LogEntry``); ``words.log`` words it where it is drawn.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from rich.text import Text

from vmmtui.plan.config import SEED_SHAPE
from vmmtui.plan.steps import PRODUCER, base, build_plan, consumer_names, kind, peer_of
from vmmtui.stream.codec import encode
from vmmtui.stream.events import (
    AttachEvent,
    Event,
    FdCheck,
    FdRow,
    FdSnapshot,
    KcmpVerdict,
    Notice,
    ScenarioOutcome,
    SessionClosed,
    SessionFailed,
    SessionFinished,
    SessionStarted,
    StepDone,
    StepStarted,
    WorkerExited,
    WorkerStarted,
)
from vmmtui.stream.failures import Failure
from vmmtui.stream.state import WorkerState
from vmmtui.stream.values import Ack, Verification
from vmmtui.view.display import Display
from vmmtui.view.sharing import evolve

if TYPE_CHECKING:  # the programs' side (and the trace's events) load with the first trace event
    from vmmtui.view.kernel import KernelFact, KernelView
    from vmmtui.view.programs import ProgramsView


#: metadata fields the wire does not print: the handle has its own row, the type is always "alloc"
HIDDEN_METADATA = ("ipc_handle", "export_data", "type", "v")
#: fields shown only where they say something (the pidfd road's pid and fd number)
UNSAID = {"transport": "scm-rights", "pid": 0, "fd": -1}


class Where(StrEnum):
    """Whose event an entry of the log is: how it is worded."""

    #: the demo's session (its workers' steps, the wire, the end)
    SESSION = "session"
    #: a program vmmtui did not start (a trace, a polling, their recordings)
    PROGRAM = "program"
    #: the kernel's record of the demo's own workers (eBPF)
    KERNEL = "kernel"
    #: the app's own (a file that could not be written; a session that could not start)
    APP = "app"


@dataclass(frozen=True)
class Found:
    """The findings so far: good news (shared, imported) and those to look at."""

    good: int
    bad: int


@dataclass(frozen=True)
class KcmpSeen:
    """kcmp's answer on one exported/received pair, the step on show when it came (1-based) and
    whether both fds are still open, as the fd tables, the exits and the session's end say: the
    answer is a fact about now only while they are."""

    verdict: KcmpVerdict
    step: int
    open: bool = True


def kcmp_tense(seen: Iterable[KcmpSeen]) -> tuple[bool, int | None]:
    """(past, step) for the words of several answers: past once any pair has closed, and the step
    they share (None where they came at different steps)."""
    seen = list(seen)
    steps = {s.step for s in seen}
    return any(not s.open for s in seen), (steps.pop() if len(steps) == 1 else None)


#: a part of the status line as a fact: the scenario (its name, then its outcome), the message
#: of a start that failed, the session's end, the verification, the kernel's kcmp verdict, the
#: findings
StatusFact = str | ScenarioOutcome | SessionFinished | Verification | KcmpSeen | Found


@dataclass(frozen=True)
class LogEntry:
    """What one entry of the event log says, as data: the event, and what its words need from
    the fold; ``words.log`` words it when the log draws it or a search reads it (a trace writes
    thousands a second)."""

    where: Where
    event: Event | None = None
    display: Display = field(default_factory=Display, compare=False)
    #: the kernel clock of the trace's first event, and the calling process's name
    t0: int = 0
    comm: str = ""
    #: how many consumers the session had (its end line)
    consumers: int = 0
    #: the kernel's record of a worker's call, as filed under its step; and the workers by pid
    fact: KernelFact | None = None
    roles: dict[int, str] = field(default_factory=dict)
    #: the app's own line (it made it), or why the session could not start
    note: Text | None = None
    start_error: str = ""


@dataclass(frozen=True)
class LogLine:
    """One entry of the event log and the step it belongs to (a click on it shows that step)."""

    entry: LogEntry
    #: how many plan steps had run when it was written (None: before any session)
    steps: int | None
    #: which session of the app wrote it (ctrl+r starts the next): older lines are no step of this one
    era: int = 0
    #: the event (its number in the fold) that wrote it; 0: the app, not an event
    seq: int = 0
    #: its words once made (``words.log.log_text``), kept: an entry is worded once
    said: Any = field(default=None, compare=False, repr=False)


class LogBook:
    """The event log's lines, append-only, shared by every state of one fold. A long trace
    forgets the oldest: ``base`` lines came before ``lines[0]`` (``log_len`` counts them)."""

    def __init__(self, lines: Iterable[LogLine] = (), base: int = 0):
        self.lines: list[LogLine] = list(lines)
        self.base = base

    def __len__(self) -> int:
        return self.base + len(self.lines)

    def forget(self, before: int) -> int:
        """Forget the lines before line ``before``; how many went."""
        drop = min(len(self.lines), before - self.base)
        if drop <= 0:
            return 0
        del self.lines[:drop]
        self.base += drop
        return drop


class PanelState(StrEnum):
    """Where a worker stands, as its panel's head line says it."""

    STARTING = "starting"
    WAITING = "waiting"
    RUNNING = "running"
    FAILED = "failed"
    DONE = "done"
    EXITED = "exited"
    #: the session did not start: this worker never started, or was stopped
    NOT_STARTED = "not started"
    STOPPED = "stopped"


@dataclass(frozen=True)
class PanelView:
    """One worker's panel: who it is, its steps, its mapping card and its fd table."""

    role: str
    pid: int | None = None
    backend: str = ""
    #: where the worker stands (with ``running``, ``failed_at`` and ``ended``: the facts the
    #: panel's head line words, ``words.narration.panel_state``)
    state: PanelState = PanelState.STARTING
    #: the step that failed (``PanelState.FAILED``)
    failed_at: str = ""
    #: how the worker ended, once it has (its words are the panel's: ``words.narration.exit_state``)
    ended: WorkerExited | None = None
    #: step name -> (ok, duration ns)
    results: dict[str, tuple[bool, int]] = field(default_factory=dict)
    #: step name -> its index in the plan
    indices: dict[str, int] = field(default_factory=dict)
    worker_state: WorkerState | None = None
    #: the step it runs now (between StepStarted and StepDone)
    running: str | None = None
    #: the fd table read after the last step (or the latest live read between steps)
    fds: FdSnapshot | None = None
    #: fds that the table before this one did not have (highlighted)
    fresh: frozenset[int] = frozenset()
    #: rows the table before this one had and this one does not (struck through)
    closed: tuple[FdRow, ...] = ()
    #: the kcmp verdict on this worker's fd of an exported/received pair
    kcmp: KcmpVerdict | None = None


@dataclass(frozen=True)
class SizeTold:
    """What the producer claimed and what the kernel or driver reports for what arrived."""

    claimed: int
    reported: int | None
    source: str
    ok: bool


class How(StrEnum):
    """How the memory went over the wire at the last send or receive step."""

    SENT = "sent"  # the producer's fd in an SCM_RIGHTS message
    HANDLE_SENT = "handle-sent"  # legacy IPC: 64 handle bytes in the message, no fd
    PIDFD_SENT = "pidfd-sent"  # the producer's pid and fd number, for pidfd_getfd
    ARRIVED = "arrived"  # a new fd in the consumer
    HANDLE_ARRIVED = "handle-arrived"  # the handle bytes, no new fd
    TAKEN = "taken"  # the consumer took the fd with pidfd_open + pidfd_getfd


@dataclass(frozen=True)
class Flight:
    """The fd (or the handle bytes) on its way: how, to or in which consumer, and the numbers
    (the producer's exported fd, or its pid and fd for pidfd_getfd; the consumer's fd)."""

    how: How
    consumer: str
    fd: int | None = None
    pid: int | None = None


@dataclass(frozen=True)
class Peer:
    """The consumer the producer accepted, as SO_PEERCRED says it, and the intruders refused."""

    name: str
    pid: int | None
    uid: int | None
    refused: int = 0


@dataclass(frozen=True)
class WireView:
    """The wire between the processes: socket, peer, metadata, the fd in flight, the ACKs, kcmp;
    facts, worded where the wire is drawn (``words.narration.wire_*``)."""

    socket_path: str = ""
    listening: bool = False
    peer: Peer | None = None
    peer_pid: int | None = None
    metadata: str = ""
    flight: Flight | None = None
    handle: str = ""
    #: each consumer's verdict, in the order they came (the last is the newest)
    acks: dict[str, Ack | None] = field(default_factory=dict)
    #: kcmp's last answer per consumer, and whether its pair is still open
    kcmps: dict[str, KcmpSeen] = field(default_factory=dict)
    size_told: SizeTold | None = None
    finished: SessionFinished | None = None


@dataclass(frozen=True)
class ScreenState:
    """Everything one screen of the inspector shows."""

    roles: tuple[str, ...] = (PRODUCER, "consumer")
    panels: dict[str, PanelView] = field(default_factory=dict)
    plan: tuple[tuple[str, str], ...] = ()
    mechanism: str = "vmm"
    #: how the fd travels: "scm-rights" or "pidfd" (the consumer takes it with pidfd_getfd)
    transport: str = "scm-rights"
    backend: str = ""
    reason: str = ""
    direction: str = "producer-writes"
    scenario: str | None = None
    started: bool = False
    wire: WireView = field(default_factory=WireView)
    verification: Verification | None = None
    #: the status line's parts, in the order they first appeared, as facts (worded where drawn:
    #: ``words.status``)
    status: dict[str, StatusFact] = field(default_factory=dict)
    #: how many steps of the plan have run (started or done)
    steps: int = 0
    failure: tuple[str, str, Failure] | None = None
    #: a worker that died on its own (not at the close)
    crash: WorkerExited | None = None
    finished: SessionFinished | None = None
    outcome: ScenarioOutcome | None = None
    closed: SessionClosed | None = None
    #: why the session could not start (no event says it: the app notes it)
    start_error: str | None = None
    #: the consumer whose tab is in front (several consumers)
    front: str | None = None
    #: kcmp wording last logged per consumer (the 4 Hz refresh repeats it: told once per change)
    kcmp_told: dict[str, tuple[int, int, bool | None, str]] = field(default_factory=dict)
    era: int = 0
    log: LogBook = field(default_factory=LogBook, compare=False, repr=False)
    log_len: int = 0
    #: programs vmmtui did not start (a trace, a polling, their recordings): one view per pid,
    #: the wire of every transfer and the verdicts; None for the demo's own session
    programs: ProgramsView | None = None
    #: the kernel's own record of the demo's workers (eBPF), by plan step; None where the session
    #: carries none (no eBPF here, --no-kernel, a recording made without it)
    kernel: KernelView | None = None
    #: events folded (a log line remembers the one that wrote it: a fold forward from a snapshot
    #: reuses the lines it would write again)
    seq: int = 0

    # -- made from the options, before any event ---------------------------------------------------
    @classmethod
    def for_programs(cls) -> ScreenState:
        """The state before any event of a trace (or a polling): no roles, no plan."""
        from vmmtui.view.programs import ProgramsView

        return cls(roles=(), panels={}, programs=ProgramsView())

    @classmethod
    def blank(
        cls,
        consumers: int = 1,
        scenario: str | None = None,
        mechanism: str = "vmm",
        direction: str = "producer-writes",
        after: ScreenState | None = None,
    ) -> ScreenState:
        """The state before any event; ``after``: the last session's, whose log it keeps (ctrl+r)."""
        names = consumer_names(consumers)
        roles = (PRODUCER, *names)
        plan = tuple(build_plan(mechanism, consumers, direction))
        state = cls(
            roles=roles,
            panels={r: PanelView(r) for r in roles},
            plan=plan,
            mechanism=mechanism,
            direction=direction,
            scenario=scenario,
            status={"scenario": scenario} if scenario else {},
        )
        if after is not None:
            state = replace(
                state,
                era=after.era + 1,
                log=LogBook(after.log_lines(), after.log.base),
                log_len=after.log_len,
            )
        return state

    # -- derived -----------------------------------------------------------------------------------
    @property
    def next_step(self) -> tuple[str, str] | None:
        """(role, step) that runs next; None once the plan has stopped."""
        if (
            self.failure is not None
            or self.closed is not None
            or self.start_error is not None
            or self.steps >= len(self.plan)
        ):
            return None
        return self.plan[self.steps]

    @property
    def done(self) -> bool:
        """The plan ran to its end."""
        return bool(self.plan) and self.steps >= len(self.plan) and self.failure is None

    @property
    def subtitle(self) -> str:
        if self.start_error is not None:
            return "could not start"
        text = self.reason
        if (self.mechanism, len(self.roles) - 1, self.direction) != SEED_SHAPE:
            text += f" · {self.mechanism} · {len(self.roles) - 1} consumer(s) · {self.direction}"
        if self.scenario:
            text += f" · scenario {self.scenario}"
        return text

    def log_lines(self) -> list[LogLine]:
        return self.log.lines[: max(0, self.log_len - self.log.base)]

    def panel(self, role: str) -> PanelView:
        return self.panels.get(role) or PanelView(role)

    def kernel_facts(self) -> tuple[KernelFact, ...]:
        """What the kernel recorded in the last step that ran (or runs now), in its order."""
        if self.kernel is None or self.steps <= 0:
            return ()
        return self.kernel.at(self.steps - 1)

    # -- what the app adds that no event says ------------------------------------------------------
    def noted(self, text: Text) -> ScreenState:
        """One more line in the log (a file that could not be written, say)."""
        return _log(self, LogEntry(Where.APP, note=text), seq=0)

    def running(self, role: str, step: str) -> ScreenState:
        """``role`` runs ``step`` now (before its StepStarted arrives)."""
        p = self.panel(role)
        return _panel(self, replace(p, running=step, state=PanelState.RUNNING))

    def could_not_start(self, message: str) -> ScreenState:
        panels = {
            r: replace(
                p,
                state=PanelState.NOT_STARTED if p.pid is None else PanelState.STOPPED,
                running=None,
            )
            for r, p in self.panels.items()
        }
        state = replace(
            self,
            start_error=message,
            panels=panels,
            status={**self.status, "error": message},
        )
        return _log(state, LogEntry(Where.APP, start_error=message), seq=0)


def fold(
    events: Iterable[Event],
    state: ScreenState | None = None,
    display: Display | None = None,
    closing_from: int | None = None,
) -> ScreenState:
    """The state after ``events``, from ``state`` (a blank one by default).

    ``closing_from``: the index (in ``events``) where the session's close begins: exits from there
    on are the close's, not crashes.
    """
    state = state or ScreenState.blank()
    d = display or Display()
    for i, e in enumerate(events):
        state = fold_one(state, e, d, closing=closing_from is not None and i >= closing_from)
    return state


# -- the fold ---------------------------------------------------------------------------------------
def fold_one(
    state: ScreenState, e: Event, d: Display | None = None, closing: bool = False
) -> ScreenState:
    """The state after one more event."""
    d = d or Display()
    if isinstance(e, AttachEvent):
        if state.programs is None and state.started:  # the kernel's record of our own workers
            return _kernel(state, e, d)
        return _program(state, e, d)
    state = evolve(state, seq=state.seq + 1)
    match e:
        case SessionStarted():
            return _started(state, e, d)
        case WorkerStarted():
            p = state.panel(e.role)
            state = _panel(
                state, replace(p, pid=e.pid, backend=e.backend, state=PanelState.WAITING)
            )
            return _log(state, _said(e, d))
        case StepStarted():
            if e.index >= 0:
                state = replace(state, steps=max(state.steps, e.index + 1))
            p = state.panel(e.role)
            return _panel(state, replace(p, running=e.step, state=PanelState.RUNNING))
        case StepDone():
            return _step_done(state, e, d)
        case FdSnapshot():
            return _fds(state, e)
        case KcmpVerdict():
            return _kcmp(state, e)
        case WorkerExited():
            p = state.panel(e.role)
            state = _panel(state, replace(p, state=PanelState.EXITED, ended=e, running=None))
            state = _kcmp_closed(state, lambda v: e.role in (PRODUCER, v.consumer))
            if not e.expected and not closing and state.crash is None:
                state = replace(state, crash=e)
            return _log(state, _said(e, d))
        case SessionFailed():
            state = _failed_after_done(replace(state, failure=(e.role, e.step, e.failure)), e)
            return _log(state, _said(e, d))
        case SessionFinished():
            # the plan ran through every cleanup step, none of which left an fd open
            state = _kcmp_closed(state, lambda v: True)
            state = replace(
                state,
                finished=e,
                wire=replace(state.wire, finished=e),
                status={**state.status, "done": e},
            )
            return _log(state, LogEntry(Where.SESSION, e, d, consumers=len(state.roles) - 1))
        case SessionClosed():
            return _log(replace(state, closed=e), _said(e, d))
        case Notice():
            return _log(state, _said(e, d))
        case ScenarioOutcome():
            status = {k: v for k, v in state.status.items() if k != "scenario"}
            state = replace(
                state,
                outcome=e,
                scenario=state.scenario or e.name,
                status={**status, "scenario": e},  # the verdict reads last
            )
            return _log(state, _said(e, d))
    return state


def _failed_after_done(state: ScreenState, e: SessionFailed) -> ScreenState:
    """A failure found after its step said done (an fd still open after the cleanup): the step is
    ✗, not ✓, and each fd the failure names is marked leaked, not ✓."""
    p = state.panels.get(e.role)
    if p is None or e.step not in p.results:
        return state
    ns = p.results[e.step][1]
    p = replace(
        p,
        results={**p.results, e.step: (False, ns)},
        state=PanelState.FAILED,
        failed_at=e.step,
    )
    leaked = set(e.failure.fds) if e.failure.code == "FD_LEAK" else set()
    if leaked and p.fds is not None:
        rows = [replace(r, check=FdCheck.LEAKED) if r.fd in leaked else r for r in p.fds.rows]
        p = replace(p, fds=replace(p.fds, rows=rows))
    return _panel(state, p)


def _started(state: ScreenState, e: SessionStarted, d: Display) -> ScreenState:
    roles = (PRODUCER, *e.consumers)
    state = replace(
        state,
        roles=roles,
        panels={r: state.panels.get(r) or PanelView(r) for r in roles},
        plan=tuple((role, step) for role, step in e.plan),
        mechanism=e.mechanism,
        transport=e.transport,
        backend=e.backend,
        reason=e.reason,
        direction=e.direction,
        started=True,
        steps=0,
        wire=replace(state.wire, socket_path=e.socket_path),
    )
    return _log(state, _said(e, d), steps=0)


def _step_done(state: ScreenState, e: StepDone, d: Display) -> ScreenState:
    r, s = e.report, e.report.state
    if e.index >= 0:
        state = replace(state, steps=max(state.steps, e.index + 1))
    p = state.panel(r.role)
    state = _panel(
        state,
        replace(
            p,
            results={**p.results, r.step: (r.ok, r.duration_ns)},
            indices={**p.indices, r.step: e.index},
            worker_state=s,
            running=None,
            state=(
                (PanelState.DONE if r.step == "cleanup" else PanelState.WAITING)
                if r.ok
                else PanelState.FAILED
            ),
            failed_at="" if r.ok else r.step,
        ),
    )
    state = replace(state, wire=_wire(state.wire, e))
    if base(r.step) == "verify" and s.verification is not None:
        state = replace(
            state,
            verification=s.verification,
            status={**state.status, "verify": s.verification},
        )
    if kind(r.role) != PRODUCER and r.role in state.roles and len(state.roles) > 2:
        state = replace(state, front=r.role)
    nxt = state.next_step
    if nxt is not None and kind(nxt[0]) != PRODUCER and len(state.roles) > 2:
        state = replace(state, front=nxt[0])
    return _log(state, _said(e, d)) if r.calls or r.log else state


def _wire(w: WireView, e: StepDone) -> WireView:
    r, s = e.report, e.report.state
    if kind(r.role) == "consumer" and base(r.step) == "import" and s.size_source:
        w = replace(w, size_told=SizeTold(s.size_claimed, s.size_reported, s.size_source, r.ok))
    if not r.ok:
        return w
    role, step, peer = kind(r.role), base(r.step), peer_of(r.step)
    if (role, step) == ("producer", "listen"):
        return replace(w, listening=True)
    if (role, step) == ("producer", "accept"):
        p = s.peers.get(peer)
        pid, uid = (p.pid, p.uid) if p else (None, None)
        return replace(w, peer=Peer(peer, pid, uid, len(s.refused)), peer_pid=pid)
    if (role, step) == ("producer", "send"):
        sent = encode(s.sent) if s.sent is not None else {}
        meta = {
            k: v
            for k, v in sent.items()
            if k not in HIDDEN_METADATA and (k not in UNSAID or v != UNSAID[k])
        }
        w = replace(w, metadata=json.dumps(meta) if meta else "")
        if s.sent is not None and s.sent.export_data:
            w = replace(w, handle=s.sent.export_data)
        if s.mapping.ipc_handle:
            return replace(w, handle=s.mapping.ipc_handle, flight=Flight(How.HANDLE_SENT, peer))
        if s.sent is not None and s.sent.transport == "pidfd":
            return replace(w, flight=Flight(How.PIDFD_SENT, peer, s.sent.fd, s.sent.pid))
        return replace(w, flight=Flight(How.SENT, peer, s.exported_fd))
    if (role, step) == ("consumer", "receive"):
        taken = s.received is not None and s.received.transport == "pidfd"
        how = How.HANDLE_ARRIVED if s.mapping.ipc_handle else How.TAKEN if taken else How.ARRIVED
        return replace(w, flight=Flight(how, r.role, s.received_fd))
    if (role, step) == ("producer", "wait_ack"):
        acks = {k: v for k, v in w.acks.items() if k != peer}  # the newest last
        return replace(w, acks={**acks, peer: s.acks.get(peer)})
    if (role, step) == ("producer", "cleanup"):
        return replace(w, listening=False)
    return w


def _fds(state: ScreenState, e: FdSnapshot) -> ScreenState:
    p = state.panel(e.role)
    now = {r.fd for r in e.rows}
    fresh: frozenset[int]
    closed: tuple[FdRow, ...]
    if p.fds is None or p.fds.error or e.error:
        fresh, closed = frozenset(), ()
    elif now == {
        r.fd for r in p.fds.rows
    }:  # a read with nothing new keeps what the last one marked
        fresh, closed = p.fresh, p.closed
    else:
        before = {r.fd for r in p.fds.rows}
        fresh = frozenset(now - before)
        closed = tuple(r for r in p.fds.rows if r.fd not in now)
    state = _panel(state, replace(p, fds=e, fresh=fresh, closed=closed))
    if e.error:  # the table could not be read: nothing known of the pair
        return state
    reused = {r.fd for r in e.closed if r.check == FdCheck.REUSED}
    gone = lambda fd: fd not in now or fd in reused  # noqa: E731
    if e.role == PRODUCER:
        return _kcmp_closed(state, lambda v: v.producer_pid == e.pid and gone(v.producer_fd))
    return _kcmp_closed(
        state, lambda v: v.consumer == e.role and v.consumer_pid == e.pid and gone(v.consumer_fd)
    )


def _kcmp_closed(state: ScreenState, closed: Callable[[KcmpVerdict], bool]) -> ScreenState:
    """Each kcmp answer whose pair ``closed`` says has an fd closed now is one about the past."""
    kcmps = state.wire.kcmps
    shut = {c: replace(s, open=False) for c, s in kcmps.items() if s.open and closed(s.verdict)}
    if not shut:
        return state
    status = state.status
    fact = status.get("kcmp")
    if isinstance(fact, KcmpSeen) and fact.verdict.consumer in shut:
        status = {**status, "kcmp": shut[fact.verdict.consumer]}
    return replace(state, wire=replace(state.wire, kcmps={**kcmps, **shut}), status=status)


def _kcmp(state: ScreenState, e: KcmpVerdict) -> ScreenState:
    for role in (PRODUCER, e.consumer):
        if role in state.panels:
            state = _panel(state, replace(state.panel(role), kcmp=e))
    seen = KcmpSeen(e, state.steps)
    state = replace(
        state,
        wire=replace(state.wire, kcmps={**state.wire.kcmps, e.consumer: seen}),
        status={**state.status, "kcmp": seen},
    )
    told = (e.producer_fd, e.consumer_fd, e.same, e.detail)  # what the log's entry would say
    if state.kcmp_told.get(e.consumer) == told:
        return state
    state = replace(state, kcmp_told={**state.kcmp_told, e.consumer: told})
    return _log(state, _said(e, Display()))


#: the trace's events and fold, once a trace event is folded
_TRACE: dict = {}


def _program(state: ScreenState, e: AttachEvent, d: Display) -> ScreenState:
    """A trace's or a polling's event: its process views, wire and verdicts, and its log entry."""
    if not _TRACE:  # imported at the first trace event: the demo starts faster without them
        from vmmtui.stream import observed as events
        from vmmtui.view import programs

        _TRACE.update(events=events, programs=programs)
    ev, programs = _TRACE["events"], _TRACE["programs"]
    before = state.programs or programs.ProgramsView()
    v = programs.fold_program_event(before, e)
    state = evolve(state, programs=v, seq=state.seq + 1)
    if isinstance(e, ev.TraceCall):
        if v.calls_len == before.calls_len:
            return state  # a call of no interest (a close of an fd never shared): no line
        entry = LogEntry(Where.PROGRAM, e, d, t0=v.ktime0, comm=v.proc(e.pid).comm)
        return _log(state, entry, steps=v.calls_len)
    entry = LogEntry(Where.PROGRAM, e, d, t0=v.ktime0)
    if v.findings_len != before.findings_len:  # a finding: the ledger's, or polling's leak
        bad, quiet = v.bad_findings, v.quiet_findings
        found = Found(v.findings_len - bad - quiet, len(v.problems))  # problems by relation
        state = evolve(state, status={**state.status, "findings": found})
    return _log(state, entry, steps=v.calls_len)


def _kernel(state: ScreenState, e: AttachEvent, d: Display) -> ScreenState:
    """A call the kernel recorded in a worker (eBPF): filed under the step that ran, one log line."""
    from vmmtui.stream.observed import TraceFinished, TraceStarted
    from vmmtui.view.kernel import OUTSIDE, fold_kernel

    state = evolve(state, seq=state.seq + 1)
    roles = {p.pid: r for r, p in state.panels.items() if p.pid is not None}
    running = any(p.running for p in state.panels.values())
    step = state.steps - 1 if running and state.steps > 0 else OUTSIDE
    view, fact = fold_kernel(state.kernel, e, roles, step)
    state = evolve(state, kernel=view)
    if fact is None and not isinstance(e, TraceStarted | TraceFinished):
        return state
    return _log(state, LogEntry(Where.KERNEL, e, d, fact=fact, roles=roles))


# -- helpers ----------------------------------------------------------------------------------------
def _panel(state: ScreenState, p: PanelView) -> ScreenState:
    return replace(state, panels={**state.panels, p.role: p})


def _said(e: Event, d: Display) -> LogEntry:
    return LogEntry(Where.SESSION, e, d)


def _log(
    state: ScreenState, entry: LogEntry, steps: int | None = None, seq: int | None = None
) -> ScreenState:
    """The state with ``entry`` appended to its log (a state off the book's tip gets its own copy)."""
    seq = state.seq if seq is None else seq
    book = state.log
    n = state.log_len
    if n != len(book):
        at = n - book.base
        if seq and 0 <= at < len(book.lines) and book.lines[at].seq == seq:
            return evolve(state, log_len=n + 1)  # folded again: the same entry
        book = LogBook(book.lines[: max(0, at)], book.base)
    tag = steps if steps is not None else (state.steps if state.started else None)
    book.lines.append(LogLine(entry, tag, state.era, seq))
    return evolve(state, log=book, log_len=len(book))
