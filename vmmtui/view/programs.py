"""Programs vmmtui did not start, as the inspector shows them: one view per process, the wire of
every transfer between them, and the verdicts, folded from the trace's events (eBPF) or the
polling's (``ProcessSeen``, ``FdOpened``, ``SharedFile``…). No Textual, no /proc, no ledger: the
verdicts are the ``LedgerFinding`` and ``Leak`` events of the stream itself, so a live trace and
the replay of its recording fold to the same screen.

A ``ProgramsView`` is immutable, as every ``ScreenState`` is: an event replaces only the process
it is about. What only grows (calls, transfers, findings) lives in ``Book`` s shared by every state
of one fold; a state holds how many entries of each it shows, so a state per frame copies none,
and a fold forward from an earlier snapshot reuses the entries it would write again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vmmtui.model.ends import End
from vmmtui.model.findings import GOOD, Proof, Weight, proof_of
from vmmtui.model.interest import closed_by, matters
from vmmtui.model.matching import SendQueue
from vmmtui.model.policy import quiet_file, relation_of, weigh, weight
from vmmtui.stream.events import (
    AttachEvent,
    Event,
    FdClosed,
    FdOpened,
    GpuMemory,
    Leak,
    MappingSeen,
    ProcessGone,
    ProcessSeen,
    ProcessUnreadable,
    SharedFile,
    WatchFinished,
)
from vmmtui.stream.gpu import GpuTable
from vmmtui.stream.names import shown
from vmmtui.stream.observed import (
    CallRefused,
    CudaCall,
    FdCloseCall,
    FdDuplicated,
    FdsDropped,
    FdsReceived,
    FdsSent,
    FdTaken,
    LedgerFinding,
    MemfdCreated,
    MemoryMapped,
    MemoryUnmapped,
    PidfdOpened,
    PinnedBytes,
    ProcessExec,
    ProcessExit,
    ProcessForked,
    ProcessIdentity,
    QueuedAtRelease,
    SocketEnd,
    TraceCall,
    TraceFinished,
    TraceLost,
    TraceStarted,
    base_name,
)
from vmmtui.view.book import Book
from vmmtui.view.pinned import CAME_VIA, after_death_key, at_attach, carries_memory
from vmmtui.view.sharing import evolve


#: how something travelled: the Unix socket (the kernel's view of it; worded where it is drawn),
#: or the name of the call or road
@dataclass(frozen=True)
class ThroughPidfd:
    """Taken with pidfd_getfd through this pidfd of the taker."""

    pidfd: int


@dataclass(frozen=True)
class HandleBytes:
    """No fd: the 64 bytes of an IPC handle or of a pool pointer's export data (their hex)."""

    ipc: str


#: how something travelled: the socket it went over, the pidfd it was taken through, the bytes
#: that named it, or the name of the call (``fork``, ``dup2``, an export)
Via = str | SocketEnd | ThroughPidfd | HandleBytes


#: closed fds a process view keeps (struck through) after they close
CLOSED_KEPT = 6


@dataclass(frozen=True)
class CallRow:
    """One call a process made, as its panel lists it."""

    seq: int
    pid: int
    #: seconds since the trace began
    t: float
    #: the call (``sendmsg``, ``cuMemCreate``…) and the event that says what it did (worded where
    #: it is drawn)
    name: str
    event: TraceCall = field(compare=False, repr=False)
    failed: bool = False
    duration_ns: int = 0


@dataclass(frozen=True)
class FdView:
    """An fd of interest: how it came to the process, the open file it names, and the proof."""

    fd: int
    #: created | exported | received | taken | dup | inherited | present | opened | arrived | unknown
    how: str
    #: what it is (``memfd:x``, ``/dev/nvidia-uvm``, ``socket``…) where known
    target: str = ""
    #: the kernel's id of the open file (a keyed hash of its ``struct file *``)
    file: str = ""
    #: where it came from: (pid, fd); (0, -1) when none or not traced
    source: tuple[int, int] = (0, -1)
    #: the route: the socket it came over (``SocketEnd``), or the call that made or took it
    via: Via = ""
    #: how the sameness is known: "struct file" (eBPF), "kcmp" (polling), ""
    proof: str = ""
    since: int = 0
    closed_at: int | None = None
    #: the process whose memory this fd pins: the world said the file came from it (its
    #: ``shared`` finding), to this fd or to the one it is a dup of; 0 none said
    came_from: int = 0

    @property
    def pins(self) -> int:
        """The process whose memory this open fd pins (0: none said): the one received or
        taken and every dup of it alike (dup(2): "the two file descriptors refer to the same
        open file description"; a memfd, /dev/shm file or dma-buf lives until the last fd and
        mapping go). Whence it came is the world's word (``model.pins``), not this view's."""
        return self.came_from if self.closed_at is None and carries_memory(self.target) else 0


