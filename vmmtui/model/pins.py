"""What pins a process's copy of another's memory file: every fd naming the open file (the one
received, its dups, copies inherited across fork) and every mapping of it. A memfd, a /dev/shm
file or a dma-buf lives until "the last fd and mapping" go: closing an fd does not unmap
(mmap(2): "closing the file descriptor does not unmap the region"), and a dup is "a copy of the
file descriptor" that refers to the same open file description (dup(2)). So the ledger follows
how each file first came to a process (``Ledger.came``), and asks here whether anything of it is
left there; when the last pin goes, the memory's hold by that process is over (``let_go``). No
words, no /proc: the ledger's fold only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmmtui.model.entries import Pin

if TYPE_CHECKING:
    from vmmtui.model.entries import Holding
    from vmmtui.model.ledger import Ledger

#: how a file came from another process (an fd made here, or inherited, did not come)
CAME = ("received", "taken")


def pins_on(ledger: Ledger, pid: int, file: str) -> list[Pin]:
    """``pid``'s pins on the open file ``file`` now: its fds naming it, then its mappings."""
    out = []
    for fd in sorted(ledger.fds_of(pid)):
        h = ledger.holdings[(pid, fd)]
        if h.file == file:
            out.append(Pin(pid, "fd", fd, h.how))
    for m in ledger.maps.get(pid, {}).values():
        if m.file == file:
            out.append(Pin(pid, "mapping", m.addr, "mmap"))
    return out


def came_from(ledger: Ledger, h: Holding) -> None:
    """Note how ``h``'s file first came to its process from another (received or taken): from
    now every fd and mapping of it there pins the other's memory. A memory file's arrival is a
    pin that may be one of a growing pile (``model/growth.py``)."""
    if h.how not in CAME or not h.file:
        return
    key = (h.pid, h.file)
    if key in ledger.came or ledger.makers.get(h.file) == h.pid:
        return
    ledger.came[key] = h
    peer = h.source_pid or ledger.makers.get(h.file, 0)
    if not peer or peer == h.pid or not _memory(ledger, h):
        return
    pin = f"file:{h.file}"
    a = ledger.allocation_of_file(h.file)
    if a is not None:  # a driver export's fd: the allocation it carries is the piece
        ledger.growth.arrived(
            ledger, h.pid, a.pid, f"alloc:{a.pid}:{a.handle:x}", pin, a.size, h.since,
            ledger.later,
        )  # fmt: skip
    else:
        ledger.growth.arrived(ledger, h.pid, peer, pin, pin, 0, h.since, ledger.later)


def _memory(ledger: Ledger, h: Holding) -> bool:
    from vmmtui.model.findings import carries_memory

    return carries_memory(ledger.file_kind(h.file, h.kind))


def let_go(ledger: Ledger, pid: int, file: str, at: int, via: str) -> None:
    """One of ``pid``'s pins on ``file`` went (``via``: close, munmap, mremap, exec, exit): if it
    was the last, its hold on the memory is over."""
    if pins_on(ledger, pid, file):
        return
    ledger.came.pop((pid, file), None)
    ledger.growth.gone(pid, f"file:{file}")
    ledger.after_death_over(pid, f"file:{file}", at, via)
