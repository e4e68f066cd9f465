"""The ledger's entries: who holds which fd of which open file since when, what travelled between
processes, the CUDA allocations, IPC handles and pools with their importers, and the records the
kernel lost (per CPU and per window of its clock). Plain dataclasses: ``ledger.Ledger`` folds the
trace's events into them; the exporters (Prometheus, OpenTelemetry, Perfetto) read them."""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field

from vmmtui.stream.observed import SocketEnd, TraceLost


@dataclass
class Holding:
    """One fd of one process naming an open file: how it got there, and until when."""

    pid: int
    fd: int
    file: str
    #: created (memfd_create) | exported (cuMemExportToShareableHandle) | received (SCM_RIGHTS)
    #: | taken (pidfd_getfd) | dup | inherited (fork) | sent (an fd first seen sent) | present
    #: (memory open before the trace) | polled (any other fd polling saw)
    how: str
    since: int
    source_pid: int = 0
    source_fd: int = -1
    #: the call it came by (``SCM_RIGHTS``, ``pidfd_getfd``, ``fork``, ``dup2``, the export),
    #: with the socket or the pidfd it came through
    via: str = ""
    closed_at: int | None = None
    sock: SocketEnd | None = None
    pidfd: int = -1
    #: what the open file is as the kernel said it at a send (``trace.records.file_kind``:
    #: ``socket``, ``pipe``, ``memfd``…); "" where no send of it was seen
    kind: str = ""


@dataclass(frozen=True)
class Pin:
    """One thing that keeps an allocation's memory alive: ``pid``'s ``handle`` (not released),
    ``fd`` (``how`` it came), ``exported fd`` (its file not yet seen), ``import`` (a handle) or ``mapping`` (at ``value``)."""

    pid: int
    what: str
    value: int
    how: str = ""


@dataclass
class Transfer:
    """One fd that went from one process to another, matched by its open file."""

    file: str
    how: str  # SCM_RIGHTS | pidfd_getfd
    from_pid: int
    from_fd: int
    to_pid: int
    to_fd: int
    sent_at: int
    received_at: int
    #: the socket it went over (SCM_RIGHTS), the pidfd it was taken through (pidfd_getfd)
    sock: SocketEnd | None = None
    pidfd: int = -1


@dataclass
class Mapping:
    pid: int
    handle: int
    ptr: int
    size: int
    at: int
    unmapped_at: int | None = None


@dataclass
class Import:
    """An importer's handle of someone's allocation (from an fd it holds)."""

    pid: int
    handle: int
    fd: int
    file: str
    at: int
    released_at: int | None = None


@dataclass
class Allocation:
    """A cuMemCreate'd allocation and everything that happened to it, in every process."""

    pid: int
    handle: int
    size: int
    device: int
    handle_types: int
    created_at: int
    released_at: int | None = None
    #: the (fd, file) pairs it was exported as; file "" until the fd is seen in a syscall
    exported: list[tuple[int, str]] = field(default_factory=list)
    imports: list[Import] = field(default_factory=list)
    mappings: list[Mapping] = field(default_factory=list)


@dataclass
class IpcOpen:
    pid: int
    ptr: int
    at: int
    result: int
    closed_at: int | None = None


@dataclass
class IpcExport:
    """A legacy IPC handle (64 bytes): its exporter and every process that opened it."""

    ipc: str
    pid: int
    ptr: int
    at: int
    opens: list[IpcOpen] = field(default_factory=list)
    #: the bytes cuMemAlloc gave at ``ptr`` (0 where the trace did not see it)
    size: int = 0


@dataclass
class PoolImport:
    """An importer's pool made from a pool's fd (cuMemPoolImportFromShareableHandle)."""

    pid: int
    pool: int
    fd: int
    file: str
    at: int
    destroyed_at: int | None = None


@dataclass
class Pool:
    """A cuMemPoolCreate'd pool: the fds it was exported as and the pools imported from them."""

    pid: int
    pool: int
    device: int
    handle_types: int
    created_at: int
    destroyed_at: int | None = None
    exported: list[tuple[int, str]] = field(default_factory=list)
    imports: list[PoolImport] = field(default_factory=list)