@dataclass(frozen=True)
class MemView:
    """An allocation, pool, mapping or import of one process; ``of``: (exporter pid, its handle or
    pointer) for an import."""

    kind: str
    key: int
    size: int = 0
    device: int = -1
    address: int = 0
    handle: int = 0
    fd: int = -1
    file: str = ""
    of: tuple[int, int] | None = None
    since: int = 0
    released_at: int | None = None
    #: the exported fds (allocations and pools)
    exported: tuple[int, ...] = ()
    ipc: str = ""


@dataclass(frozen=True)
class ProcView:
    """One process of the trace, keyed by pid (``role``: the demo's name for it, if any)."""

    pid: int
    comm: str = ""
    exe: str = ""
    role: str = ""
    ppid: int = 0
    uid: int | None = None
    alive: bool = True
    #: how it ended (None: running, or the end was not seen)
    end: End | None = None
    gone_at: int | None = None
    #: how many calls of its book (``ProgramsView.call_books[pid]``) this state shows
    ncalls: int = 0
    fds: dict[int, FdView] = field(default_factory=dict)
    closed: tuple[FdView, ...] = ()
    #: closed fds older than the CLOSED_KEPT kept: counted, said on the panel
    closed_dropped: int = 0
    mems: dict[tuple[str, int], MemView] = field(default_factory=dict)
    #: NVML's bytes per device (polling)
    gpu_used: dict[int, int] = field(default_factory=dict)
    #: who it is: container ("" none found), pod uid, pid in its own namespace, GPU UUIDs (NVML)
    container: str = ""
    pod: str = ""
    inner_pid: int | None = None
    gpu_uuids: dict[int, str] = field(default_factory=dict)
    first: int = 0
    findings: int = 0
    #: the bytes its exported memory pins, (ns of the trace, bytes), one point per change
    #: (bounded: ``model.handles.SERIES_POINTS``)
    pinned: tuple[tuple[int, int], ...] = ()

    @property
    def name(self) -> str:
        return f"{shown(self.comm, 16) or '?'}[{self.pid}]"

    @property
    def interesting(self) -> bool:
        """Worth a panel: it holds or held an fd of interest, memory, or has a finding."""
        return bool(self.fds or self.closed or self.mems or self.findings or self.gpu_used)


@dataclass(frozen=True)
class TransferView:
    """One thing that went from one process to another."""

    #: SCM_RIGHTS | pidfd_getfd | IPC handle | pool export data | kcmp
    how: str
    from_pid: int
    from_fd: int
    to_pid: int
    to_fd: int
    via: Via = ""
    file: str = ""
    seq: int = 0
    t: float = 0.0
    #: milliseconds between send and receive (SCM_RIGHTS)
    latency_ms: float | None = None


@dataclass(frozen=True)
class FindingView:
    """A finding as the screen lists it; ``of``: the event that says it, worded where it is
    drawn (``words.findings.words_of``)."""

    kind: str
    pid: int
    of: LedgerFinding | Leak | ProcessUnreadable
    peer: int = 0
    seq: int = 0
    #: what matched the two sides (``Proof``), for a share or an import
    proof: str = ""
    #: the road it took and the handle type at each end (``model.roads``), for a share or import
    road: str = ""
    exported_as: str = ""
    imported_as: str = ""

    @property
    def good(self) -> bool:
        return self.kind in GOOD

    @property
    def weight(self) -> Weight:
        """Good news, a problem to look at, or a quiet fact (``model.policy``, of the finding)."""
        return weigh(self.of) if hasattr(self.of, "kind") else weight(self.kind)


@dataclass(frozen=True)
class Pending:
    pid: int
    fd: int
    seq: int
    ktime: int
    via: Via


