"""Which calls of a program matter: the one rule behind the call timeline's frames, the programs
panel's call rows and the event log's lines, so that "call N" means the same call everywhere.

A call matters unless it is a ``close`` or a ``dup`` of an fd that never held anything of
interest (a Python program closes hundreds at its start). The fds of interest are those a call
made, received, took, exported or duplicated, and those polling (or a trace's frame 0) saw open.
"""

from __future__ import annotations

from collections.abc import Collection

from vmmtui.stream.events import Event, FdClosed, FdOpened, ProcessGone, SharedFile
from vmmtui.stream.observed import (
    CudaCall,
    FdCloseCall,
    FdDuplicated,
    FdsReceived,
    FdsSent,
    FdTaken,
    MemfdCreated,
    ProcessExit,
    ProcessForked,
    TraceCall,
    base_name,
)

#: the driver calls whose fd is the memory itself
EXPORTS = ("cuMemExportToShareableHandle", "cuMemPoolExportToShareableHandle")


def closed_by(held: Collection[int], e: FdCloseCall) -> list[int]:
    """The fds of interest a ``close`` (or ``close_range``) names."""
    if e.call == "close_range":
        return sorted(fd for fd in held if e.fd <= fd <= e.last)
    return [e.fd] if e.fd in held else []


def matters(held: Collection[int], e: TraceCall) -> bool:
    """Whether a call of a process whose fds of interest are ``held`` matters."""
    if isinstance(e, FdCloseCall):
        return bool(closed_by(held, e))
    if isinstance(e, FdDuplicated):
        return e.old in held
    return True


def gained(e: TraceCall) -> list[int]:
    """The fds of interest a call that matters gives its process."""
    if isinstance(e, FdDuplicated | MemfdCreated | FdTaken):
        return [e.fd] if e.fd >= 0 else []
    if isinstance(e, FdsReceived):
        return list(e.fds)
    if isinstance(e, FdsSent):
        return list(e.fds) if e.result >= 0 else []
    if isinstance(e, CudaCall) and e.fd >= 0 and e.result == 0 and base_name(e.func) in EXPORTS:
        return [e.fd]
    return []


class Interest:
    """The fds of interest of every process, as events come; ``see`` says whether a call
    matters (what the timeline cuts a frame at)."""

    def __init__(self) -> None:
        self.held: dict[int, set[int]] = {}

    def see(self, e: Event) -> bool:
        if isinstance(e, TraceCall):
            held = self.held.setdefault(e.pid, set())
            if not matters(held, e):
                return False
            if isinstance(e, FdCloseCall):
                if e.result >= 0:
                    held.difference_update(closed_by(held, e))
            elif isinstance(e, ProcessForked):
                self.held[e.child] = set(held)
            elif isinstance(e, ProcessExit):
                held.clear()
            else:
                held.update(gained(e))
            return True
        if isinstance(e, FdOpened):
            self.held.setdefault(e.pid, set()).add(e.fd)
        elif isinstance(e, FdClosed):
            self.held.get(e.pid, set()).discard(e.fd)
        elif isinstance(e, SharedFile):
            for h in e.holders:
                self.held.setdefault(h.pid, set()).add(h.fd)
        elif isinstance(e, ProcessGone):
            self.held.pop(e.pid, None)
        return False
