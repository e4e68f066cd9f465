"""What the ledger finds when a process exits while others still hold an open file it shared (a
memfd, a /dev/shm file, a dma-buf): the memory lives on until the last fd and mapping go.

``held-after-exporter-died`` when the trace saw the dead process make the file and the others
receive or take it; ``possible-held-after-exporter-died`` when they shared it before the trace
began (frame 0 of ``trace -p``: kcmp proves one open file, not which of them made it). Files of
CUDA allocations and pools are judged by their imports (``Ledger._exporter_died``). No /proc here:
everything comes from the ledger's fold. Also the shares of such a file that kcmp proved
(``kcmp_shares``: polling, ``trace -p``'s frame 0).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmmtui.model.entries import HeldAfterDeath
from vmmtui.model.findings import Memory, Proof
from vmmtui.model.pins import pins_on
from vmmtui.stream.events import Arrival, MappingGone, MappingSeen, SharedFile
from vmmtui.stream.observed import LedgerFinding, ProcessExit

if TYPE_CHECKING:
    from vmmtui.model.entries import Holding
    from vmmtui.model.ledger import Ledger


def files_held_after_exit(ledger: Ledger, e: ProcessExit) -> list[LedgerFinding]:
    """Open files (memfds, shm, dma-bufs) the dead process made or shared that live processes
    still hold: ``held-after-exporter-died`` when the trace saw it make the file and the others
    receive or take it; ``possible-held-after-exporter-died`` when they shared it before the
    trace began (kcmp proves the sharing, not who made it). Files of CUDA allocations and pools
    are judged by their imports (``Ledger._exporter_died``)."""
    out: list[LedgerFinding] = []
    said: set[tuple[int, str]] = set()
    _made_and_still_pinned(ledger, e, out, said)
    _mapped_at_attach(ledger, e, out)
    for h in [h for (pid, _), h in ledger.holdings.items() if pid == e.pid]:
        if not h.file or h.how not in ("created", "present"):
            continue
        if ledger.allocation_of_file(h.file) or ledger.pool_of_file(h.file):
            continue
        known = h.how == "created"
        if known:
            continue  # said above, by every pin the others keep
        for o in ledger.holders(h.file):
            if o.pid == e.pid or (o.pid, h.file) in said or not ledger.alive(o.pid):
                continue
            if known and o.how not in ("received", "taken"):
                continue  # inherited or dup'ed within a process tree: no share to speak of
            if not known and o.how != "present":
                continue
            said.add((o.pid, h.file))
            found = _held_after_exit(ledger, e, h, o, known)
            if known:  # certain only where no record since the holder got it was lost: a lost
                ledger.leak(out, o.since, found)  # one may be its exit or its close (unknown)
            else:  # said once it outlasts one teardown window (``model/orphans.py``)
                ledger.orphans.wait(found, 0, fd=o.fd, file=o.file)
    return out


def mapping_seen(ledger: Ledger, e: MappingSeen, out: list) -> None:
    """A memfd or /dev/shm file found mapped at attach (frame 0 of ``trace -p``) with another
    process holding it too: a pin from the start, whose munmap the kernel's record cannot show
    (it never saw the range mapped); held until that process's exit, or a poll's ``MappingGone``."""
    if e.how == Arrival.PRESENT and e.source is not None:
        ledger.mapped_at_attach[(e.pid, e.dev, e.ino)] = e


def mapping_gone(ledger: Ledger, e: MappingGone, out: list) -> None:
    ledger.mapped_at_attach.pop((e.pid, e.dev, e.ino), None)


def _mapped_at_attach(ledger: Ledger, e: ProcessExit, out: list[LedgerFinding]) -> None:
    """Memory files a live process was found mapping when the trace began, which the dead one
    held too (frame 0 of ``trace -p``: ``/proc/PID/maps`` and the fds): the mapping keeps the
    memory alive (mmap(2): "closing the file descriptor does not unmap the region"), so it is
    held after the other ended, ``possible``: which of them made it was not seen, nor an munmap
    since (the kernel's record never saw the range mapped)."""
    for (pid, dev, ino), m in list(ledger.mapped_at_attach.items()):
        if pid == e.pid:
            del ledger.mapped_at_attach[(pid, dev, ino)]  # its exit unmapped them
            continue
        if m.source != e.pid or not ledger.alive(pid):
            continue
        out.append(
            LedgerFinding(
                "possible-held-after-exporter-died",
                pid,
                e.ktime,
                peer=e.pid,
                file=f"kcmp:{m.dev}:{m.ino}:{pid}:-1",
                fd=-1,
                memory=Memory.FILE,
                how="mapped",
                status=e.code,
                name=m.path,
            )
        )


def _made_and_still_pinned(
    ledger: Ledger, e: ProcessExit, out: list[LedgerFinding], said: set[tuple[int, str]]
) -> None:
    """Files the dead process made (memfd_create), whether or not it still had an fd of them,
    that came to live processes (received, taken, or inherited from one it came to) and that
    they still pin by any fd or mapping: the memory outlives its maker. Each is remembered
    (``Ledger.after_death``) so that its end is said too, in the past."""
    made = {f for f, pid in ledger.makers.items() if pid == e.pid}
    if not made:
        return
    for (pid, file), came in list(ledger.came.items()):
        if file not in made or pid == e.pid or (pid, file) in said or not ledger.alive(pid):
            continue
        if ledger.allocation_of_file(file) or ledger.pool_of_file(file):
            continue
        pins = pins_on(ledger, pid, file)
        if not pins:
            continue
        said.add((pid, file))
        fd = next((p.value for p in pins if p.what == "fd"), -1)
        ptr = next((p.value for p in pins if p.what == "mapping"), 0)
        made_name = ledger.name(file)
        name = f"memfd:{made_name}" if made_name else "open file"
        ledger.after_death[(pid, f"file:{file}")] = HeldAfterDeath(
            pid, e.pid, e.ktime, e.code, Memory.FILE, file=file, ptr=ptr, name=name
        )
        # said once it outlasts one teardown window (``model/orphans.py``); certain only where
        # no record since the file came was lost: a lost one may be the holder's exit, a close
        # or an munmap (then ``unknown``, with the loss)
        ledger.orphans.wait(
            LedgerFinding(
                "held-after-exporter-died",
                pid,
                e.ktime,
                peer=e.pid,
                file=file,
                fd=fd,
                ptr=ptr,
                memory=Memory.FILE,
                # a copy inherited by fork from the one it came to is said as inherited,
                # through that one (fork(2): the child gets copies of the fds and mappings)
                how="mapped" if fd < 0 else "inherited" if came.pid != pid else came.how,
                through=came.pid if came.pid != pid else 0,
                via=came.via,
                sock=came.sock,
                pidfd=came.pidfd,
                status=e.code,
                name=name,
                since=e.ktime,
            ),
            came.since,
            key=(pid, f"file:{file}"),
        )


def _held_after_exit(
    ledger: Ledger, e: ProcessExit, h: Holding, o: Holding, known: bool
) -> LedgerFinding:
    before = ledger.shared_before.get(h.file)
    made = ledger.name(h.file)
    name = f"memfd:{made}" if made else (before.target if before else "") or "open file"
    if known:
        return LedgerFinding(
            "held-after-exporter-died",
            o.pid,
            e.ktime,
            peer=e.pid,
            file=h.file,
            fd=o.fd,
            memory=Memory.FILE,
            how=o.how,
            via=o.via,
            sock=o.sock,
            pidfd=o.pidfd,
            status=e.code,
            name=name,
        )
    return LedgerFinding(
        "possible-held-after-exporter-died",
        o.pid,
        e.ktime,
        peer=e.pid,
        file=h.file,
        fd=o.fd,
        peer_fd=h.fd,
        memory=Memory.FILE,
        status=e.code,
        name=name,
        since=e.ktime,
    )


#: the kinds of open file whose sharing (kcmp) is a share of memory
SHARED_MEMORY = ("memfd", "shm", "dmabuf")


def kcmp_shares(
    e: SharedFile, name: str, said: set[tuple[int, int, int, int]]
) -> list[LedgerFinding]:
    """A share of memory (a memfd, a /dev/shm file, a dma-buf) kcmp proved: a ``shared`` finding
    for each holder after the first, once (``said``: the (dev, ino, pid, fd) already found)."""
    if e.kind not in SHARED_MEMORY:
        return []
    first, out = e.holders[0], []
    for h in e.holders:
        key = (e.dev, e.ino, h.pid, h.fd)
        if h.pid == first.pid or key in said:
            continue
        said.add(key)
        out.append(
            LedgerFinding(
                "shared",
                h.pid,
                peer=first.pid,
                file=name,
                proof=Proof.KCMP,
                fd=h.fd,
                peer_fd=first.fd,
                via="kcmp",
                name=e.kind,
            )
        )
    return out