@dataclass(frozen=True)
class ProgramsView:
    """Every process of the trace, the wire between them and the verdicts, at one frame."""

    #: "ebpf" or "polling"
    mode: str = ""
    command: tuple[str, ...] = ()
    targets: tuple[int, ...] = ()
    everything: bool = False
    reason: str = ""
    unprobed: tuple[str, ...] = ()
    procs: dict[int, ProcView] = field(default_factory=dict)
    #: each process's calls (shared, append-only; a process view holds how many it shows)
    call_books: dict[int, Book[CallRow]] = field(default_factory=dict, compare=False, repr=False)
    #: calls folded, every process's
    calls_len: int = 0
    transfers: Book[TransferView] = field(default_factory=Book, compare=False, repr=False)
    transfers_len: int = 0
    findings: Book[FindingView] = field(default_factory=Book, compare=False, repr=False)
    findings_len: int = 0
    #: findings to look at (problems, unknowns): neither good news nor a quiet fact
    bad_findings: int = 0
    #: the problems they are, one per relation (``model.policy.Relation``)
    problems: frozenset = frozenset()
    #: the quiet facts (a received socket or pipe held until exit), and by the kind of file
    quiet_findings: int = 0
    quiet_by: dict[str, int] = field(default_factory=dict)
    #: the good findings by what proves them (``Proof``): the verdicts' header, without a walk
    proven_by: dict[str, int] = field(default_factory=dict)
    #: the good findings by the road they took (``model.roads.Road``; "" not seen)
    roads: dict[str, int] = field(default_factory=dict)
    #: sends not yet received, by the socket pair and file that carry them (``model.matching``)
    in_flight: SendQueue[Pending] = field(default_factory=SendQueue)
    pidfds: dict[tuple[int, int], int] = field(default_factory=dict)
    #: the holds after an exporter died that the world said are over (its
    #: ``released-after-exporter-died``), by ``after_death_key``: the held finding is then
    #: said in the past
    ended: dict[tuple[int, int, int, str, str, int, int], LedgerFinding] = field(
        default_factory=dict
    )
    ktime0: int = 0
    lost: int = 0
    #: memory found held at attach (``pinned.at_attach``)
    held_at_attach: frozenset[tuple[int, int, int]] = frozenset()
    #: events folded (the sequence number of the next)
    seq: int = 0
    finished: Event | None = None
    gpu: GpuTable | None = None  # the GPU ledger as of the newest NVML reading (its GPU panel)

    def calls_of(self, pid: int, last: int = 0) -> list[CallRow]:
        """The calls ``pid`` made up to this frame (the ``last`` newest of them, when given)."""
        book = self.call_books.get(pid)
        n = self.proc(pid).ncalls
        if book is None or not n:
            return []
        return book.between(max(0, n - last) if last else 0, n)

    def transfer_list(self) -> list[TransferView]:
        return self.transfers.items(self.transfers_len)

    def finding_list(self) -> list[FindingView]:
        return self.findings.items(self.findings_len)

    def proc(self, pid: int) -> ProcView:
        return self.procs.get(pid) or ProcView(pid, first=self.seq)

    def shown_procs(self) -> list[ProcView]:
        """The processes with a panel: the command's and the targets', and any that holds
        something of interest (a --all trace would otherwise show every process of the machine)."""
        roots = set(self.targets)
        return [p for p in self.procs.values() if p.interesting or p.pid in roots]

    def pins(self, owner: int, m: MemView) -> list[str]:
        """Who keeps ``owner``'s allocation or pool ``m`` alive now, one phrase each."""
        out = []
        if m.released_at is None:
            out.append(f"{owner} handle")
        files = {self.proc(owner).fds[fd].file for fd in m.exported if fd in self.proc(owner).fds}
        files.discard("")
        for p in self.procs.values():
            for f in p.fds.values():
                if f.file in files and not (p.pid == owner and f.fd in m.exported):
                    out.append(f"{p.pid} fd {f.fd}")
            if p.pid == owner:
                out += [f"{owner} fd {fd}" for fd in m.exported if fd in p.fds]
            for other in p.mems.values():
                if other.of == (owner, m.key) and other.released_at is None:
                    out.append(f"{p.pid} {other.kind}")
        return out

    def ended_of(self, f: FindingView) -> LedgerFinding | None:
        """The world's word that the hold ``f`` (``held-after-exporter-died``) is over, if it
        has said so by this frame: the verdict is then said in the past."""
        if f.kind != "held-after-exporter-died" or not isinstance(f.of, LedgerFinding):
            return None
        return self.ended.get(after_death_key(f.of, f.of.since or f.of.ktime))  # since: its death

    def time(self, ktime: int) -> float:
        return (ktime - self.ktime0) / 1e9 if self.ktime0 and ktime >= self.ktime0 else 0.0


# -- the fold -----------------------------------------------------------------------------------------
def fold_program_event(v: ProgramsView, e: AttachEvent) -> ProgramsView:
    """The view after one more trace or polling event."""
    handler = _HANDLERS.get(type(e))
    v = evolve(v, seq=v.seq + 1)
    return handler(v, e) if handler is not None else v


def _set(v: ProgramsView, p: ProcView) -> ProgramsView:
    return evolve(v, procs={**v.procs, p.pid: p})


