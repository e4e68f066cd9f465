"""Fds the driver dups inside its own calls are the driver's. libcuda's
``cuMemPoolImportFromShareableHandle`` dups the fd it is handed and keeps the dup for the pool
(NVIDIA's streamOrderedAllocationIPC: its importer closes the fd it received, and the driver's
dup stays to the exit): a dup the program never made, which no ``close`` of the program's could
fix. The CUDA Driver API documents what the program owns after an import -- the pool or the
handle, released by ``cuMemPoolDestroy`` or ``cuMemRelease`` ("the imported memory pool ... must
be destroyed", cuMemPoolImportFromShareableHandle) -- not the driver's own fds.

A dup is the driver's when its thread was inside a traced driver call as it was made: the
uprobe's record of a call says its thread, when it began and how long it ran (``CudaCall``
``ktime`` and ``duration_ns``), and the dup's record its thread and time. Records come in the
kernel's order, so the call (stamped at its start) is folded before the dups inside it; a call
whose record came late (it ran past the reorder window) marks the dups it holds when it comes.
A driver's dup is marked by its ``via``: the driver function, in place of the syscall's name."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from vmmtui.model.entries import Holding
from vmmtui.stream.observed import CudaCall, FdDuplicated, base_name

if TYPE_CHECKING:
    from vmmtui.model.ledger import Ledger

#: the newest dups kept per thread, for a call whose record came after them
RECENT = 8


def is_drivers(h: Holding) -> bool:
    """Whether ``h`` is a dup the driver made inside one of its calls."""
    return h.how == "dup" and h.via.startswith("cu")


class DriverCalls:
    """Per thread, the driver call it was last seen inside, and its newest dups."""

    def __init__(self) -> None:
        #: (pid, tid) → (start, end, function) of the newest driver call
        self.inside: dict[tuple[int, int], tuple[int, int, str]] = {}
        #: (pid, tid) → its newest dups (when, new fd)
        self.recent: dict[tuple[int, int], deque[tuple[int, int]]] = {}

    def called(self, ledger: Ledger, e: CudaCall) -> None:
        """A driver call of ``e.tid``, from ``e.ktime`` for ``e.duration_ns``: dups of that
        thread inside it are the driver's (those already folded are marked now)."""
        key, end = (e.pid, e.tid), e.ktime + e.duration_ns
        func = base_name(e.func)
        self.inside[key] = (e.ktime, end, func)
        for at, fd in self.recent.get(key, ()):
            h = ledger.holdings.get((e.pid, fd))
            if e.ktime <= at <= end and h is not None and h.how == "dup" and h.since == at:
                h.via = func

    def of(self, e: FdDuplicated) -> str:
        """The driver function ``e`` was made inside, or "" (the program's own dup)."""
        key = (e.pid, e.tid)
        recent = self.recent.get(key)
        if recent is None:
            recent = self.recent[key] = deque(maxlen=RECENT)
        recent.append((e.ktime, e.fd))
        inside = self.inside.get(key)
        return inside[2] if inside is not None and inside[0] <= e.ktime <= inside[1] else ""

    def exited(self, pid: int) -> None:
        for key in [k for k in (*self.inside, *self.recent) if k[0] == pid]:
            self.inside.pop(key, None)
            self.recent.pop(key, None)


def duplicated(ledger: Ledger, e: FdDuplicated) -> None:
    """A copy of an fd of interest is one too (the driver's, where made inside its call); a dup
    of any other fd is nothing to hold, and one onto an fd of interest (``dup2``) closed that
    fd."""
    old = ledger.holdings.get((e.pid, e.old))
    if e.fd < 0:
        return
    if old is None:
        ledger.close_fd(e.pid, e.fd, e.ktime)
        return
    file = e.file or old.file
    kind = old.kind if old.file == file else ""
    via = ledger.driver.of(e) or e.call
    ledger._hold(Holding(e.pid, e.fd, file, "dup", e.ktime, e.pid, e.old, via, kind=kind))


def drivers_at_exit(ledger: Ledger, pid: int) -> dict[str, list[int]]:
    """The driver's dups ``pid`` still holds as it exits, by the file they name: they belong to
    the import the driver made them for (its finding carries them)."""
    out: dict[str, list[int]] = {}
    for fd in sorted(ledger.fds_of(pid)):
        h = ledger.holdings[(pid, fd)]
        if is_drivers(h) and h.file:
            out.setdefault(h.file, []).append(fd)
    ledger.driver.exited(pid)
    return out