@dataclass
class PoolPtrImport:
    pid: int
    ptr: int
    pool: int
    at: int
    freed_at: int | None = None


@dataclass
class PoolPtrExport:
    """One pool allocation exported as 64 bytes of CUmemPoolPtrExportData, and its importers."""

    data: str
    pid: int
    ptr: int
    at: int
    imports: list[PoolPtrImport] = field(default_factory=list)


@dataclass
class ProcRecord:
    pid: int
    ppid: int = 0
    comm: str = ""
    exe: str = ""
    alive: bool = True
    code: int | None = None
    exited_at: int | None = None


@dataclass
class Pending:
    pid: int
    fd: int
    at: int
    #: the socket it was sent over
    sock: SocketEnd
    #: what the file is, as the kernel said it at the send ("" where not read)
    kind: str = ""


@dataclass
class Early:
    """A receive folded before any send of its file: it waits ``window_ns`` for the send."""

    pid: int
    fd: int
    file: str
    at: int
    #: the socket it was received on
    sock: SocketEnd
    matched: bool = False
    #: (receiving socket, file): where its send is looked for (``matching``)
    key: tuple[str, str] = ("", "")


@dataclass
class Losses:
    """The records lost, per CPU and per window of the kernel's clock: overlapping or touching
    windows are merged (a sustained loss is one window), kept sorted by their start."""

    by_cpu: Counter[int] = field(default_factory=Counter)
    #: [first, last, count], merged
    windows: list[list[int]] = field(default_factory=list)
    #: records lost in windows not known (an old recording's TraceLost): every conclusion is unknown
    unplaced: int = 0

    @property
    def total(self) -> int:
        return sum(self.by_cpu.values())

    def add(self, e: TraceLost) -> None:
        self.by_cpu[e.cpu] += e.count
        first, last = e.t_first_ns, e.t_last_ns or e.t_first_ns
        if not first:
            self.unplaced += e.count
            return
        starts = [w[0] for w in self.windows]
        i = bisect.bisect_right(starts, first)
        if i and self.windows[i - 1][1] >= first:  # joins the window before it
            i -= 1
            w = self.windows[i]
            w[1], w[2] = max(w[1], last), w[2] + e.count
        else:
            self.windows.insert(i, [first, last, e.count])
            w = self.windows[i]
        while i + 1 < len(self.windows) and self.windows[i + 1][0] <= w[1]:  # swallows the next
            nxt = self.windows.pop(i + 1)
            w[1], w[2] = max(w[1], nxt[1]), w[2] + nxt[2]

    def between(self, t1: int, t2: int) -> tuple[int, int, int]:
        """(records lost, first, last) in the windows that overlap [t1, t2]; (0, 0, 0): none."""
        if self.unplaced:
            return self.unplaced + sum(w[2] for w in self.windows), 0, 0
        n, lo, hi = 0, 0, 0
        for first, last, count in self.windows:
            if first > t2:
                break
            if last >= t1:
                n += count
                lo = lo or first
                hi = max(hi, last)
        return n, lo, hi


@dataclass
class FileMap:
    """One ``mmap`` of a file that may carry memory: it pins the file's memory until ``munmap``
    (or ``mremap`` away), exec or exit, whether or not any fd of the file stays open (mmap(2):
    "closing the file descriptor does not unmap the region")."""

    pid: int
    file: str
    addr: int
    length: int
    at: int
    fd: int = -1
    #: what the file is as the kernel named it at the call (``memfd:x``, ``/dev/shm/x``)
    kind: str = ""


@dataclass
class HeldAfterDeath:
    """A process that still pinned memory when the process that made it died: said then, and
    said again, in the past, when its last pin goes (``released-after-exporter-died``)."""

    pid: int
    #: the exporter that died, when, and how it ended (its wait status)
    peer: int
    died_at: int
    status: int
    memory: str
    file: str = ""
    handle: int = 0
    ptr: int = 0
    size: int = 0
    name: str = ""