def _call(v: ProgramsView, e: TraceCall, name: str, failed: bool = False,
          duration_ns: int = 0) -> ProgramsView:  # fmt: skip
    row = CallRow(v.seq, e.pid, v.time(e.ktime), name, e, failed, duration_ns)
    p = v.proc(e.pid)
    old = v.call_books.get(e.pid) or Book()
    book, n = old.add(p.ncalls, v.seq, row)
    books = v.call_books if book is v.call_books.get(e.pid) else {**v.call_books, e.pid: book}
    return evolve(_set(v, evolve(p, ncalls=n)), call_books=books, calls_len=v.calls_len + 1)


def _transfer(v: ProgramsView, t: TransferView) -> ProgramsView:
    book, n = v.transfers.add(v.transfers_len, v.seq, t)
    return evolve(v, transfers=book, transfers_len=n)


def _closing(p: ProcView, gone: list[FdView]) -> dict[str, Any]:
    """``p``'s closed fds with ``gone`` added: the newest CLOSED_KEPT kept, the rest counted."""
    closed = (*p.closed, *gone)
    cut = max(0, len(closed) - CLOSED_KEPT)
    return {"closed": closed[cut:], "closed_dropped": p.closed_dropped + cut}


def _hold(v: ProgramsView, pid: int, f: FdView) -> ProgramsView:
    p = v.proc(pid)
    old = p.fds.get(f.fd)
    if old is not None and old.since != f.since:  # dup2 onto it, or a close not seen
        return _set(
            v, evolve(p, fds={**p.fds, f.fd: f}, **_closing(p, [evolve(old, closed_at=v.seq)]))
        )
    return _set(v, evolve(p, fds={**p.fds, f.fd: f}))


def _drop(v: ProgramsView, pid: int, fds: list[int]) -> ProgramsView:
    p = v.procs.get(pid)
    if p is None or not any(fd in p.fds for fd in fds):
        return v
    gone = [evolve(p.fds[fd], closed_at=v.seq) for fd in fds if fd in p.fds]
    kept = {fd: f for fd, f in p.fds.items() if fd not in fds}
    return _set(v, evolve(p, fds=kept, **_closing(p, gone)))


def _started(v: ProgramsView, e: TraceStarted) -> ProgramsView:
    v = evolve(
        v,
        mode=e.mode,
        command=tuple(e.command),
        targets=tuple(e.targets),
        everything=e.everything,
        reason=e.reason,
        unprobed=tuple(e.unprobed),
        ktime0=e.ktime0,
    )
    for pid in e.targets:
        if pid not in v.procs:
            v = _set(v, ProcView(pid, first=v.seq))
    return v


def _forked(v: ProgramsView, e: ProcessForked) -> ProgramsView:
    parent = v.proc(e.pid)
    child = evolve(v.proc(e.child), ppid=e.pid, comm=e.comm or parent.comm, first=v.seq)
    # the child inherits every fd: its copies name the same open files
    fds = {
        fd: FdView(fd, "inherited", f.target, f.file, (e.pid, fd), "fork", f.proof, v.seq)
        for fd, f in parent.fds.items()
    }
    v = _set(v, evolve(child, fds=fds))
    if e.pid not in v.procs:
        v = _set(v, parent)
    return _call(v, e, "fork")


def _exec(v: ProgramsView, e: ProcessExec) -> ProgramsView:
    p = v.proc(e.pid)
    v = _set(v, evolve(p, exe=e.filename, comm=e.comm or p.comm))
    return _call(v, e, "exec")


def _exit(v: ProgramsView, e: ProcessExit) -> ProgramsView:
    end = End.of_status(e.code)
    v = _call(v, e, "exit")
    p = v.proc(e.pid)
    closed = tuple(evolve(f, closed_at=v.seq) for f in p.fds.values())
    mems = {
        k: m if m.released_at is not None else evolve(m, released_at=v.seq)
        for k, m in p.mems.items()
    }
    return _set(
        v,
        evolve(
            p,
            alive=False,
            end=end,
            gone_at=v.seq,
            comm=p.comm or e.comm,
            fds={},
            **_closing(p, list(closed)),
            mems=mems,
        ),
    )


def _memfd(v: ProgramsView, e: MemfdCreated) -> ProgramsView:
    v = _call(v, e, "memfd_create", e.fd < 0)
    if e.fd >= 0:
        target = f"memfd:{shown(e.name, 60)}"
        v = _hold(
            v, e.pid, FdView(e.fd, "created", target, e.file, proof="struct file", since=v.seq)
        )
    return v


def _pidfd(v: ProgramsView, e: PidfdOpened) -> ProgramsView:
    v = _call(v, e, "pidfd_open", e.fd < 0)
    if e.fd >= 0:
        v = evolve(v, pidfds={**v.pidfds, (e.pid, e.fd): e.target})
    return v


