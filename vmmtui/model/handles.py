"""The refcount book: for every exported allocation, legacy IPC handle and pool pointer, who
opened it how many times and closed it how many times, who mapped it, who released what, and how
many bytes each exporter pins now. Data only (``HandleFact``, ``Pinned``), no words: the trace's
words (``trace/words.py``) turn facts into findings.

Folded from the driver calls the trace saw (``CudaCall``), the exits, and the clock. An import is
linked to its export by the caller's ``Link`` (the ledger matches a VMM import to its allocation
by the fd's open file); legacy IPC and pool pointers by their 64 bytes. What the book says:

- ``opened-twice``: a second cuIpcOpenMemHandle of the same 64 bytes in one process that the
  driver refuses (CUDA_ERROR_ALREADY_MAPPED: a second context); one it grants is a reference
  counted ("If the memory handle has already been opened by the current context, the reference
  count on the handle is incremented by 1 and the existing device pointer is returned",
  cuIpcOpenMemHandle), closed once per open, no finding. A second *import* of a VMM allocation is legal and
  is no finding: "Each time a recipient process imports a shareable handle, it needs to pair it
  with cuMemRelease" (CUDA Driver API, cuMemRelease) -- an import never paired is said at the
  importer's exit (``import-never-released``) or while it grows (``model/growth.py``);
- ``exported-never-imported``: no process opened it ``never_imported_ns`` after the export (live,
  on the clock), or by its exporter's exit or the end -- and only while the export still pins
  memory (``Pinning``: a copy of its fd still open somewhere). The 64 bytes of a legacy IPC
  handle or a pool pointer's export data pin nothing (cuIpcGetMemHandle takes no reference), and
  an exported fd closed at once (NCCL's proxy closes each as soon as it is sent) pins nothing:
  neither is a finding;
- ``released-twice``: a cuMemRelease with no reference left, counting every reference the
  driver counts: cuMemCreate, cuMemImportFromShareableHandle and cuMemRetainAllocationHandle
  each +1 ("The returned handle must be released with corresponding number of calls to
  cuMemRelease", cuMemRetainAllocationHandle), cuMemRelease -1 ("If handle is not a valid handle
  the behavior is undefined"); NCCL's retain then two releases is no finding. Also
  cuIpcCloseMemHandle of a pointer already closed;
- ``freed-while-mapped``: the exporter freed (cuMemFree) the pointer it exported as legacy IPC
  while an importer still has it open: "Calling cuMemFree on an exported memory region before
  calling cuIpcCloseMemHandle in the importing context will result in undefined behavior"
  (CUDA Driver API, cuIpcOpenMemHandle). Such a free is held *pending* for ``TEARDOWN_S``: a
  healthy teardown frees on both sides at once (NCCL's p2p transport frees its own buffer and
  closes its peer's in the same teardown, each rank on its own clock), so an importer that
  closes its pointer (or exits) within the window makes it ``freed-at-teardown``, a quiet fact
  in the past; one that still holds it past the window (or to the trace's end) makes it
  ``freed-while-mapped``, said then with the delay. Releasing
  a VMM handle while a peer maps the memory is legal and no finding: "The memory allocation will
  be freed when all outstanding mappings to the memory are unmapped and when all outstanding
  references to the handle (including its shareable counterparts) are also released. The
  generic memory handle can be freed when there are still outstanding mappings made with this
  handle" (CUDA Driver API, cuMemRelease);
- ``legacy-export-of-vmm``: cuIpcGetMemHandle refused on a pointer this process mapped with
  cuMemMap (legacy IPC cannot export VMM memory).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from vmmtui.model.findings import FindingKind, Proof
from vmmtui.model.policy import TEARDOWN_WINDOW_S
from vmmtui.model.roads import HandleType, handle_type

#: seconds after an export with no import before it is said ``exported-never-imported`` live
NEVER_IMPORTED_S = 30.0
#: the points a pinned-bytes series keeps (one per change)
SERIES_POINTS = 120
CUDA_SUCCESS = 0
#: cuIpcOpenMemHandle of 64 bytes this context has open already
CUDA_ERROR_ALREADY_MAPPED = 208
#: seconds a legacy cuMemFree under an importer's open waits for that importer's close (or
#: exit) before it is a problem: both sides of a teardown free and close in one shutdown, each
#: on its own clock (two NCCL ranks on two H200s: 0.41 s apart). The policy's one teardown window
#: for every kind of memory (``model/policy.py``, ``TEARDOWN_WINDOW_S``, where its measurements
#: are)
TEARDOWN_S = TEARDOWN_WINDOW_S

#: (importer pid, its import handle) → (exporter pid, the exporter's handle), or None
Link = Callable[[int, int], "tuple[int, int] | None"]


class Pinning(Protocol):
    """Whether an exported allocation (exporter pid, handle) still has a copy of an exported fd
    open in some process: the one way an export, by itself, pins memory (the ledger knows)."""

    def __call__(self, pid: int, handle: int) -> bool: ...


def _always(pid: int, handle: int) -> bool:
    return True


class Thing(StrEnum):
    """What was exported."""

    ALLOCATION = "allocation"
    IPC = "ipc"
    POOL_PTR = "pool-ptr"


@dataclass
class Export:
    """One exported thing and the opens of it, per importer."""

    thing: Thing
    pid: int
    #: the allocation's handle, or the exported pointer
    key: int
    at: int
    size: int = 0
    proof: Proof = Proof.NONE
    exported_as: HandleType = HandleType.NONE
    ipc: str = ""
    #: every open, ever (0: never imported)
    opened: int = 0
    said_never: bool = False
    gone: bool = False
    #: importer pid → its outstanding opens (import handles or pointers), oldest first
    opens: dict[int, list[int]] = field(default_factory=dict)
    closes: dict[int, int] = field(default_factory=dict)
    #: importers already told they hold two opens (until they drop under two)
    warned: set[int] = field(default_factory=set)


@dataclass(frozen=True)
class HandleFact:
    """One conclusion of the book: its kind, the process it is about and what proves it."""

    kind: FindingKind
    pid: int
    ktime: int
    thing: Thing
    #: the other process (the exporter for an importer's fact, an importer for the exporter's)
    peer: int = 0
    proof: Proof = Proof.NONE
    #: the handle or pointer it is about
    key: int = 0
    #: the exporter's handle or pointer (an importer's fact)
    exported: int = 0
    ipc: str = ""
    #: the importer's opens outstanding, and its closes so far
    opens: tuple[int, ...] = ()
    closes: int = 0
    size: int = 0
    #: when what it follows happened (the export, the first release)
    since: int = 0
    #: the CUresult the driver refused the call with (0: it did not refuse)
    refused: int = 0
    #: nanoseconds from a legacy free to the importer's close, exit or the moment said
    gap: int = 0
    #: how the importer let a freed pointer go (``closed``, ``exited``) or "" if it still holds
    via: str = ""


@dataclass(frozen=True)
class Pinned:
    """The bytes an exporter's exported memory pins now (its own handle or an importer's)."""

    pid: int
    ktime: int
    bytes: int
    buffers: int


def extend_series(
    series: tuple[tuple[int, int], ...], at: int, value: int, limit: int = SERIES_POINTS
) -> tuple[tuple[int, int], ...]:
    """``series`` of (time, bytes) with ``value`` at ``at`` (ns of the trace): one point per
    change, so a staircase within one millisecond is kept; a point at the same nanosecond (or
    earlier) replaces the last; the oldest go past ``limit``."""
    if series and series[-1][0] >= at:
        return (*series[:-1], (series[-1][0], value))
    return (*series, (at, value))[-limit:]


@dataclass
class _Freed:
    """A legacy free while an importer still had the pointer open, waiting ``TEARDOWN_S`` for
    that importer's close or exit (``HandleBook.freed``)."""

    x: Export
    importer: int
    at: int
    opens: tuple[int, ...]


