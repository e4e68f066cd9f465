"""The ledger: ``state = fold(trace events)``, who made, sent, took, imported, mapped and released
what, and who pins it now. No Textual, no /proc: everything comes from the events, so a recording
folds into the same ledger as the live trace.

An open file is named by ``file`` (the keyed hash of the kernel's ``struct file *``): a receive
is the send of the same ``file`` queued on the receiving socket (``matching``), exactly. GPU
allocations are keyed by (exporter pid, handle); legacy IPC by the 64 handle bytes. ``apply``
returns the findings an event brings (a matched share, a refused call, a leak at an exit);
``finish`` those the end brings (receives whose send never came).

What the ledger claims, the kernel said. "In-flight" (sent, never received) is said only where
the kernel reported the fd still queued when its socket was released (``QueuedAtRelease``): a
send whose receive was merely not seen went to a process not traced, or its record was lost, and
the ledger cannot tell which. Records are folded in the kernel's order (``order.KernelOrder``), and
a receive folded before its send waits ``window_ns`` for it. Where records were lost (``TraceLost``
windows), every conclusion that a lost record could overturn (a leak whose close, a sender whose
send, may be among them) is said as ``unknown`` with the loss, never as a leak.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import replace
from typing import Any

from vmmtui.model.entries import (
    Allocation,
    Early,
    FileMap,
    HeldAfterDeath,
    Holding,
    Import,
    IpcExport,
    IpcOpen,
    Losses,
    Mapping,
    Pending,
    Pin,
    Pool,
    PoolImport,
    PoolPtrExport,
    PoolPtrImport,
    ProcRecord,
    Transfer,
)
from vmmtui.model.exits import leaks_at_exit
from vmmtui.model.findings import MEMORY_FILES, Memory, Proof
from vmmtui.model.growth import Growth
from vmmtui.model.held import files_held_after_exit, kcmp_shares
from vmmtui.model.interest import closed_by, matters
from vmmtui.model.kept import Kept, remember_name
from vmmtui.model.matching import SendQueue, destination, receiver
from vmmtui.model.pins import (
    CAME,
    after_death_over,
    came_from,
    import_gone,
    last_reference,
    let_go,
    made,
    mapped,
    opened_again,
    pins_on,
    unmapped,
)
from vmmtui.model.policy import counted_as
from vmmtui.model.probes import FABRIC, probe_of
from vmmtui.model.probes import Context as ProbeContext
from vmmtui.model.unreceived import dropped
from vmmtui.stream.events import (
    Arrival,
    Event,
    FdClosed,
    FdOpened,
    ProcessGone,
    ProcessSeen,
    SharedFile,
)
from vmmtui.stream.observed import (
    CallRefused,
    CapabilityProbe,
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
    ProcessExec,
    ProcessExit,
    ProcessForked,
    QueuedAtRelease,
    SocketEnd,
    TraceCall,
    TraceLost,
    TraceStarted,
    base_name,
)

CUDA_SUCCESS = 0
#: how long a receive folded before its send waits for it (ns): as long as the observer holds a
#: record for those stamped before it (``trace.order.WINDOW_NS``)
WINDOW_NS = 150_000_000
#: how a received fd came
SCM = "SCM_RIGHTS"
#: how an fd polling saw is held when it is no memory open before the trace (a socket, a device)
#: or came after the first poll: the ledger keeps it (an fd of interest), polling judges it
POLLED = "polled"


class Ledger:
    """Fold trace events (live or recorded) into who holds what; ``apply`` returns findings."""

    def __init__(self, window_ns: int = WINDOW_NS, keep: int | None = None) -> None:
        """``keep``: how many closed holdings, transfers, findings… it keeps of each (None: the
        newest ``kept.LIMIT``; 0 for a ledger asked only what is open, every one still counted)."""
        self.window_ns = window_ns
        #: the newest kernel timestamp folded (receives waiting for their send mature by it)
        self.clock = 0
        self.procs: dict[int, ProcRecord] = {}
        self.holdings: dict[tuple[int, int], Holding] = {}
        #: the keys of ``holdings`` by process (``fds_of``, asked at every call)
        self._fds: dict[int, set[int]] = {}
        self.history: Kept[Holding] = Kept(
            limit=keep
        )  # closed holdings, oldest first: the newest kept
        #: sends not yet received, by socket pair and file (``matching``): no finding by themselves
        self.in_flight: SendQueue[Pending] = SendQueue()
        #: receives folded before their send, by (receiving socket, file), in the order folded
        self.early: dict[tuple[str, str], deque[Early]] = {}
        self._early_order: deque[Early] = deque()
        self.losses = Losses()
        #: fds records did not hold, by record (sent, received, queued): nothing is claimed of them
        self.fds_not_read: Counter[str] = Counter()
        #: sends that no traced process was seen receiving and the kernel never said were left
        #: queued (went to a process not traced): counted at the end, not a finding
        self.unreceived = 0
        self.transfers: Kept[Transfer] = Kept(limit=keep, key=lambda t: t.how)  # all counted by how
        self.pidfds: dict[tuple[int, int], int] = {}
        self.allocations: dict[tuple[int, int], Allocation] = {}
        self.imports: dict[tuple[int, int], tuple[Allocation | None, Import]] = {}
        self.mappings: dict[tuple[int, int], Mapping] = {}
        self.ipc: dict[str, IpcExport] = {}
        self.ipc_opens: dict[tuple[int, int], tuple[IpcExport | None, IpcOpen]] = {}
        self.refusals: Kept[CallRefused] = Kept(limit=keep)
        self.findings: Kept[LedgerFinding] = Kept(limit=keep, key=counted_as)  # ``by``: the count
        #: calls that failed by design: no findings
        self.probes: Kept[CapabilityProbe] = Kept(limit=keep)
        self.memfd_names: dict[str, str] = {}
        #: open files shared before the trace began (frame 0: kcmp-proven, direction unseen), by
        #: the name the ledger gives them (``kcmp:…`` until a call shows the kernel's ``file``)
        self.shared_before: dict[str, SharedFile] = {}
        self._handlers: dict[type, Callable[[Any, list], None] | None] = {}
        #: (dev, ino, pid, fd) of the kcmp shares already found
        self._kcmp_said: set[tuple[int, int, int, int]] = set()
        #: pools by (pid, CUmemoryPool), created or imported (an import maps to its PoolImport)
        self.pools: dict[tuple[int, int], Pool] = {}
        self.pool_imports: dict[tuple[int, int], tuple[Pool | None, PoolImport]] = {}
        self.pool_ptrs: dict[str, PoolPtrExport] = {}
        self.pool_ptr_imports: dict[
            tuple[int, int], tuple[PoolPtrExport | None, PoolPtrImport]
        ] = {}
        # -- memory and its pins (``model/pins.py``) ----------------------------------------------
        #: (pid, handle) → the references the driver counts on that handle in that process:
        #: cuMemCreate, cuMemImportFromShareableHandle, cuMemRetainAllocationHandle +1,
        #: cuMemRelease -1 (the allocation is let go only at 0)
        self.handle_refs: Counter[tuple[int, int]] = Counter()
        #: (pid, pointer) → the references on a legacy IPC open (opened again in one context:
        #: the same pointer, one more reference; closed at 0)
        self.ipc_refs: Counter[tuple[int, int]] = Counter()
        #: pid → address → an ``mmap`` of a file that may carry memory, until munmap/exec/exit
        self.maps: dict[int, dict[int, FileMap]] = {}
        #: file → the pid that made it (memfd_create, a driver export), kept after its fds close
        self.makers: dict[str, int] = {}
        #: (pid, file) → how the file first came to ``pid`` from another process (received,
        #: taken, or inherited from a parent it came to): every later fd or mapping of it in
        #: ``pid`` pins the other's memory
        self.came: dict[tuple[int, str], Holding] = {}
        #: (pid, what it pins) → held when its exporter died, until its last pin goes
        self.after_death: dict[tuple[int, str], HeldAfterDeath] = {}
        #: cuMemAlloc'd sizes, by (pid, pointer): what a legacy IPC export of it pins
        self.dev_sizes: dict[tuple[int, int], int] = {}
        #: an importer's pins on one exporter's memory, round by round (``model/growth.py``)
        self.growth = Growth()
        #: findings a pin's end brought where no ``out`` was at hand (a close inside a dup2)
        self.later: list[LedgerFinding] = []

    # -- queries -------------------------------------------------------------------------------
    def fds_of(self, pid: int) -> AbstractSet[int]:
        """``pid``'s fds of interest now: those a call made, received, took, exported, sent or
        duplicated from one of them, and those polling (or a trace's frame 0) saw open."""
        return self._fds.get(pid) or frozenset()

    def matters(self, e: Event) -> bool:
        """Whether ``e`` (before it is folded) is a call that matters (``model.interest``): the
        timeline's frames, the panels' call rows and the log's lines count these."""
        return isinstance(e, TraceCall) and matters(self.fds_of(e.pid), e)

    def holders(self, file: str) -> list[Holding]:
        """Who pins this open file now (open fds naming it)."""
        return [h for h in self.holdings.values() if h.file == file]

    def allocation_of_file(self, file: str) -> Allocation | None:
        for a in reversed(self.allocations.values()):  # the newest: the kernel reuses a freed file
            if any(f == file for _, f in a.exported):
                return a
        return None

    def pool_of_file(self, file: str) -> Pool | None:
        for p in reversed(self.pools.values()):  # the newest, as for allocations
            if any(f == file for _, f in p.exported):
                return p
        return None

    def pins(self, a: Allocation) -> list[Pin]:
        """Everything that keeps ``a``'s memory alive now."""
        out = []
        if a.released_at is None:
            out.append(Pin(a.pid, "handle", a.handle))
        for fd, file in a.exported:
            for h in self.holders(file) if file else []:
                out.append(Pin(h.pid, "fd", h.fd, h.how))
            if not file and (a.pid, fd) in self.holdings:
                out.append(Pin(a.pid, "exported fd", fd))
        for imp in a.imports:
            if imp.released_at is None:
                out.append(Pin(imp.pid, "import", imp.handle))
        for m in a.mappings:
            if m.unmapped_at is None:
                out.append(Pin(m.pid, "mapping", m.ptr))
        return out

    def alive(self, pid: int) -> bool:
        """Not seen to exit (a process the trace never met counts as alive)."""
        return self.procs[pid].alive if pid in self.procs else True

    def name(self, file: str) -> str:
        return self.memfd_names.get(file, "")

    def file_kind(self, file: str, said: str = "") -> str:
        """What the open file is: ``gpu`` (a driver export) or ``memfd`` as the trace saw it
        made; else what the kernel said it was at a send (``said``: ``socket``, ``pipe``,
        ``memfd``, ``gpu``…); "" where neither was seen."""
        if not file:
            return said
        if self.allocation_of_file(file) is not None or self.pool_of_file(file) is not None:
            return "gpu"
        if file in self.memfd_names:
            return "memfd"
        if any(h.file == file and h.how == "exported" for h in self.holdings.values()):
            return "gpu"
        return said

    # -- the fold ------------------------------------------------------------------------------
    def apply(self, e: Event) -> list[LedgerFinding | CapabilityProbe]:
        """The findings ``e`` brings, and the probe it was (a call that failed by design)."""
        out: list = []
        t = getattr(e, "ktime", 0)
        if isinstance(t, int) and t > self.clock:
            self.clock = t
            if self._early_order:
                self._mature(t - self.window_ns, out)
        kind = type(e)
        if kind not in self._handlers:  # looked up once per event type
            self._handlers[kind] = getattr(self, f"_on_{kind.__name__}", None)
        handler = self._handlers[kind]
        if handler is not None:
            handler(e, out)
        if self.later:
            out += self.later
            self.later.clear()
        for f in out:
            (self.findings if isinstance(f, LedgerFinding) else self.probes).append(f)
        return out

    def finish(self, at: int = 0) -> list[LedgerFinding]:
        """Findings the end of the trace gives: receives still waiting for their send, and sends
        never seen received where records were lost (unknown). A loss before the send counts
        too: a send's record is written as its call returns, and the receiver may have taken
        the message, and lost its record, before that. A send never seen received in a trace
        that lost nothing went to a process not traced: counted, not a finding (the kernel says
        when an fd is left queued)."""
        out: list[LedgerFinding] = []
        self._mature(None, out)
        unknown: dict[int, list[Pending]] = {}
        end = max([self.clock, at, *(p.at for p in self.in_flight.pending())])
        for p in self.in_flight.pending():
            if self.losses.between(0, end)[0]:
                unknown.setdefault(p.pid, []).append(p)
            else:
                self.unreceived += 1
        for pid, sends in unknown.items():
            n, lo, hi = self.losses.between(0, end)
            out.append(
                LedgerFinding(
                    "unknown",
                    pid,
                    at or self.clock,
                    lost=n,
                    lost_first_ns=lo,
                    lost_last_ns=hi,
                    fds=[p.fd for p in sends],
                )
            )
        self.in_flight.clear()
        self.findings.extend(out)
        return out

    # -- losses and order ----------------------------------------------------------------------
    def _on_TraceLost(self, e: TraceLost, out: list) -> None:
        self.losses.add(e)

    def unknown_if_lost(self, f: LedgerFinding, since: int) -> LedgerFinding:
        """``f`` as it stands, or as ``unknown`` where records were lost between ``since`` and
        the finding (a record that would overturn it may be among them)."""
        n, lo, hi = self.losses.between(since, f.ktime or self.clock)
        if not n:
            return f
        return replace(
            f, kind="unknown", was=f.kind, proof="", lost=n, lost_first_ns=lo, lost_last_ns=hi
        )

    def _mature(self, until: int | None, out: list) -> None:
        """Receives that waited their window (or all, at the end) for a send that never came:
        from a process not traced (unknown where a lost record may be that send)."""
        q = self._early_order
        while q and (until is None or q[0].at <= until):
            r = q.popleft()
            waiting = self.early.get(r.key)
            if waiting and waiting[0] is r:
                waiting.popleft()
                if not waiting:
                    del self.early[r.key]
            if r.matched:
                continue
            f = LedgerFinding(
                "shared", r.pid, r.at, file=r.file, fd=r.fd, via="SCM_RIGHTS", sock=r.sock
            )
            out.append(self.unknown_if_lost(f, 0))

    def _proc(self, pid: int) -> ProcRecord:
        if pid not in self.procs:
            self.procs[pid] = ProcRecord(pid)
        return self.procs[pid]

    def _hold(self, h: Holding) -> None:
        old = self.holdings.pop((h.pid, h.fd), None)
        if old is not None:  # dup2 onto an open fd, or an fd we missed the close of
            old.closed_at = h.since
            self.history.append(old)
        self.holdings[(h.pid, h.fd)] = h
        self._fds.setdefault(h.pid, set()).add(h.fd)
        self._proc(h.pid)
        if h.file:  # a driver export whose fd the kernel named first (memfd inside the call)
            self._link_export(h.pid, h.fd, h.file)
            if h.how in CAME:  # from another process: its fds and mappings pin the other's memory
                came_from(self, h)

    def close_fd(self, pid: int, fd: int, at: int) -> Holding | None:
        h = self.holdings.pop((pid, fd), None)
        if h is not None:
            h.closed_at = at
            self.history.append(h)
            held = self._fds[pid]
            held.discard(fd)
            if not held:
                del self._fds[pid]
            if h.file and (pid, h.file) in self.came:
                let_go(self, pid, h.file, at, "close")
        return h

    def _on_TraceStarted(self, e: TraceStarted, out: list) -> None:
        for pid in e.targets:
            self._proc(pid)

    # -- what was true at the start (frame 0 of ``trace -p``; polling's first poll) ----------------
    def _on_ProcessSeen(self, e: ProcessSeen, out: list) -> None:
        p = self._proc(e.pid)
        p.ppid, p.comm = p.ppid or e.ppid, p.comm or e.name

    def _on_FdOpened(self, e: FdOpened, out: list) -> None:
        """Memory already open when first read (``present``): held since before the trace. Any
        other fd polling saw is held as ``polled``: an fd of interest, whose opens and leaks are
        polling's to judge, not the ledger's."""
        if (e.pid, e.fd) in self.holdings:
            return
        memory = e.kind in MEMORY_FILES
        how = "present" if e.how == Arrival.PRESENT and memory else POLLED
        self._hold(Holding(e.pid, e.fd, "", how, 0))

    def _on_FdClosed(self, e: FdClosed, out: list) -> None:
        self.close_fd(e.pid, e.fd, 0)

    def _on_ProcessGone(self, e: ProcessGone, out: list) -> None:
        """Polling found the process gone: its fds went with it (what it leaked is polling's)."""
        self._proc(e.pid).alive = False
        for key in [k for k in self.holdings if k[0] == e.pid]:
            self.close_fd(*key, 0)

    def _on_SharedFile(self, e: SharedFile, out: list) -> None:
        """One open file description held by several processes (kcmp): a share of memory (a
        memfd, a /dev/shm file, a dma-buf) is a ``shared`` finding proven by kcmp, once per
        holder; their ``present`` fds get one name, so an exit can tell who still holds what the
        dead one shared."""
        if e.same_description is True and len({h.pid for h in e.holders}) >= 2:
            self._name_shared(e, out)
        for h in e.holders:  # each holder's fd is of interest from now (polling read it open)
            if (h.pid, h.fd) not in self.holdings:
                self._hold(Holding(h.pid, h.fd, "", POLLED, 0))

    def _name_shared(self, e: SharedFile, out: list) -> None:
        first = e.holders[0]
        held = [self.holdings.get((h.pid, h.fd)) for h in e.holders]
        present = [h for h in held if h is not None and h.how == "present"]
        name = next((h.file for h in present if h.file), "") or (
            f"kcmp:{e.dev}:{e.ino}:{first.pid}:{first.fd}"
        )
        out += kcmp_shares(e, name, self._kcmp_said)
        for kept in present:
            kept.file = name
        if present:
            self.shared_before[name] = e

    def _on_ProcessForked(self, e: ProcessForked, out: list) -> None:
        self._proc(e.child).ppid = e.pid
        self._proc(e.child).comm = e.comm
        # the child inherits every fd: its copies name the same files
        for (pid, fd), h in list(self.holdings.items()):
            if pid == e.pid:
                self._hold(
                    Holding(
                        e.child, fd, h.file, "inherited", e.ktime, e.pid, fd, "fork", kind=h.kind
                    )
                )
        # and every shared mapping (fork(2): the child gets a copy of the parent's mappings)
        for addr, m in self.maps.get(e.pid, {}).items():
            self.maps.setdefault(e.child, {})[addr] = replace(m, pid=e.child, at=e.ktime)
        for (pid, file), h in list(self.came.items()):
            if pid == e.pid and (e.child, file) not in self.came and pins_on(self, e.child, file):
                self.came[(e.child, file)] = h

    def _on_ProcessExec(self, e: ProcessExec, out: list) -> None:
        p = self._proc(e.pid)
        p.exe, p.comm = e.filename, e.comm or p.comm
        # exec replaces the address space: its mappings go (its fds stay unless close-on-exec,
        # whose closes the kernel reports as they happen)
        for m in list(self.maps.pop(e.pid, {}).values()):
            if (e.pid, m.file) in self.came:
                let_go(self, e.pid, m.file, e.ktime, "exec")

    # -- mappings of files that carry memory (``MemoryMapped``: mmap of an fd of interest) ------
    def _on_MemoryMapped(self, e: MemoryMapped, out: list) -> None:
        """The mapping pins the file's memory until munmap, exec or exit, fd open or not."""
        mapped(self, e)

    def _on_MemoryUnmapped(self, e: MemoryUnmapped, out: list) -> None:
        unmapped(self, e)

    def _on_MemfdCreated(self, e: MemfdCreated, out: list) -> None:
        if e.fd >= 0:
            remember_name(self.memfd_names, e.file, e.name, self.holdings.values())
            made(self, e.file, e.pid)
            self._hold(Holding(e.pid, e.fd, e.file, "created", e.ktime))

    def _on_PidfdOpened(self, e: PidfdOpened, out: list) -> None:
        if e.fd >= 0:
            self.pidfds[(e.pid, e.fd)] = e.target

    def _on_FdDuplicated(self, e: FdDuplicated, out: list) -> None:
        """A copy of an fd of interest is one too; a dup of any other fd is nothing to hold, and
        one onto an fd of interest (``dup2``) closed that fd."""
        old = self.holdings.get((e.pid, e.old))
        if e.fd < 0:
            return
        if old is None:
            self.close_fd(e.pid, e.fd, e.ktime)
            return
        file = e.file or old.file
        kind = old.kind if old.file == file else ""
        self._hold(Holding(e.pid, e.fd, file, "dup", e.ktime, e.pid, e.old, e.call, kind=kind))

    def _on_FdCloseCall(self, e: FdCloseCall, out: list) -> None:
        if e.result < 0:
            return
        if e.call != "close_range":
            self.pidfds.pop((e.pid, e.fd), None)
        for fd in closed_by(self.fds_of(e.pid), e):  # the one rule of what a close names
            self.close_fd(e.pid, fd, e.ktime)

    def _on_FdsSent(self, e: FdsSent, out: list) -> None:
        if e.result < 0:
            return
        if e.fds_not_read:
            self.fds_not_read["sent"] += e.fds_not_read
        kinds = e.kinds + [""] * (len(e.fds) - len(e.kinds))
        for fd, file, said in zip(e.fds, e.files, kinds, strict=False):
            held = self.holdings.get((e.pid, fd))
            if held is not None and held.file.startswith("kcmp:"):
                self._rename(held.file, file)  # a file shared before the trace, now named
            elif held is not None and not held.file:
                self._learn_file(e.pid, fd, file)
            elif held is None:  # an fd the trace did not see made: the sender holds it still
                sent = Holding(e.pid, fd, file, "sent", e.ktime, via=e.call, sock=e.sock, kind=said)
                self._hold(sent)
            if held is not None and said:
                held.kind = said
            key = (destination(e.sock), file)
            waiting = self.early.get(key)
            if waiting:  # its receive was folded first (it ended on another CPU)
                r = waiting.popleft()
                if not waiting:
                    del self.early[key]
                r.matched = True
                held = self.holdings.get((r.pid, r.fd))
                if held is not None and held.file == file:
                    held.source_pid, held.source_fd = e.pid, fd
                    held.kind = held.kind or said
                self._matched(
                    Pending(e.pid, fd, e.ktime, e.sock, said), r.pid, r.fd, file, r.at, r.sock, out
                )
                continue
            self.in_flight.sent(e.sock, file, Pending(e.pid, fd, e.ktime, e.sock, said))

    def _on_QueuedAtRelease(self, e: QueuedAtRelease, out: list) -> None:
        """The kernel released a socket with SCM_RIGHTS fds still queued: sent, never received."""
        if e.count > len(e.files):
            self.fds_not_read["queued"] += e.count - len(e.files)
        for file in e.files:
            sent = self.in_flight.released(e.sender, e.socket_file, file)
            out.append(
                LedgerFinding(
                    "in-flight",
                    sent.pid if sent else e.pid,
                    e.ktime,
                    file=file,
                    fd=sent.fd if sent else -1,
                    via="SCM_RIGHTS",
                    sock=sent.sock if sent else None,
                )
            )

    def _on_FdsDropped(self, e: FdsDropped, out: list) -> None:  # a read(): their send is over
        if e.count > len(e.files):
            self.fds_not_read["dropped"] += e.count - len(e.files)
        out += [dropped(e, f, self.in_flight.received(e.sock, f)) for f in e.files]

    def _rename(self, old: str, file: str) -> None:
        """Every fd kcmp proved to be one open file takes the kernel's name for it."""
        for h in self.holdings.values():
            if h.file == old:
                h.file = file
        if old in self.shared_before:
            self.shared_before[file] = self.shared_before.pop(old)

    def _learn_file(self, pid: int, fd: int, file: str) -> None:
        """An fd the driver made (export) is first seen by its file in a syscall: link them."""
        self.holdings[(pid, fd)].file = file
        self._link_export(pid, fd, file)
        came_from(self, self.holdings[(pid, fd)])

    def _link_export(self, pid: int, fd: int, file: str) -> None:
        if not self.allocations and not self.pools:
            return  # no driver export to link (a trace of fds alone: every fd held comes here)
        exporters: list[Allocation | Pool] = [*self.allocations.values(), *self.pools.values()]
        for a in exporters:
            a.exported = [
                (f, file if (a.pid == pid and f == fd and not x) else x) for f, x in a.exported
            ]

    def _on_FdsReceived(self, e: FdsReceived, out: list) -> None:
        if e.fds_not_read:
            self.fds_not_read["received"] += e.fds_not_read
        for fd, file in zip(e.fds, e.files, strict=False):
            sent = self.in_flight.received(e.sock, file)
            if sent is None:  # its send may still come (folded later): it waits the window
                self._hold(Holding(e.pid, fd, file, "received", e.ktime, 0, -1, SCM, sock=e.sock))
                r = Early(e.pid, fd, file, e.ktime, e.sock, key=(receiver(e.sock), file))
                self.early.setdefault(r.key, deque()).append(r)
                self._early_order.append(r)
                continue
            self._hold(
                Holding(
                    e.pid,
                    fd,
                    file,
                    "received",
                    e.ktime,
                    sent.pid,
                    sent.fd,
                    SCM,
                    sock=e.sock,
                    kind=sent.kind,
                )
            )
            self._matched(sent, e.pid, fd, file, e.ktime, e.sock, out)

    def _matched(
        self, sent: Pending, pid: int, fd: int, file: str, at: int, sock: SocketEnd, out: list
    ) -> None:
        self.transfers.append(
            Transfer(file, SCM, sent.pid, sent.fd, pid, fd, sent.at, at, sock=sock)
        )
        out.append(
            LedgerFinding.of(
                "shared",
                pid,
                at,
                peer=sent.pid,
                file=file,
                proof=Proof.STRUCT_FILE,
                fd=fd,
                peer_fd=sent.fd,
                via=SCM,
                sock=sock,
                gap_ns=at - sent.at,
            )
        )

    def _on_FdTaken(self, e: FdTaken, out: list) -> None:
        target = e.target or self.pidfds.get((e.pid, e.pidfd), 0)
        if e.fd < 0:
            return  # the tracer's CallRefused says why
        src = self.holdings.get((target, e.target_fd))
        file = e.file or (src.file if src else "")
        if src is not None and not src.file and file:
            self._learn_file(target, e.target_fd, file)
        via = "pidfd_getfd"
        kind = src.kind if src is not None and src.file == file else ""
        self._hold(
            Holding(
                e.pid,
                e.fd,
                file,
                "taken",
                e.ktime,
                target,
                e.target_fd,
                via,
                pidfd=e.pidfd,
                kind=kind,
            )
        )
        self.transfers.append(
            Transfer(file, via, target, e.target_fd, e.pid, e.fd, e.ktime, e.ktime, pidfd=e.pidfd)
        )
        out.append(
            LedgerFinding(
                "shared",
                e.pid,
                e.ktime,
                peer=target,
                file=file,
                proof=Proof.STRUCT_FILE if file else Proof.NONE,
                fd=e.fd,
                peer_fd=e.target_fd,
                via=via,
                pidfd=e.pidfd,
            )
        )

    def _on_CallRefused(self, e: CallRefused, out: list) -> None:
        self.refusals.append(e)
        out.append(LedgerFinding("refused", e.pid, e.ktime, peer=e.target, via=e.call, refusal=e))

    # -- CUDA ----------------------------------------------------------------------------------
    def _probe(self, e: CudaCall) -> CapabilityProbe | None:
        worked = any(a.pid == e.pid and a.handle_types & FABRIC for a in self.allocations.values())
        return probe_of(e, ProbeContext(fabric_worked=worked))

    def _on_CudaCall(self, e: CudaCall, out: list) -> None:
        if e.result != CUDA_SUCCESS and (probe := self._probe(e)) is not None:
            out.append(probe)  # failed by design: what the program asked, not a problem
            return
        if e.result != CUDA_SUCCESS:
            out.append(LedgerFinding("refused", e.pid, e.ktime, via=e.func, cuda=e))
            return
        f = base_name(e.func)
        if f == "cuMemCreate":
            self.allocations[(e.pid, e.handle)] = Allocation(
                e.pid, e.handle, e.size, e.device, e.handle_types, e.ktime
            )
            self.handle_refs[(e.pid, e.handle)] = 1
        elif f == "cuMemRetainAllocationHandle":
            # "The returned handle must be released with corresponding number of calls to
            # cuMemRelease" (CUDA Driver API, cuMemRetainAllocationHandle): one more reference
            self.handle_refs[(e.pid, e.handle)] += 1
        elif f == "cuMemExportToShareableHandle":
            a = self.allocations.get((e.pid, e.handle))
            if a is None:  # created before the trace started
                a = Allocation(e.pid, e.handle, 0, -1, 0, e.ktime)
                self.allocations[(e.pid, e.handle)] = a
            if e.fd >= 0:
                a.exported.append((e.fd, ""))
                h = Holding(
                    e.pid, e.fd, e.file, "exported", e.ktime, via="cuMemExportToShareableHandle"
                )
                self._hold(h)
        elif f == "cuMemImportFromShareableHandle":
            held = self.holdings.get((e.pid, e.fd))
            file = e.file or (held.file if held else "")  # the kernel's, read at the call
            a = self.allocation_of_file(file) if file else None
            imp = Import(e.pid, e.handle, e.fd, file, e.ktime)
            if a is not None:
                a.imports.append(imp)
            self.imports[(e.pid, e.handle)] = (a, imp)
            self.handle_refs[(e.pid, e.handle)] += 1
            if a is not None and a.pid != e.pid:
                self.growth.arrived(
                    self, e.pid, a.pid, f"alloc:{a.pid}:{a.handle:x}", f"handle:{e.handle:x}",
                    a.size, e.ktime, out,
                )  # fmt: skip
            out.append(
                LedgerFinding(
                    "imported",
                    e.pid,
                    e.ktime,
                    peer=a.pid if a else 0,
                    file=file,
                    proof=Proof.STRUCT_FILE if a else Proof.NONE,
                    fd=e.fd,
                    handle=e.handle,
                    peer_handle=a.handle if a else 0,
                    size=a.size if a else 0,
                    memory=Memory.ALLOCATION,
                )
            )
        elif f == "cuMemMap":
            m = Mapping(e.pid, e.handle, e.ptr, e.size, e.ktime)
            self.mappings[(e.pid, e.ptr)] = m
            a = self.allocations.get((e.pid, e.handle))
            imported = self.imports.get((e.pid, e.handle))
            if a is None and imported is not None:
                a = imported[0]
            if a is not None:
                a.mappings.append(m)
        elif f == "cuMemUnmap":
            unmapped = self.mappings.pop((e.pid, e.ptr), None)
            if unmapped is not None:
                unmapped.unmapped_at = e.ktime
                import_gone(self, e.pid, unmapped.handle, e.ktime, "cuMemUnmap")
        elif f == "cuMemRelease":
            if not last_reference(self.handle_refs, e.pid, e.handle):  # retains counted
                return
            imported = self.imports.pop((e.pid, e.handle), None)
            if imported is not None:
                imported[1].released_at = e.ktime
                import_gone(self, e.pid, e.handle, e.ktime, "cuMemRelease")
            a = self.allocations.get((e.pid, e.handle))
            if a is not None:
                a.released_at = e.ktime
        elif f == "cuMemAlloc":
            self.dev_sizes[(e.pid, e.ptr)] = e.size
        elif f == "cuMemFree":
            self.dev_sizes.pop((e.pid, e.ptr), None)
        elif f == "cuIpcGetMemHandle":
            self.ipc[e.ipc] = IpcExport(
                e.ipc, e.pid, e.ptr, e.ktime, size=self.dev_sizes.get((e.pid, e.ptr), 0)
            )
        elif f == "cuIpcOpenMemHandle":
            x = self.ipc.get(e.ipc)
            if opened_again(self, e.pid, e.ptr, x):
                return
            o = IpcOpen(e.pid, e.ptr, e.ktime, e.result)
            if x is not None:
                x.opens.append(o)
            self.ipc_opens[(e.pid, e.ptr)] = (x, o)
            if x is not None and x.pid != e.pid:
                self.growth.arrived(
                    self, e.pid, x.pid, f"ipc:{x.ipc}", f"ipc:{e.ptr:x}", x.size, e.ktime, out
                )
            out.append(
                LedgerFinding(
                    "imported",
                    e.pid,
                    e.ktime,
                    peer=x.pid if x else 0,
                    proof=Proof.HANDLE_BYTES if x else Proof.NONE,
                    ptr=e.ptr,
                    peer_ptr=x.ptr if x else 0,
                    memory=Memory.IPC,
                )
            )
        elif f == "cuIpcCloseMemHandle":
            if not last_reference(self.ipc_refs, e.pid, e.ptr):
                return
            got = self.ipc_opens.pop((e.pid, e.ptr), None)
            if got is not None:
                got[1].closed_at = e.ktime
                self.growth.gone(e.pid, f"ipc:{e.ptr:x}")
                after_death_over(self, e.pid, f"ipc:{e.ptr:x}", e.ktime, "cuIpcCloseMemHandle")
        else:
            self._on_pool_call(f, e, out)

    def _on_pool_call(self, f: str, e: CudaCall, out: list) -> None:
        """Stream-ordered pools: the pool goes as an fd (matched by its open file, as a VMM
        export), each allocation as 64 export bytes (matched by the bytes, as legacy IPC)."""
        if f == "cuMemPoolCreate":
            self.pools[(e.pid, e.handle)] = Pool(e.pid, e.handle, e.device, e.handle_types, e.ktime)
        elif f == "cuMemPoolExportToShareableHandle":
            p = self.pools.get((e.pid, e.handle))
            if p is None:  # created before the trace started
                p = self.pools[(e.pid, e.handle)] = Pool(e.pid, e.handle, -1, 0, e.ktime)
            if e.fd >= 0:
                via = "cuMemPoolExportToShareableHandle"
                known = self.holdings.get((e.pid, e.fd))
                p.exported.append((e.fd, ""))
                file = e.file or (known.file if known else "")
                self._hold(Holding(e.pid, e.fd, file, "exported", e.ktime, via=via))
        elif f == "cuMemPoolImportFromShareableHandle":
            held = self.holdings.get((e.pid, e.fd))
            file = e.file or (held.file if held else "")  # the kernel's, read at the call
            p = self.pool_of_file(file) if file else None
            imp = PoolImport(e.pid, e.handle, e.fd, file, e.ktime)
            if p is not None:
                p.imports.append(imp)
            self.pool_imports[(e.pid, e.handle)] = (p, imp)
            out.append(
                LedgerFinding(
                    "imported",
                    e.pid,
                    e.ktime,
                    peer=p.pid if p else 0,
                    file=file,
                    proof=Proof.STRUCT_FILE if p else Proof.NONE,
                    fd=e.fd,
                    handle=e.handle,
                    peer_handle=p.pool if p else 0,
                    memory=Memory.POOL,
                )
            )
        elif f == "cuMemPoolExportPointer":
            self.pool_ptrs[e.ipc] = PoolPtrExport(e.ipc, e.pid, e.ptr, e.ktime)
        elif f == "cuMemPoolImportPointer":
            px = self.pool_ptrs.get(e.ipc)
            pimp = PoolPtrImport(e.pid, e.ptr, e.handle, e.ktime)
            if px is not None:
                px.imports.append(pimp)
            self.pool_ptr_imports[(e.pid, e.ptr)] = (px, pimp)
            if px is not None and px.pid != e.pid:
                self.growth.arrived(
                    self, e.pid, px.pid, f"ptr:{px.data}", f"ptr:{e.ptr:x}", 0, e.ktime, out
                )
            out.append(
                LedgerFinding(
                    "imported",
                    e.pid,
                    e.ktime,
                    peer=px.pid if px else 0,
                    proof=Proof.EXPORT_DATA if px else Proof.NONE,
                    ptr=e.ptr,
                    peer_ptr=px.ptr if px else 0,
                    memory=Memory.POOL_POINTER,
                )
            )
        elif f == "cuMemFreeAsync":
            freed = self.pool_ptr_imports.pop((e.pid, e.ptr), None)
            if freed is not None:
                freed[1].freed_at = e.ktime
                self.growth.gone(e.pid, f"ptr:{e.ptr:x}")
                after_death_over(self, e.pid, f"ptr:{e.ptr:x}", e.ktime, "cuMemFreeAsync")
        elif f == "cuMemPoolDestroy":
            gone = self.pools.pop((e.pid, e.handle), None)
            if gone is not None:
                gone.destroyed_at = e.ktime
            ended = self.pool_imports.pop((e.pid, e.handle), None)
            if ended is not None:
                ended[1].destroyed_at = e.ktime

    # -- exits: where leaks are decided (``model/exits.py``) -----------------------------------------
    def leak(self, out: list, since: int, f: LedgerFinding) -> None:
        """A leak found at an exit, or ``unknown`` where the record that ends it (a close, a
        release) may be among records lost since ``since``."""
        out.append(self.unknown_if_lost(f, since))

    def _on_ProcessExit(self, e: ProcessExit, out: list) -> None:
        p = self._proc(e.pid)
        p.alive, p.code, p.exited_at = False, e.code, e.ktime
        p.comm = e.comm or p.comm
        out += files_held_after_exit(self, e)
        leaks_at_exit(self, e, out)
        for key in [k for k in self.pidfds if k[0] == e.pid]:
            del self.pidfds[key]
        for came in [k for k in self.came if k[0] == e.pid]:
            del self.came[came]
        for refs in (self.handle_refs, self.ipc_refs):  # what the exit let go
            for key in [k for k in refs if k[0] == e.pid]:
                del refs[key]
        self.growth.exited(e.pid)
