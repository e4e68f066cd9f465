"""Bytes pinned across live processes now, and the budget that weighs them at a checkpoint.

What counts is memory that crossed processes and that a live process other than its maker still
pins: CUDA exports a live importer still opens or maps (the refcount book), and memory files
(memfd, /dev/shm, dma-buf) a live process received or took (eBPF: the ledger's holdings;
polling: the fds kcmp saw arrive), sized by the kernel (``stat`` of the fd, still naming that
file), each file once. One measure for ``vmmtui.tracing(max_pinned_bytes=)`` at a block's end,
``pytest --vmmtui-max-pinned`` at a test's end and ``vmmtui trace --max-pinned`` at every change
of the run (its peak): the policy's "over budget" (``model/policy.py``). Facts only; words come
from ``words.verdict``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from vmmtui.model.policy import CudaPin, FilePin, MappingPin, Pin
from vmmtui.stream.events import Arrival, Event, FdOpened, MappingSeen
from vmmtui.stream.observed import MEMORY_FILES, LedgerFinding, PinnedBytes, TraceClock

if TYPE_CHECKING:
    from vmmtui.model.world import World

#: the open files that carry memory whose size ``os.stat`` of the fd tells (a GPU fd's is the
#: driver's: counted from the refcount book instead)
SIZED_FILES = ("memfd", "shm", "dmabuf")
#: how polling saw a memory fd come from another process (kcmp: one open file description)
CROSSED = (Arrival.ARRIVED, Arrival.UNKNOWN)


def arrived(e: Event) -> bool:
    """A memory fd polling saw arrive from another process (the ledger keeps it unnamed)."""
    return isinstance(e, FdOpened) and e.how in CROSSED and e.kind in MEMORY_FILES


def mapped(e: Event) -> bool:
    """A mapping polling saw of a memory file that came from another process."""
    return isinstance(e, MappingSeen) and e.how in CROSSED and e.source is not None


def pinned_now(
    world: World,
    came: Iterable[FdOpened] = (),
    maps: dict[tuple[int, int, int], MappingSeen] | None = None,
) -> tuple[int, list[Pin]]:
    """The bytes pinned across live processes now, and what pins them (``came``: the memory fds
    polling saw arrive; ``maps``: the mappings it saw of such files, by (pid, dev, ino))."""
    total = 0
    pins: list[Pin] = []
    for x, importers in world.refs.book.held_by_importers():
        total += x.size
        pins.append(CudaPin(x.pid, str(x.thing), x.key, x.size, tuple(importers)))
    ledger = world.ledger
    held: list[tuple[int, int, str, str]] = []  # pid, fd, how, the target it must still name
    for h in list(ledger.holdings.values()):
        if h.how not in ("received", "taken") or not ledger.alive(h.pid):
            continue
        kind = ledger.file_kind(h.file, h.kind)
        if not kind or kind in SIZED_FILES:  # a kind not seen may carry memory
            held.append((h.pid, h.fd, h.how, ""))
    held += [(e.pid, e.fd, "received", e.target) for e in came if e.kind != "gpu"]
    seen: set[tuple[int, int]] = set()
    for pid, fd, how, target in held:
        path = f"/proc/{pid}/fd/{fd}"
        try:
            if target and os.readlink(path) != target:
                continue  # the number names another file now: that one was closed
            st = os.stat(path)
        except OSError:
            continue  # closed since, or the process is gone: it pins nothing now
        if (st.st_dev, st.st_ino) in seen:
            continue
        seen.add((st.st_dev, st.st_ino))
        total += st.st_size
        pins.append(FilePin(pid, fd, st.st_size, how))
    # polling: what came to a live process and is still mapped there, its fd closed or not
    # (mmap(2): closing the fd does not unmap; the bytes are the mapping's length now)
    for (pid, dev, ino), m in sorted((maps or {}).items()):
        if (dev, ino) in seen or (size := mapped_bytes(pid, dev, ino)) == 0:
            continue
        seen.add((dev, ino))
        total += size
        pins.append(MappingPin(pid, m.path, size, str(m.how)))
    return total, pins


def mapped_bytes(pid: int, dev: int, ino: int) -> int:
    """The bytes ``pid`` maps of the file (dev, ino) now, from ``/proc/PID/maps`` (0: none, or
    the process is gone)."""
    try:
        with open(f"/proc/{pid}/maps") as f:
            lines = f.read().splitlines()
    except OSError:
        return 0
    total = 0
    for line in lines:
        parts = line.split(None, 5)
        if len(parts) < 5 or int(parts[4]) != ino:
            continue
        major, minor = (int(x, 16) for x in parts[3].split(":"))
        if os.makedev(major, minor) == dev:
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            total += hi - lo
    return total


#: seconds between two measures of a run's pins where nothing that pins came (a tick, a change of
#: the book's bytes): /proc is read at most this often
EVERY_S = 0.1


@dataclass
class Budget:
    """``vmmtui trace --max-pinned``: a sink of the run (``feed``) that measures the bytes pinned
    across live processes whenever a share, an import or the book's bytes change (and on the
    clock's ticks, at most every ``EVERY_S``), and keeps the peak and what pinned it. Over the
    budget once is over it: the run's exit says so."""

    world: World
    limit: int
    peak: int = 0
    peak_pins: list[Pin] = field(default_factory=list)
    #: the kernel's time (ns) of the event at which the peak was measured, and of the first
    peak_at: int = 0
    first_at: int = 0
    came: list[FdOpened] = field(default_factory=list)
    maps: dict[tuple[int, int, int], MappingSeen] = field(default_factory=dict)
    _last: float = 0.0

    @property
    def over(self) -> bool:
        return self.peak > self.limit

    def feed(self, e: Event) -> None:
        if not self.first_at and isinstance(t := getattr(e, "ktime", 0), int):
            self.first_at = t
        if arrived(e):
            self.came.append(e)  # type: ignore[arg-type]
        elif mapped(e):
            self.maps[(e.pid, e.dev, e.ino)] = e  # type: ignore[attr-defined,assignment]
        elif not isinstance(e, LedgerFinding | PinnedBytes | TraceClock | FdOpened):
            return
        now = time.monotonic()
        share = isinstance(e, LedgerFinding) and e.kind in ("shared", "imported")
        if not share and not arrived(e) and not mapped(e) and now - self._last < EVERY_S:
            return
        self._last = now
        total, pins = pinned_now(self.world, self.came, self.maps)
        if total > self.peak:
            self.peak, self.peak_pins = total, pins
            self.peak_at = int(getattr(e, "ktime", 0) or 0)

    def close(self) -> None:
        """Nothing to close (a sink of the run, closed with the exporters)."""