def _dup(v: ProgramsView, e: FdDuplicated) -> ProgramsView:
    old = v.proc(e.pid).fds.get(e.old)
    if not matters(v.proc(e.pid).fds, e):
        return v  # an fd of no interest: no call of the panel's
    v = _call(v, e, e.call, e.fd < 0)
    if e.fd >= 0 and old is None:  # dup2 of an fd of no interest onto one: that one closed
        v = _drop(v, e.pid, [e.fd])
    elif e.fd >= 0 and old is not None:
        v = _hold(
            v,
            e.pid,
            FdView(e.fd, "dup", old.target, e.file or old.file, (e.pid, e.old), e.call, old.proof,
                   v.seq, came_from=old.came_from),
        )  # fmt: skip
    return v


def _close(v: ProgramsView, e: FdCloseCall) -> ProgramsView:
    fds = closed_by(v.proc(e.pid).fds, e)
    if not fds:
        return v
    v = _call(v, e, e.call, e.result < 0)
    return _drop(v, e.pid, fds) if e.result >= 0 else v


def _sent(v: ProgramsView, e: FdsSent) -> ProgramsView:
    via = e.sock
    v = _call(v, e, e.call, e.result < 0)
    if e.result < 0:
        return v
    p = v.proc(e.pid)
    in_flight = v.in_flight.copy()
    for fd, file in zip(e.fds, e.files, strict=False):
        held = p.fds.get(fd)
        if held is not None and not held.file:  # a driver's export, named by the kernel here
            v = _hold(v, e.pid, evolve(held, file=file, proof="struct file"))
            p = v.proc(e.pid)
        elif held is None:
            v = _hold(v, e.pid, FdView(fd, "sent", "", file, proof="struct file", since=v.seq))
            p = v.proc(e.pid)
        in_flight.sent(e.sock, file, Pending(e.pid, fd, v.seq, e.ktime, via))
    return evolve(v, in_flight=in_flight)


def _received(v: ProgramsView, e: FdsReceived) -> ProgramsView:
    via = e.sock
    v = _call(v, e, e.call, e.truncated)
    in_flight = v.in_flight.copy()
    for fd, file in zip(e.fds, e.files, strict=False):
        sent = in_flight.received(e.sock, file)
        target = ""
        if sent is not None:
            src = v.proc(sent.pid).fds.get(sent.fd) or next(
                (
                    f
                    for f in reversed(v.proc(sent.pid).closed)
                    if f.fd == sent.fd and f.file == file
                ),
                None,
            )
            target = src.target if src is not None else ""
        source = (sent.pid, sent.fd) if sent else (0, -1)
        v = _hold(v, e.pid, FdView(fd, "received", target, file, source, via, "struct file", v.seq))
        if sent is not None:
            v = _transfer(
                v,
                TransferView(
                    "SCM_RIGHTS",
                    sent.pid,
                    sent.fd,
                    e.pid,
                    fd,
                    via,
                    file,
                    v.seq,
                    v.time(e.ktime),
                    (e.ktime - sent.ktime) / 1e6,
                ),
            )
    return evolve(v, in_flight=in_flight)


def _mapping(v: ProgramsView, e: MemoryMapped | MemoryUnmapped) -> ProgramsView:
    """``mmap`` of a file that may carry memory, or ``munmap``/``mremap`` of one: a call of the
    panel's, as it is a frame of the timeline (``model.interest``); what the mapping pins is the
    world's (``model.pins``)."""
    return _call(v, e, "mmap" if isinstance(e, MemoryMapped) else e.call, e.result < 0)


def _unreceived(v: ProgramsView, e: FdsDropped | QueuedAtRelease) -> ProgramsView:
    """The kernel closed sent fds unreceived (a read() without room for them, or their socket
    released): those sends are no longer in flight."""
    in_flight = v.in_flight.copy()
    for file in e.files:
        if isinstance(e, FdsDropped):
            in_flight.received(e.sock, file)
        else:
            in_flight.released(e.sender, e.socket_file, file)
    # a call row (its words are the text's; the in-flight finding comes from the ledger)
    v = _call(v, e, e.call, True) if isinstance(e, FdsDropped) else _call(v, e, "release")
    return evolve(v, in_flight=in_flight)


