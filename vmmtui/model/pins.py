"""What pins a process's copy of another's memory file: every fd naming the open file (the one
received, its dups, copies inherited across fork) and every mapping of it. A memfd, a /dev/shm
file or a dma-buf lives until "the last fd and mapping" go: closing an fd does not unmap
(mmap(2): "closing the file descriptor does not unmap the region"), and a dup is "a copy of the
file descriptor" that refers to the same open file description (dup(2)). So the ledger follows
how each file first came to a process (``Ledger.came``), and asks here whether anything of it is
left there; when the last pin goes, the memory's hold by that process is over (``let_go``). No
words, no /proc: the ledger's fold only."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

from vmmtui.model import kept
from vmmtui.model.entries import FileMap, Pin
from vmmtui.model.findings import carries_memory
from vmmtui.stream.observed import FileSized, LedgerFinding, MemoryMapped, MemoryUnmapped

if TYPE_CHECKING:
    from vmmtui.model.entries import Holding, IpcExport
    from vmmtui.model.ledger import Ledger

#: how a file came from another process (an fd made here, or inherited, did not come)
CAME = ("received", "taken")
#: a ``/dev/shm`` file's name as a mapping's record names it (``shm_open(3)``'s files)
SHM = "/dev/shm/"


def pins_on(ledger: Ledger, pid: int, file: str) -> list[Pin]:
    """``pid``'s pins on the open file ``file`` that came from another process: its fds naming
    it, then its mappings, made since the file came (a copy inherited from the maker before it
    was ever sent is the process tree's own, not a share: no pin on another's memory)."""
    came = ledger.came.get((pid, file))
    since = came.since if came is not None and came.pid == pid else 0
    out = []
    holdings = ledger.holdings
    for fd in ledger.fds_of(pid):
        h = holdings[(pid, fd)]
        if h.file == file and (h.since >= since or h is came):
            out.append(Pin(pid, "fd", fd, h.how))
    out.sort(key=lambda p: p.value)
    for m in ledger.maps.get(pid, {}).values():
        if m.file == file and m.at >= since:
            out.append(Pin(pid, "mapping", m.addr, "mmap"))
    return out


def _pinned(ledger: Ledger, pid: int, file: str) -> bool:
    """Whether ``pins_on`` has anything (asked at every close of a file that came: no list)."""
    came = ledger.came.get((pid, file))
    since = came.since if came is not None and came.pid == pid else 0
    holdings = ledger.holdings
    for fd in ledger.fds_of(pid):
        h = holdings[(pid, fd)]
        if h.file == file and (h.since >= since or h is came):
            return True
    return any(m.file == file and m.at >= since for m in ledger.maps.get(pid, {}).values())


def came_from(ledger: Ledger, h: Holding) -> None:
    """Note how ``h``'s file first came to its process from another (received or taken): from
    now every fd and mapping of it there pins the other's memory. A memory file's arrival is a
    pin that may be one of a growing pile (``model/growth.py``). Asked again when a receive
    folded before its send learns its sender (the pile then counts it)."""
    if h.how not in CAME or not h.file:
        return
    key = (h.pid, h.file)
    if ledger.came.get(key, h) is not h or ledger.makers.get(h.file) == h.pid:
        return
    ledger.came[key] = h
    peer = h.source_pid or ledger.makers.get(h.file, 0)
    if not peer or peer == h.pid:
        return
    a = ledger.allocation_of_file(h.file) if ledger.allocations else None
    if a is None and not carries_memory(h.kind or ledger.file_kind(h.file)):
        return
    pin = f"file:{h.file}"
    if a is not None:  # a driver export's fd: the allocation it carries is the piece
        ledger.growth.arrived(
            ledger, h.pid, a.pid, f"alloc:{a.pid}:{a.handle:x}", pin, a.size, h.since,
            ledger.later,
        )  # fmt: skip
    else:
        ledger.growth.arrived(ledger, h.pid, peer, pin, pin, 0, h.since, ledger.later)


def let_go(ledger: Ledger, pid: int, file: str, at: int, via: str) -> None:
    """One of ``pid``'s pins on ``file`` went (``via``: close, munmap, mremap, exec, exit): if it
    was the last, its hold on the memory is over."""
    if _pinned(ledger, pid, file):
        return
    ledger.came.pop((pid, file), None)
    ledger.growth.gone(pid, f"file:{file}")
    after_death_over(ledger, pid, f"file:{file}", at, via)


def mapped(ledger: Ledger, e: MemoryMapped) -> None:
    """``mmap`` of a file that may carry memory: the mapping pins it until munmap, exec or exit,
    fd open or not. Its end (offset + length) is a size the file has at least (mmap(2): pages
    past the end of the file raise SIGBUS), counted in the bytes of a pile that holds it; a
    ``/dev/shm`` file mapped by its name where another process made it is a pin on that one's
    memory (``shm_open(3)`` by name: torch's ``file_system`` strategy)."""
    if e.result < 0 or not e.file:
        return
    ledger.maps.setdefault(e.pid, {})[e.addr] = FileMap(
        e.pid, e.file, e.addr, e.length, e.ktime, e.fd, e.kind
    )
    growth, end = ledger.growth, e.offset + e.length
    growth.sized(ledger, f"file:{e.file}", end, e.ktime, ledger.later)
    if not e.kind.startswith(SHM) or (e.pid, e.file) in ledger.came:
        return
    growth.sized(ledger, f"shm:{e.kind}", end, e.ktime, ledger.later)
    maker = growth.named.get(e.kind)
    if maker is None or not ledger.alive(maker):
        growth.named[e.kind] = e.pid
    elif maker != e.pid:
        growth.arrived(
            ledger, e.pid, maker, f"shm:{e.kind}", f"map:{e.addr:x}", end, e.ktime, ledger.later
        )


def unmapped(ledger: Ledger, e: MemoryUnmapped) -> None:
    """``munmap`` (or ``mremap``'s old range): each mapping wholly inside the range goes; one cut
    in part stays (what is left still pins the file); a moved one moves."""
    if e.result < 0:
        return
    mine = ledger.maps.get(e.pid)
    if not mine:
        return
    lo, hi = e.addr, e.addr + max(e.length, 1)
    for addr, m in list(mine.items()):
        if not (lo <= addr and addr + max(m.length, 1) <= hi):
            continue
        del mine[addr]
        if e.call == "mremap" and e.new_addr:
            mine[e.new_addr] = replace(m, addr=e.new_addr, length=e.new_length or m.length)
            ledger.growth.moved(e.pid, f"map:{addr:x}", f"map:{e.new_addr:x}")
        elif (e.pid, m.file) in ledger.came:
            let_go(ledger, e.pid, m.file, e.ktime, e.call)
        else:
            ledger.growth.gone(e.pid, f"map:{addr:x}")
    if not mine:
        del ledger.maps[e.pid]


def sized(ledger: Ledger, e: FileSized) -> None:
    """``ftruncate`` of a memory file: its size from now (a pile that holds it counts it)."""
    if e.result >= 0 and e.file:
        ledger.growth.sized(ledger, f"file:{e.file}", e.size, e.ktime, ledger.later)


def import_gone(ledger: Ledger, pid: int, handle: int, at: int, via: str) -> None:
    """An import pins its exporter's memory while its handle is referenced or any range is
    mapped from it ("The memory allocation will be freed when all outstanding mappings to the
    memory are unmapped and when all outstanding references to the handle ... are also
    released", CUDA Driver API, cuMemRelease): when the last of them goes, the pin is over."""
    if (pid, handle) in ledger.imports:
        return
    if any(m.pid == pid and m.handle == handle for m in ledger.mappings.values()):
        return
    ledger.growth.gone(pid, f"handle:{handle:x}")
    after_death_over(ledger, pid, f"handle:{handle:x}", at, via)


def after_death_over(ledger: Ledger, pid: int, key: str, at: int, via: str) -> None:
    """A pin held after its exporter died is over: said in the past
    (``released-after-exporter-died``), once, with the call that let it go."""
    held = ledger.after_death.pop((pid, key), None)
    if held is None:
        return
    ledger.later.append(
        LedgerFinding(
            "released-after-exporter-died",
            pid,
            at,
            peer=held.peer,
            file=held.file,
            handle=held.handle,
            ptr=held.ptr,
            size=held.size,
            memory=held.memory,
            via=via,
            status=held.status,
            since=held.died_at,
            name=held.name,
        )
    )


def made(ledger: Ledger, file: str, pid: int) -> None:
    """``pid`` made the memory file (memfd_create): its maker is kept after its fds close, past
    twice ``kept.LIMIT`` only where a name or a pin still needs it."""
    ledger.makers[file] = pid
    if len(ledger.makers) > 2 * kept.LIMIT:
        keep = set(ledger.memfd_names) | {f for _, f in ledger.came}
        ledger.makers = {f: p for f, p in ledger.makers.items() if f in keep}


def opened_again(ledger: Ledger, pid: int, ptr: int, x: IpcExport | None) -> bool:
    """A legacy IPC open: one more reference; True when it is a re-open in one context ("If
    the memory handle has already been opened by the current context, the reference count on
    the handle is incremented by 1 and the existing device pointer is returned", CUDA Driver
    API, cuIpcOpenMemHandle) -- the same open, no new one."""
    ledger.ipc_refs[(pid, ptr)] += 1
    again = ledger.ipc_opens.get((pid, ptr))
    return again is not None and again[0] is x


def last_reference(refs: Counter[tuple[int, int]], pid: int, key: int) -> bool:
    """One reference of ``refs[(pid, key)]`` released: True when it was the last (or one not
    counted: made before the trace). cuMemRelease: "The memory allocation will be freed when
    all outstanding mappings to the memory are unmapped and when all outstanding references to
    the handle (including its shareable counterparts) are also released"; cuIpcCloseMemHandle:
    "Decrements the reference count ... When the reference count reaches 0, this API unmaps the
    memory"."""
    left = refs.get((pid, key), 0)
    if left > 1:
        refs[(pid, key)] = left - 1
        return False
    refs.pop((pid, key), None)
    return True
