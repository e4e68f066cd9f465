"""The kernel's record of the demo's own workers, folded into the step it happened in. No words.

A session that runs where eBPF does carries the trace's events for its workers' pids
(``vmmtui.session.kernel``). Each call becomes a ``KernelFact`` of the plan step that was running
when it came (the session drains the record before each step's ``StepDone``), and an fd that
arrived (``recvmsg``, ``pidfd_getfd``) names where its struct file came from, only where the
kernel's own file identity says it is the same one: never from fd numbers.

A receive is matched to its send as the world matches every trace's (``model.matching``): the
oldest send of the same struct file queued on the socket it was received from. Not by the file
alone: the kernel reuses a freed file's address, and one open file may go over two sockets at
once, so "the last place this file was seen" can name the wrong sender.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from vmmtui.model.matching import SendQueue
from vmmtui.stream.events import Event
from vmmtui.stream.observed import (
    CallRefused,
    CudaCall,
    FdCloseCall,
    FdDuplicated,
    FdsDropped,
    FdsReceived,
    FdsSent,
    FdTaken,
    MemfdCreated,
    MemoryMapped,
    MemoryUnmapped,
    PidfdOpened,
    ProcessForked,
    QueuedAtRelease,
    TraceCall,
    TraceEvent,
    TraceFinished,
    TraceLost,
    TraceStarted,
)

#: the step a fact outside any step (the start, the close) is filed under
OUTSIDE = -1


@dataclass(frozen=True)
class Source:
    """Where a struct file was before: ``role``'s ``fd``, as its ``call`` showed it."""

    role: str
    pid: int
    fd: int
    call: str


@dataclass(frozen=True)
class KernelFact:
    """One event of the kernel's record, in a worker (``role``; "" for a process not a worker's)."""

    role: str
    event: TraceEvent
    #: an fd that arrived: for each fd of the event, where the same struct file was (None: unseen)
    sources: tuple[Source | None, ...] = ()
    #: the driver's and the runtime's own churn, not the session's: a mapping of no memory the
    #: workers share (the driver maps its own device files, ``/dev/nvidia*``, and moves those
    #: mappings by the dozen), a close of a file the session never made, sent or received (the
    #: driver's start-up opens and closes dozens), a helper process a worker's libraries run
    #: (``ldconfig -p``); the log keeps them, a step's line leaves them out and counts them
    plumbing: bool = False


@dataclass(frozen=True)
class KernelView:
    """What the kernel recorded of the workers, by plan step."""

    started: TraceStarted | None = None
    finished: TraceFinished | None = None
    #: each plan step's facts in the kernel's order (``OUTSIDE``: the start and the close)
    steps: dict[int, tuple[KernelFact, ...]] = field(default_factory=dict)
    #: where each struct file (the trace's file key) was last made, sent or taken: how a taken
    #: fd's source came (``pidfd_getfd`` names its target fd itself)
    files: dict[str, Source] = field(default_factory=dict)
    #: sends not yet received, by the socket pair and file that carry them (``model.matching``)
    in_flight: SendQueue[Source] = field(default_factory=SendQueue)
    lost: int = 0
    #: each worker's mapped ranges of memory it shares (a memfd, a /dev/shm file, a file it made,
    #: sent or received): an unmap that touches one is telling, any other is the driver's own
    shared_maps: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict)
    #: each worker's fds of the session: made (memfd_create, an export, a dup), sent, received or
    #: taken, until closed; a close of any other fd is the driver's or the runtime's own
    own_fds: dict[int, frozenset[int]] = field(default_factory=dict)

    def at(self, index: int) -> tuple[KernelFact, ...]:
        return self.steps.get(index, ())