def _taken(v: ProgramsView, e: FdTaken) -> ProgramsView:
    target = e.target or v.pidfds.get((e.pid, e.pidfd), 0)
    v = _call(v, e, "pidfd_getfd", e.fd < 0)
    if e.fd < 0:
        return v
    src = v.proc(target).fds.get(e.target_fd)
    file = e.file or (src.file if src else "")
    via = ThroughPidfd(e.pidfd)
    f = FdView(e.fd, "taken", src.target if src else "", file, (target, e.target_fd), via,
               "struct file" if file else "", v.seq)  # fmt: skip
    v = _hold(v, e.pid, f)
    return _transfer(
        v,
        TransferView("pidfd_getfd", target, e.target_fd, e.pid, e.fd, via, file, v.seq,
                     v.time(e.ktime)),
    )  # fmt: skip


def _cuda(v: ProgramsView, e: CudaCall) -> ProgramsView:
    f = base_name(e.func)
    v = _call(v, e, f, e.result != 0, e.duration_ns)
    if e.result != 0:
        return v
    p = v.proc(e.pid)
    mems = dict(p.mems)
    seq = v.seq
    if f in ("cuMemCreate", "cuMemPoolCreate"):
        kind = "allocation" if f == "cuMemCreate" else "pool"
        mems[(kind, e.handle)] = MemView(
            kind, e.handle, e.size, e.device, handle=e.handle, since=seq
        )
    elif f in ("cuMemExportToShareableHandle", "cuMemPoolExportToShareableHandle"):
        kind = "allocation" if f == "cuMemExportToShareableHandle" else "pool"
        m = mems.get((kind, e.handle)) or MemView(kind, e.handle, handle=e.handle, since=seq)
        if e.fd >= 0:
            mems[(kind, e.handle)] = evolve(m, exported=(*m.exported, e.fd))
            known = p.fds.get(e.fd)
            v = _hold(
                v,
                e.pid,
                FdView(e.fd, "exported", f"{kind} {e.handle:#x}", known.file if known else "",
                       via=e.func, proof=known.proof if known else "",
                       since=known.since if known else seq),  # the driver's memfd: the same fd
            )  # fmt: skip
            p = v.proc(e.pid)
        elif e.ipc:
            mems[(kind, e.handle)] = evolve(m, ipc=e.ipc)
    elif f in ("cuMemImportFromShareableHandle", "cuMemPoolImportFromShareableHandle"):
        kind = "import" if f == "cuMemImportFromShareableHandle" else "pool import"
        held = p.fds.get(e.fd)
        of = _exporter(v, held.file if held else "", "allocation" if kind == "import" else "pool")
        mems[(kind, e.handle)] = MemView(kind, e.handle, of[2] if of else 0, handle=e.handle,
                                         fd=e.fd, file=held.file if held else "",
                                         of=of[:2] if of else None, since=seq)  # fmt: skip
    elif f == "cuMemMap":
        owner = _owner_of_handle(p, e.handle)
        mems[("mapping", e.ptr)] = MemView("mapping", e.ptr, e.size, address=e.ptr,
                                           handle=e.handle, of=owner, since=seq)  # fmt: skip
    elif f == "cuMemUnmap":
        _release(mems, ("mapping", e.ptr), seq)
    elif f == "cuMemRelease":
        _release(mems, ("allocation", e.handle), seq)
        _release(mems, ("import", e.handle), seq)
    elif f == "cuMemPoolDestroy":
        _release(mems, ("pool", e.handle), seq)
        _release(mems, ("pool import", e.handle), seq)
    elif f in ("cuIpcGetMemHandle", "cuMemPoolExportPointer"):
        kind = "ipc export" if f == "cuIpcGetMemHandle" else "pool pointer export"
        mems[(kind, e.ptr)] = MemView(kind, e.ptr, address=e.ptr, ipc=e.ipc, since=seq)
    elif f in ("cuIpcOpenMemHandle", "cuMemPoolImportPointer"):
        kind = "ipc open" if f == "cuIpcOpenMemHandle" else "pool pointer import"
        src_kind = "ipc export" if kind == "ipc open" else "pool pointer export"
        src = _ipc_exporter(v, e.ipc, src_kind)
        mems[(kind, e.ptr)] = MemView(kind, e.ptr, address=e.ptr, ipc=e.ipc, of=src, since=seq,
                                      handle=e.handle)  # fmt: skip
        if src is not None:
            how = "IPC handle" if kind == "ipc open" else "pool export data"
            v = _transfer(
                v,
                TransferView(how, src[0], -1, e.pid, -1, HandleBytes(e.ipc), "", seq,
                             v.time(e.ktime)),
            )  # fmt: skip
    elif f in ("cuIpcCloseMemHandle",):
        _release(mems, ("ipc open", e.ptr), seq)
    elif f == "cuMemFreeAsync":
        _release(mems, ("pool pointer import", e.ptr), seq)
    elif f in ("cuMemAlloc", "cuMemAllocFromPoolAsync"):
        mems[("device memory", e.ptr)] = MemView("device memory", e.ptr, e.size, e.device,
                                                 address=e.ptr, handle=e.handle, since=seq)  # fmt: skip
    elif f == "cuMemFree":
        _release(mems, ("device memory", e.ptr), seq)
    return _set(v, evolve(v.proc(e.pid), mems=mems))