@dataclass
class _Alloc:
    pid: int
    handle: int
    size: int
    released_at: int | None = None
    export: Export | None = None


class HandleBook:
    """The fold: ``call``, ``exit``, ``clock`` and ``finish`` return the facts each brings and the
    exporters whose pinned bytes changed."""

    def __init__(
        self,
        link: Link,
        never_imported_s: float = NEVER_IMPORTED_S,
        pinning: Pinning = _always,
        teardown_s: float = TEARDOWN_S,
    ) -> None:
        self.link = link
        self.pinning = pinning
        #: (pid, handle) → the references the driver counts on that handle value in that process
        #: (created, imported, retained, less released); a handle never seen made is not here
        self.refs: Counter[tuple[int, int]] = Counter()
        #: handles retained whose making the trace did not see (made before it began): their
        #: count is not known, so no release of them is ever said to be one too many
        self.unseen: set[tuple[int, int]] = set()
        self.never_imported_ns = int(never_imported_s * 1e9)
        self.teardown_ns = int(teardown_s * 1e9)
        #: legacy frees under an importer's open, waiting for its close (oldest first)
        self.freed: list[_Freed] = []
        self.allocs: dict[tuple[int, int], _Alloc] = {}
        self.exports: list[Export] = []
        self._waiting: deque[Export] = deque()  # exports not yet opened, oldest first
        self.by_bytes: dict[tuple[Thing, str], Export] = {}
        #: (pid, import handle or opened pointer, thing) → the export it opened
        self.opened: dict[tuple[int, int, Thing], Export] = {}
        #: (pid, handle or pointer, thing) → when it was released or closed
        self.released: dict[tuple[int, int, Thing], int] = {}
        self.mapped: dict[int, dict[int, tuple[int, int]]] = {}
        self.dev_sizes: dict[tuple[int, int], int] = {}
        self.dead: set[int] = set()
        self.pinned: dict[int, int] = {}

    # -- queries -----------------------------------------------------------------------------
    def waiting(self) -> bool:
        """Whether an export waits for its first open, or a legacy free for its importer's
        close (``clock`` may then have a fact to say)."""
        return bool(self._waiting or self.freed)

    def mapped_at(self, pid: int, ptr: int) -> tuple[int, int, int] | None:
        """(base, size, handle) of the cuMemMap'd range of ``pid`` that holds ``ptr``."""
        for base, (size, handle) in self.mapped.get(pid, {}).items():
            if base <= ptr < base + max(size, 1):
                return base, size, handle
        return None

    def explains(
        self, func: str, pid: int, handle: int, ptr: int, result: int = 0, ipc: str = ""
    ) -> bool:
        """A failed call the book words itself (a second release, a legacy export of VMM
        memory, a second open of IPC bytes this process has open): no generic refusal for it."""
        if func == "cuMemRelease":
            return (pid, handle, Thing.ALLOCATION) in self.released and not self.refs[(pid, handle)]
        if func == "cuIpcGetMemHandle":
            return self.mapped_at(pid, ptr) is not None
        if func == "cuIpcOpenMemHandle" and result == CUDA_ERROR_ALREADY_MAPPED:
            x = self.by_bytes.get((Thing.IPC, ipc))
            return x is not None and bool(x.opens.get(pid))
        return False

    def pins_of(self, pid: int) -> tuple[int, int]:
        """(bytes, buffers) that ``pid``'s exported memory pins now."""
        total = n = 0
        for x in self.exports:
            if x.pid != pid or x.gone:
                continue
            if x.thing is Thing.ALLOCATION:
                a = self.allocs.get((x.pid, x.key))
                own = a is not None and a.released_at is None and pid not in self.dead
            else:
                own = (pid, x.key) in self.dev_sizes and pid not in self.dead
            held = any(opens for ipid, opens in x.opens.items() if ipid not in self.dead)
            if own or held or self._importer_maps(x):
                total += x.size
                n += 1
        return total, n

    def held_by_importers(self) -> list[tuple[Export, list[int]]]:
        """Each export that a live process other than its exporter still opens or maps, with
        those processes: the memory that crossed processes and stays pinned by them (the
        exporter's own handle is its own memory, not theirs). The driver frees an allocation only
        when every handle and mapping of it is gone (CUDA Driver API, Virtual Memory Management:
        cuMemRelease "the memory will be released when all outstanding mappings are unmapped")."""
        out = []
        for x in self.exports:
            if x.gone:
                continue
            who = {ipid for ipid, opens in x.opens.items() if opens and ipid not in self.dead}
            who |= {
                pid
                for (pid, key, thing), src in self.opened.items()
                if src is x
                and pid not in self.dead
                and thing is Thing.ALLOCATION
                and any(h == key for _, h in self.mapped.get(pid, {}).values())
            }
            who.discard(x.pid)
            if who:
                out.append((x, sorted(who)))
        return out

    def _importer_maps(self, x: Export) -> bool:
        return any(
            src is x
            and pid not in self.dead
            and thing is Thing.ALLOCATION
            and any(h == key for _, h in self.mapped.get(pid, {}).values())
            for (pid, key, thing), src in self.opened.items()
        )

    # -- the fold ------------------------------------------------------------------------------
    def call(
        self,
        func: str,
        pid: int,
        t: int,
        result: int,
        *,
        handle: int = 0,
        ptr: int = 0,
        size: int = 0,
        fd: int = -1,
        handle_types: int = 0,
        ipc: str = "",
    ) -> tuple[list[HandleFact], list[Pinned]]:
        out: list[HandleFact] = []
        touched: set[int] = set()
        ok = result == CUDA_SUCCESS
        if func == "cuMemRelease":
            self._release(pid, handle, t, ok, out, touched)
        elif func == "cuIpcGetMemHandle" and not ok:
            where = self.mapped_at(pid, ptr)
            if where is not None:
                base, length, h = where
                a = self.allocs.get((pid, h))
                out.append(
                    HandleFact(FindingKind.LEGACY_EXPORT_OF_VMM, pid, t, Thing.IPC, key=ptr,
                               exported=h, size=length, since=base,
                               peer=a.pid if a and a.pid != pid else 0)
                )  # fmt: skip
        elif func == "cuIpcOpenMemHandle" and result == CUDA_ERROR_ALREADY_MAPPED:
            x = self.by_bytes.get((Thing.IPC, ipc))
            if x is not None and x.opens.get(pid):  # the driver refused the second open
                out.append(
                    HandleFact(FindingKind.OPENED_TWICE, pid, t, Thing.IPC, peer=x.pid,
                               proof=x.proof, key=x.opens[pid][0], exported=x.key, ipc=ipc,
                               opens=(*x.opens[pid], 0), closes=x.closes.get(pid, 0),
                               size=x.size, since=x.at, refused=result)
                )  # fmt: skip
        elif func == "cuIpcCloseMemHandle":
            self._close(pid, ptr, Thing.IPC, t, out, touched)
        elif func == "cuMemFreeAsync":
            self._close(pid, ptr, Thing.POOL_PTR, t, out, touched)
        elif ok:
            self._ok(func, pid, t, handle, ptr, size, fd, handle_types, ipc, out, touched)
        return out, self._pinned(touched, t)

    def _ok(self, func: str, pid: int, t: int, handle: int, ptr: int, size: int, fd: int,
            handle_types: int, ipc: str, out: list[HandleFact], touched: set[int]) -> None:  # fmt: skip
        if func == "cuMemCreate":
            self.allocs[(pid, handle)] = _Alloc(pid, handle, size)
            self.released.pop((pid, handle, Thing.ALLOCATION), None)
            self.refs[(pid, handle)] = 1
        elif func == "cuMemRetainAllocationHandle":
            # one more reference on the handle that maps ``ptr``, to be paired with a release
            self.released.pop((pid, handle, Thing.ALLOCATION), None)
            self.refs[(pid, handle)] += 1
        elif func == "cuMemExportToShareableHandle":
            a = self.allocs.setdefault((pid, handle), _Alloc(pid, handle, 0))
            if a.export is None:
                a.export = self._export(
                    Thing.ALLOCATION, pid, handle, t, a.size,
                    Proof.STRUCT_FILE if fd >= 0 else Proof.HANDLE_BYTES,
                    handle_type(handle_types), ipc,
                )  # fmt: skip
                touched.add(pid)
        elif func == "cuMemImportFromShareableHandle":
            self.released.pop((pid, handle, Thing.ALLOCATION), None)
            self.refs[(pid, handle)] += 1
            link = self.link(pid, handle)
            made = self.allocs.get(link) if link else None
            if made is not None and made.export is not None:
                self._open(made.export, pid, handle, Thing.ALLOCATION, t, out, touched)
        elif func == "cuMemMap":
            self.mapped.setdefault(pid, {})[ptr] = (size, handle)
            if (x := self.opened.get((pid, handle, Thing.ALLOCATION))) is not None:
                touched.add(x.pid)
        elif func == "cuMemUnmap":
            gone = self.mapped.get(pid, {}).pop(ptr, None)
            if gone and (x := self.opened.get((pid, gone[1], Thing.ALLOCATION))) is not None:
                touched.add(x.pid)
        elif func == "cuMemAlloc":
            self.dev_sizes[(pid, ptr)] = size
        elif func == "cuMemFree":
            self._free(pid, ptr, t, out, touched)
        elif func == "cuIpcGetMemHandle":
            if (Thing.IPC, ipc) not in self.by_bytes:
                self.by_bytes[(Thing.IPC, ipc)] = self._export(
                    Thing.IPC, pid, ptr, t, self.dev_sizes.get((pid, ptr), 0), Proof.HANDLE_BYTES,
                    HandleType.IPC_HANDLE, ipc,
                )  # fmt: skip
                touched.add(pid)
        elif func == "cuIpcOpenMemHandle":
            self.released.pop((pid, ptr, Thing.IPC), None)
            if (x := self.by_bytes.get((Thing.IPC, ipc))) is not None:
                self._open(x, pid, ptr, Thing.IPC, t, out, touched)
        elif func == "cuMemPoolExportPointer":
            if (Thing.POOL_PTR, ipc) not in self.by_bytes:
                self.by_bytes[(Thing.POOL_PTR, ipc)] = self._export(
                    Thing.POOL_PTR, pid, ptr, t, 0, Proof.EXPORT_DATA, HandleType.POOL_PTR, ipc
                )
        elif func == "cuMemPoolImportPointer":
            self.released.pop((pid, ptr, Thing.POOL_PTR), None)
            if (x := self.by_bytes.get((Thing.POOL_PTR, ipc))) is not None:
                self._open(x, pid, ptr, Thing.POOL_PTR, t, out, touched)

    def _export(self, thing: Thing, pid: int, key: int, t: int, size: int, proof: Proof,
                as_: HandleType, ipc: str) -> Export:  # fmt: skip
        x = Export(thing, pid, key, t, size, proof, as_, ipc)
        self.exports.append(x)
        self._waiting.append(x)
        return x

    def _open(self, x: Export, pid: int, key: int, thing: Thing, t: int,
              out: list[HandleFact], touched: set[int]) -> None:  # fmt: skip
        x.opened += 1
        opens = x.opens.setdefault(pid, [])
        opens.append(key)
        self.opened[(pid, key, thing)] = x
        touched.add(x.pid)
        if len(opens) >= 2 and pid not in x.warned and thing is Thing.POOL_PTR:
            x.warned.add(pid)
            out.append(
                HandleFact(FindingKind.OPENED_TWICE, pid, t, x.thing, peer=x.pid, proof=x.proof,
                           key=key, exported=x.key, ipc=x.ipc, opens=tuple(opens),
                           closes=x.closes.get(pid, 0), size=x.size, since=x.at)
            )  # fmt: skip

    def _drop_open(self, x: Export, pid: int, key: int) -> None:
        opens = x.opens.get(pid, [])
        if key in opens:
            opens.remove(key)
        x.closes[pid] = x.closes.get(pid, 0) + 1
        if len(opens) < 2:
            x.warned.discard(pid)

    def _release(self, pid: int, handle: int, t: int, ok: bool, out: list[HandleFact],
                 touched: set[int]) -> None:  # fmt: skip
        key = (pid, handle, Thing.ALLOCATION)
        left = self.refs.get((pid, handle))
        if key in self.released and not left and (pid, handle) not in self.unseen:
            # no reference left, retains counted
            src = self.opened.get(key)
            out.append(
                HandleFact(FindingKind.RELEASED_TWICE, pid, t, Thing.ALLOCATION, key=handle,
                           peer=src.pid if src else 0, since=self.released[key])
            )  # fmt: skip
            return
        if not ok:
            return
        if left:
            self.refs[(pid, handle)] = left - 1
            if left > 1:  # a retained (or imported twice) handle: references remain
                return
        self.released[key] = t
        if (x := self.opened.get(key)) is not None:  # an importer's handle
            self._drop_open(x, pid, handle)
            touched.add(x.pid)
        a = self.allocs.get((pid, handle))
        if a is None:
            return
        a.released_at = t
        if a.export is not None:  # legal while peers map it: their references keep it alive
            touched.add(pid)

    def _holds(self, x: Export, ipid: int) -> list[int]:
        """The opens (and mapped import handles) by which a live ``ipid`` holds ``x``."""
        if ipid in self.dead:
            return []
        maps = [
            h
            for (p, k, _), src in self.opened.items()
            if src is x and p == ipid
            for _, h in self.mapped.get(p, {}).values()
            if h == k
        ]
        return [*x.opens.get(ipid, []), *maps]

    def _freed_while_held(self, x: Export, t: int) -> None:
        """The importers that hold ``x`` as it is freed: each waits ``teardown_ns`` for its close
        (``_settle``), the problem said only if it does not come."""
        waiting = {(id(f.x), f.importer) for f in self.freed}
        for ipid, opens in x.opens.items():
            if self._holds(x, ipid) and (id(x), ipid) not in waiting:
                self.freed.append(_Freed(x, ipid, t, tuple(opens)))

    def _settle(self, t: int, out: list[HandleFact], via: str, end: bool = False) -> None:
        """The frees waiting for their importer: one that let go (``via``) is a quiet
        ``freed-at-teardown`` within the window and the problem past it; one still held past
        the window (or at the trace's ``end``) is the problem, said now."""
        left = []
        for f in self.freed:
            gap = t - f.at
            holds = bool(self._holds(f.x, f.importer))
            if holds and not end and gap <= self.teardown_ns:
                left.append(f)
                continue
            let_go = "" if holds else ("exited" if f.importer in self.dead else via)
            kind = (
                FindingKind.FREED_AT_TEARDOWN
                if let_go and gap <= self.teardown_ns
                else FindingKind.FREED_WHILE_MAPPED
            )
            x = f.x
            out.append(
                HandleFact(kind, x.pid, t, x.thing, peer=f.importer, proof=x.proof, key=x.key,
                           ipc=x.ipc, opens=f.opens, size=x.size, since=x.at, gap=gap,
                           via=let_go)
            )  # fmt: skip
        self.freed = left

    def _free(self, pid: int, ptr: int, t: int, out: list[HandleFact], touched: set[int]) -> None:
        self.dev_sizes.pop((pid, ptr), None)
        for x in self.exports:
            if x.thing is Thing.IPC and x.pid == pid and x.key == ptr and not x.gone:
                touched.add(pid)
                self._freed_while_held(x, t)

    def _close(self, pid: int, ptr: int, thing: Thing, t: int, out: list[HandleFact],
               touched: set[int]) -> None:  # fmt: skip
        key = (pid, ptr, thing)
        x = self.opened.get(key)
        if x is not None and ptr in x.opens.get(pid, []):
            self._drop_open(x, pid, ptr)
            if ptr not in x.opens.get(pid, []):
                self.released[key] = t
            touched.add(x.pid)
            if self.freed:
                self._settle(t, out, "closed")
            return
        if key in self.released:
            out.append(
                HandleFact(FindingKind.RELEASED_TWICE, pid, t, thing, key=ptr,
                           peer=x.pid if x else 0, proof=x.proof if x else Proof.NONE,
                           ipc=x.ipc if x else "", since=self.released[key])
            )  # fmt: skip

    def exit(self, pid: int, t: int) -> tuple[list[HandleFact], list[Pinned]]:
        """A process ended: its exports never opened are said; what it held goes."""
        self.dead.add(pid)
        out = [self._never(x, t) for x in self.exports if x.pid == pid and self._unsaid(x)]
        out += self._mapped_after_exit(pid, t)
        if self.freed:
            self._settle(t, out, "exited")
        touched = {x.pid for x in self.exports if pid in x.opens or x.pid == pid}
        for x in self.exports:
            x.gone = (
                x.gone
                or x.pid == pid
                and not any(o for ipid, o in x.opens.items() if ipid not in self.dead)
            )
        self.mapped.pop(pid, None)
        return out, self._pinned(touched, t)

    def _mapped_after_exit(self, pid: int, t: int) -> list[HandleFact]:
        """Importers that released their handles of the dead exporter's memory but still map it
        (the mapping alone keeps it alive; an unreleased handle is the ledger's finding)."""
        out = []
        for (ipid, key, thing), x in self.opened.items():
            if x.pid != pid or thing is not Thing.ALLOCATION or ipid in self.dead:
                continue
            if x.opens.get(ipid):
                continue
            for base, (size, h) in self.mapped.get(ipid, {}).items():
                if h == key:
                    out.append(
                        HandleFact(FindingKind.HELD_AFTER_EXPORTER_DIED, ipid, t, x.thing,
                                   peer=pid, proof=x.proof, key=base, exported=x.key,
                                   size=size or x.size, since=t)
                    )  # fmt: skip
        return out

    def clock(self, t: int) -> list[HandleFact]:
        """Exports waiting longer than the threshold with no open: said once, live; legacy
        frees still held past the teardown window: the problem, live."""
        out: list[HandleFact] = []
        if self.freed and t - self.freed[0].at > self.teardown_ns:
            self._settle(t, out, "")
        while self._waiting and t - self._waiting[0].at >= self.never_imported_ns:
            x = self._waiting.popleft()
            if self._unsaid(x):
                out.append(self._never(x, t))
        return out

    def finish(self, t: int) -> list[HandleFact]:
        """The end: exports never opened, and legacy frees still held (no close came)."""
        out: list[HandleFact] = []
        if self.freed:
            self._settle(t, out, "", end=True)
        return out + [self._never(x, t) for x in self.exports if self._unsaid(x)]

    def _unsaid(self, x: Export) -> bool:
        """Not opened, not said yet, and still pinning memory by itself: an allocation's
        exported fd open somewhere (64 bytes of IPC or export data pin nothing)."""
        return (
            not x.opened
            and not x.said_never
            and not x.gone
            and x.thing is Thing.ALLOCATION
            and self.pinning(x.pid, x.key)
        )

    def _never(self, x: Export, t: int) -> HandleFact:
        x.said_never = True
        return HandleFact(FindingKind.EXPORTED_NEVER_IMPORTED, x.pid, t, x.thing, proof=x.proof,
                          key=x.key, ipc=x.ipc, size=x.size, since=x.at)  # fmt: skip

    def _pinned(self, pids: set[int], t: int) -> list[Pinned]:
        out = []
        for pid in sorted(pids):
            if not any(x.pid == pid for x in self.exports):
                continue
            now, n = self.pins_of(pid)
            if self.pinned.get(pid) != now:
                self.pinned[pid] = now
                out.append(Pinned(pid, t, now, n))
        return out