def fold_kernel(
    view: KernelView | None, e: Event, roles: dict[int, str], step: int
) -> tuple[KernelView, KernelFact | None]:
    """The view after ``e`` (``roles``: each worker's pid; ``step``: the plan step running, or
    ``OUTSIDE``), and the fact it added (None for the record's start and end)."""
    view = view or KernelView()
    if isinstance(e, TraceStarted):
        return replace(view, started=e), None
    if isinstance(e, TraceFinished):
        return replace(view, finished=e), None
    if not isinstance(e, TraceCall | CallRefused | TraceLost):
        return view, None
    pid = getattr(e, "pid", 0)
    role = roles.get(pid, "")
    files = dict(view.files)
    in_flight = view.in_flight
    sources: tuple[Source | None, ...] = ()
    if isinstance(e, FdsReceived):
        in_flight = in_flight.copy()
        sources = tuple(in_flight.received(e.sock, f) if f else None for f in e.files)
        for fd, f in zip(e.fds, e.files, strict=False):
            if f:
                files[f] = Source(role, pid, fd, e.call)
    elif isinstance(e, FdsDropped | QueuedAtRelease):  # freed unreceived: no longer in flight
        in_flight = in_flight.copy()
        for f in e.files:
            if isinstance(e, FdsDropped):
                in_flight.received(e.sock, f)
            else:
                in_flight.released(e.sender, e.socket_file, f)
    elif isinstance(e, FdTaken):
        if e.fd >= 0:
            src = files.get(e.file) if e.file else None
            sources = (src if src is not None and src.pid == e.target else None,)
            if e.file:
                files[e.file] = Source(role, pid, e.fd, "pidfd_getfd")
    elif isinstance(e, FdsSent) and e.result >= 0:
        in_flight = in_flight.copy()
        for fd, f in zip(e.fds, e.files, strict=False):
            if f:
                files[f] = Source(role, pid, fd, e.call)
                in_flight.sent(e.sock, f, files[f])
    elif isinstance(e, MemfdCreated | FdDuplicated) and e.fd >= 0 and e.file:
        call = "memfd_create" if isinstance(e, MemfdCreated) else e.call
        files[e.file] = Source(role, pid, e.fd, call)
    elif isinstance(e, CudaCall) and e.fd >= 0 and e.file:  # an export's or an import's fd
        files.setdefault(e.file, Source(role, pid, e.fd, e.func))
    own_fds, session_fd = _own_fds(view.own_fds, e, files)
    #: a helper process (not a worker) is the runtime's unless it does what shares memory
    plumbing = (not role and not isinstance(e, _SHARING)) or (
        isinstance(e, ProcessForked) and e.child not in roles
    )
    plumbing = plumbing or (isinstance(e, FdCloseCall) and not session_fd)
    shared_maps = view.shared_maps
    if isinstance(e, MemoryMapped) and e.result >= 0:
        if e.file in files or e.kind.startswith(("memfd:", "/dev/shm/")):
            ranges = (*shared_maps.get(pid, ()), (e.addr, e.addr + e.length))
            shared_maps = {**shared_maps, pid: ranges}
        else:
            plumbing = True
    elif isinstance(e, MemoryUnmapped):
        ranges = shared_maps.get(pid, ())
        touched = [r for r in ranges if r[0] < e.addr + e.length and e.addr < r[1]]
        if touched:
            shared_maps = {**shared_maps, pid: tuple(r for r in ranges if r not in touched)}
        else:
            plumbing = True
    fact = KernelFact(role, e, sources, plumbing)
    lost = view.lost + (e.count if isinstance(e, TraceLost) else 0)
    steps = {**view.steps, step: (*view.at(step), fact)}
    view = replace(view, steps=steps, files=files, in_flight=in_flight, lost=lost)
    return replace(view, shared_maps=shared_maps, own_fds=own_fds), fact


#: what a process that is not a worker may do that is the session's: share, take, refuse, map
_SHARING = (
    FdsSent,
    FdsReceived,
    FdTaken,
    PidfdOpened,
    MemfdCreated,
    CudaCall,
    CallRefused,
    TraceLost,
)


def _own_fds(
    own: dict[int, frozenset[int]], e: Event, files: dict[str, Source]
) -> tuple[dict[int, frozenset[int]], bool]:
    """The session's fds of each process after ``e``, and whether ``e`` is a close of one (by its
    number while the session holds it, or by the struct file the session made, sent or got)."""
    pid = getattr(e, "pid", 0)
    mine = own.get(pid, frozenset())
    new: frozenset[int] = frozenset()
    if isinstance(e, FdsSent | FdsReceived):
        new = frozenset(e.fds)
    elif isinstance(e, MemfdCreated | FdDuplicated | FdTaken | PidfdOpened | CudaCall):
        new = frozenset([e.fd]) if e.fd >= 0 else frozenset()
    if isinstance(e, FdCloseCall):
        closed = {e.fd} if e.last < 0 else {fd for fd in mine if e.fd <= fd <= e.last}
        session = bool(closed & mine) or (bool(e.file) and e.file in files)
        return {**own, pid: mine - closed}, session
    if not new - mine:
        return own, False
    return {**own, pid: mine | new}, False