def _release(mems: dict[tuple[str, int], MemView], key: tuple[str, int], seq: int) -> None:
    m = mems.get(key)
    if m is not None and m.released_at is None:
        mems[key] = evolve(m, released_at=seq)


def _exporter(v: ProgramsView, file: str, kind: str) -> tuple[int, int, int] | None:
    """(pid, handle, size) of the allocation or pool exported as the open file ``file``."""
    if not file:
        return None
    for p in v.procs.values():
        for f in (*p.fds.values(), *p.closed):
            if f.file == file and f.how == "exported":
                # the newest first: a later export may reuse the fd number and the kernel's file
                for m in reversed(p.mems.values()):
                    if m.kind == kind and f.fd in m.exported:
                        return p.pid, m.key, m.size
    return None


def _owner_of_handle(p: ProcView, handle: int) -> tuple[int, int] | None:
    imp = p.mems.get(("import", handle))
    if imp is not None:
        return imp.of
    return (p.pid, handle) if ("allocation", handle) in p.mems else None


def _ipc_exporter(v: ProgramsView, ipc: str, kind: str) -> tuple[int, int] | None:
    for p in v.procs.values():
        for m in p.mems.values():
            if m.kind == kind and m.ipc == ipc and ipc:
                return p.pid, m.key
    return None


def _finding(v: ProgramsView, e: LedgerFinding) -> ProgramsView:
    if e.kind == "shared" and e.via in CAME_VIA and e.file and e.peer not in (0, e.pid):
        got = v.proc(e.pid).fds.get(e.fd)
        if got is not None and got.file == e.file:
            v = _hold(v, e.pid, evolve(got, came_from=e.peer))
    elif e.kind == "released-after-exporter-died":
        v = evolve(v, ended={**v.ended, after_death_key(e, e.since): e})
    proof = str(proof_of(e)) if e.kind in GOOD else Proof.NONE
    f = FindingView(e.kind, e.pid, e, e.peer, v.seq, proof, e.road, e.exported_as, e.imported_as)
    return _found(v, f)


def _found(v: ProgramsView, f: FindingView) -> ProgramsView:
    proof = f.proof
    book, n = v.findings.add(v.findings_len, v.seq, f)
    v = evolve(v, findings=book, findings_len=n)
    w = f.weight  # the one count's weight (``model.findings``)
    if w is Weight.QUIET:
        file = quiet_file(f.of)
        return evolve(
            v,
            quiet_findings=v.quiet_findings + 1,
            quiet_by={**v.quiet_by, file: v.quiet_by.get(file, 0) + 1},
        )
    if w is not Weight.GOOD:
        p = v.proc(f.pid)
        rel = relation_of(f.of) if hasattr(f.of, "kind") else None
        v = evolve(v, bad_findings=v.bad_findings + 1, problems=v.problems | {rel or v.seq})
        v = _set(v, evolve(p, findings=p.findings + 1))
    else:
        v = evolve(v, proven_by={**v.proven_by, proof: v.proven_by.get(proof, 0) + 1})
        if f.road or f.exported_as:  # the roads the verdicts count, as they come
            v = evolve(v, roads={**v.roads, f.road: v.roads.get(f.road, 0) + 1})
    return v


def _refused(v: ProgramsView, e: CallRefused) -> ProgramsView:
    """The refusal's cause and fix come as the ledger's ``refused`` finding; here, the process."""
    if e.pid not in v.procs:
        v = _set(v, ProcView(e.pid, first=v.seq))
    return v


# -- polling ------------------------------------------------------------------------------------------
def _seen(v: ProgramsView, e: ProcessSeen) -> ProgramsView:
    p = v.proc(e.pid)
    who = {"container": e.container, "pod": e.pod, "inner_pid": e.inner_pid}
    return _set(v, evolve(p, comm=e.name, ppid=e.ppid, uid=e.uid, exe=e.cmdline, **who))


def _identity(v: ProgramsView, e: ProcessIdentity) -> ProgramsView:
    p = v.proc(e.pid)
    return _set(v, evolve(p, container=e.container, pod=e.pod, inner_pid=e.inner_pid))


def _gone(v: ProgramsView, e: ProcessGone) -> ProgramsView:
    p = v.proc(e.pid)
    closed = tuple(evolve(f, closed_at=v.seq) for f in p.fds.values())
    return _set(
        v,
        evolve(
            p,
            alive=False,
            end=End.of_exit(e.returncode, e.signal),
            gone_at=v.seq,
            comm=p.comm or e.name,
            fds={},
            **_closing(p, list(closed)),
        ),
    )


def _opened(v: ProgramsView, e: FdOpened) -> ProgramsView:
    v = evolve(v, held_at_attach=at_attach(v.held_at_attach, e)) if e.how == "present" else v
    source = (e.source.pid, e.source.fd) if e.source else (0, -1)
    proof = "kcmp" if e.source else ""
    f = FdView(e.fd, str(e.how), shown(e.target, 80), "", source, e.via, proof, v.seq)
    v = _hold(v, e.pid, f)
    if e.source is not None and str(e.how) == "arrived":
        v = _transfer(
            v,
            TransferView("kcmp", e.source.pid, e.source.fd, e.pid, e.fd, e.via or "(unseen)",
                         "", v.seq, e.at),
        )  # fmt: skip
    return v


def _fd_closed(v: ProgramsView, e: FdClosed) -> ProgramsView:
    return _drop(v, e.pid, [e.fd])


def _shared(v: ProgramsView, e: SharedFile) -> ProgramsView:
    """A kcmp-proven share: each holder's fd gets the proof and a common name for the file."""
    file = f"{e.dev:x}:{e.ino}"
    for h in e.holders:
        p = v.proc(h.pid)
        old = p.fds.get(h.fd)
        proof = "kcmp" if e.same_description else ("same inode" if e.same_description is False
                                                   else "")  # fmt: skip
        f = old or FdView(h.fd, "present", shown(e.target, 80), since=v.seq)
        v = _hold(v, h.pid, evolve(f, file=file, proof=proof, target=f.target or e.target))
    return v


def _gpu(v: ProgramsView, e: GpuMemory) -> ProgramsView:
    p = v.proc(e.pid)
    if p.gpu_used == e.used and p.gpu_uuids == e.uuids:
        return v
    return _set(v, evolve(p, gpu_used=dict(e.used), gpu_uuids=dict(e.uuids)))


def _leak(v: ProgramsView, e: Leak) -> ProgramsView:
    return _found(v, FindingView(str(e.kind), e.pid or 0, e, seq=v.seq))


def _unreadable(v: ProgramsView, e: ProcessUnreadable) -> ProgramsView:
    return _found(v, FindingView("unreadable", e.pid, e, seq=v.seq))


def _lost(v: ProgramsView, e: TraceLost) -> ProgramsView:
    return evolve(v, lost=v.lost + e.count)


def _pinned(v: ProgramsView, e: PinnedBytes) -> ProgramsView:
    """An exporter's pinned bytes changed: one more point of its series (the refcount book's)."""
    from vmmtui.model.handles import extend_series  # with the first trace (not a demo's frame)

    p = v.proc(e.pid)
    return _set(v, evolve(p, pinned=extend_series(p.pinned, max(0, e.ktime - v.ktime0), e.bytes)))


def _finished(v: ProgramsView, e: Event) -> ProgramsView:
    v = evolve(v, finished=e)
    if isinstance(e, TraceFinished) and v.lost != e.lost and e.lost:
        v = evolve(v, lost=e.lost)
    return v


_HANDLERS: dict[type, Callable[[ProgramsView, Any], ProgramsView]] = {
    TraceStarted: _started,
    ProcessForked: _forked,
    ProcessExec: _exec,
    ProcessExit: _exit,
    MemfdCreated: _memfd,
    PidfdOpened: _pidfd,
    FdDuplicated: _dup,
    FdCloseCall: _close,
    FdsSent: _sent,
    FdsReceived: _received,
    FdsDropped: _unreceived,
    QueuedAtRelease: _unreceived,
    FdTaken: _taken,
    MemoryMapped: _mapping,
    MemoryUnmapped: _mapping,
    CudaCall: _cuda,
    LedgerFinding: _finding,
    PinnedBytes: _pinned,
    CallRefused: _refused,
    TraceLost: _lost,
    TraceFinished: _finished,
    WatchFinished: _finished,
    ProcessSeen: _seen,
    ProcessIdentity: _identity,
    ProcessGone: _gone,
    ProcessUnreadable: _unreadable,
    FdOpened: _opened,
    FdClosed: _fd_closed,
    MappingSeen: lambda v, e: evolve(v, held_at_attach=at_attach(v.held_at_attach, e)),
    SharedFile: _shared,
    GpuMemory: _gpu,
    GpuTable: lambda v, e: evolve(v, gpu=e),
    Leak: _leak,
}
