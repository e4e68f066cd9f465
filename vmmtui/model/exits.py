"""Where leaks are decided: a process's exit, and what it leaves behind. Received fds it never
closed (a problem when the file carries memory, a quiet fact otherwise), imports never released,
IPC handles never closed, pool pointers never freed and pools never destroyed, and the memory
others still map of an exporter that died. Part of the ledger's fold (``Ledger._on_ProcessExit``);
each leak goes through ``Ledger._leak``, which says ``unknown`` where lost records could overturn it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmmtui.model.driver_dups import drivers_at_exit, is_drivers
from vmmtui.model.entries import HeldAfterDeath
from vmmtui.model.findings import Memory, carries_memory
from vmmtui.model.pins import after_death_over, pins_on
from vmmtui.stream.observed import LedgerFinding, ProcessExit

if TYPE_CHECKING:
    from vmmtui.model.entries import Pin
    from vmmtui.model.ledger import Ledger


def leaks_at_exit(ledger: Ledger, e: ProcessExit, out: list) -> None:
    """Everything process ``e.pid`` held is let go at its exit: each leak found is added to ``out``."""
    for pid, key in [k for k in ledger.after_death if k[0] == e.pid]:
        after_death_over(ledger, pid, key, e.ktime, "exit")  # its exit let go of what it held
    drivers = drivers_at_exit(ledger, e.pid)  # the driver's own dups: its imports' findings'
    _held_by_other_pins(ledger, e, out)
    for (pid, fd), h in list(ledger.holdings.items()):
        if pid != e.pid:
            continue
        if h.how in ("received", "taken"):
            kind = ledger.file_kind(h.file, h.kind)
            ledger.leak(
                out,
                h.since,
                LedgerFinding(
                    "fd-never-closed" if carries_memory(kind) else "fd-closed-by-exit",
                    e.pid,
                    e.ktime,
                    peer=h.source_pid,
                    file=h.file,
                    fd=fd,
                    peer_fd=h.source_fd,
                    how=h.how,
                    via=h.via,
                    sock=h.sock,
                    pidfd=h.pidfd,
                    name=kind,
                ),
            )
        ledger.close_fd(pid, fd, e.ktime)
    for (pid, handle), (a, imp) in list(ledger.imports.items()):
        if pid != e.pid:
            continue
        del ledger.imports[(pid, handle)]
        imp.released_at = e.ktime
        ledger.leak(
            out,
            imp.at,
            LedgerFinding(
                "import-never-released",
                e.pid,
                e.ktime,
                peer=a.pid if a else 0,
                handle=handle,
                peer_handle=a.handle if a else 0,
                memory=Memory.ALLOCATION,
                **_by_the_driver(drivers.get(imp.file, [])),
            ),
        )
    for (pid, ptr), (x, o) in list(ledger.ipc_opens.items()):
        if pid != e.pid:
            continue
        del ledger.ipc_opens[(pid, ptr)]
        ledger.ipc_refs.pop((pid, ptr), None)
        o.closed_at = e.ktime
        ledger.leak(
            out,
            o.at,
            LedgerFinding(
                "ipc-never-closed",
                e.pid,
                e.ktime,
                peer=x.pid if x else 0,
                ptr=ptr,
                peer_ptr=x.ptr if x else 0,
                memory=Memory.IPC,
            ),
        )
    ledger.maps.pop(e.pid, None)
    _pools_at_exit(ledger, e, out, drivers)
    _exporter_died(ledger, e, out)


def _held_by_other_pins(ledger: Ledger, e: ProcessExit, out: list) -> None:
    """Memory files that came to the process whose copy it still pins at its exit by an fd other
    than the one received (a dup, ``F_DUPFD``; Python's ``mmap`` keeps one of its own) or a
    mapping: the memory lived as long as the process, as with a received fd never closed (said
    by the loop after this one, once per fd). A copy inherited by fork from an ancestor that
    received it (fork(2): "the child inherits copies of the parent's set of open file
    descriptors" and its mappings) is said as inherited, through the ancestor: the child never
    received it (a forkserver's child, a DataLoader worker forked while its parent maps a batch).
    Said as facts: whether a hold until exit is a problem is the policy's (``model/policy.py``)."""
    for (pid, file), came in list(ledger.came.items()):
        if pid != e.pid or came.how == "inherited":
            continue
        if ledger.holdings.get((pid, came.fd)) is came:
            continue  # the received fd itself is still open: fd-never-closed says it
        kind = ledger.file_kind(file, came.kind)
        pins = [p for p in pins_on(ledger, pid, file) if not _drivers(ledger, p)]
        if not pins or not carries_memory(kind):
            continue
        fds = [p.value for p in pins if p.what == "fd"]
        maps = [p.value for p in pins if p.what == "mapping"]
        inherited = came.pid != pid
        # an inherited copy: the fds fork gave it first, then the dups made of them
        copies = [p.value for p in pins if p.what == "fd" and p.how == "inherited"]
        if inherited:
            fds = copies + [fd for fd in fds if fd not in copies]
            fd = copies[0] if copies else -1
        else:
            fd = fds[0] if fds else -1
        how = "inherited" if inherited else "dup" if fds else "mapping"
        ledger.leak(
            out,
            came.since,
            LedgerFinding(
                "held-at-exit",
                e.pid,
                e.ktime,
                peer=came.source_pid or ledger.makers.get(file, 0),
                through=came.pid if inherited else 0,
                file=file,
                fd=fd,
                peer_fd=came.source_fd,
                fds=fds,
                ptr=maps[0] if maps else 0,
                opens=maps,
                how=how,
                via=came.via,
                sock=came.sock,
                pidfd=came.pidfd,
                name=kind,
                since=came.since,
            ),
        )


def _drivers(ledger: Ledger, p: Pin) -> bool:
    """Whether the pin is a dup the driver made inside its call (``model/driver_dups.py``)."""
    h = ledger.holdings.get((p.pid, p.value)) if p.what == "fd" else None
    return h is not None and is_drivers(h)


#: the road of an fd the driver dup'ed inside its own call (worded in ``words.findings``)
DRIVER_DUP = "driver-dup"


def _by_the_driver(fds: list[int]) -> dict:
    """The facts of an import's finding that name the driver's dups of its fd (none: none)."""
    return {"fds": fds, "fd": fds[0], "via": DRIVER_DUP} if fds else {}


def _pools_at_exit(
    ledger: Ledger, e: ProcessExit, out: list, drivers: dict[str, list[int]]
) -> None:
    """Pool pointers imported and never freed, pools never destroyed: found at the exit. An
    imported pool's finding names the driver's dups of its fd, held to the exit for it."""
    for (pid, ptr), (x, imp) in list(ledger.pool_ptr_imports.items()):
        if pid != e.pid:
            continue
        del ledger.pool_ptr_imports[(pid, ptr)]
        imp.freed_at = e.ktime
        ledger.leak(
            out,
            imp.at,
            LedgerFinding(
                "pool-pointer-never-freed",
                e.pid,
                e.ktime,
                peer=x.pid if x else 0,
                ptr=ptr,
                peer_ptr=x.ptr if x else 0,
                memory=Memory.POOL_POINTER,
            ),
        )
    for key, p in list(ledger.pools.items()):
        if p.pid != e.pid:
            continue
        del ledger.pools[key]
        p.destroyed_at = p.destroyed_at or e.ktime
        ledger.leak(out, p.created_at, _pool_leak(e, p.pool, "created", 0))
    for (pid, pool), (src, pool_imp) in list(ledger.pool_imports.items()):
        if pid != e.pid:
            continue
        del ledger.pool_imports[(pid, pool)]
        pool_imp.destroyed_at = e.ktime
        leak = _pool_leak(e, pool, "imported", src.pid if src else 0)
        ledger.leak(out, pool_imp.at, leak.but(**_by_the_driver(drivers.get(pool_imp.file, []))))


def _pool_leak(e: ProcessExit, pool: int, how: str, peer: int) -> LedgerFinding:
    return LedgerFinding(
        "pool-never-destroyed",
        e.pid,
        e.ktime,
        peer=peer,
        handle=pool,
        how=how,
        memory=Memory.POOL,
    )


def _exporter_died(ledger: Ledger, e: ProcessExit, out: list) -> None:
    """Imports, IPC opens and pool pointers that live processes still hold of memory whose
    exporter has just died: said at the exit, not only at the end."""
    for a in ledger.allocations.values():
        if a.pid != e.pid:
            continue
        if a.released_at is None:
            a.released_at = e.ktime
        for imp in a.imports:
            if ledger.alive(imp.pid) and imp.released_at is None:  # said below: its end too
                ledger.after_death[(imp.pid, f"handle:{imp.handle:x}")] = HeldAfterDeath(
                    imp.pid, e.pid, e.ktime, e.code, Memory.ALLOCATION, handle=imp.handle,
                    size=a.size,
                )  # fmt: skip
            if imp.released_at is None and ledger.alive(imp.pid):
                ledger.orphans.wait(  # said once it outlasts one teardown window
                    LedgerFinding(
                        "held-after-exporter-died",
                        imp.pid,
                        e.ktime,
                        peer=e.pid,
                        handle=imp.handle,
                        peer_handle=a.handle,
                        size=a.size,
                        memory=Memory.ALLOCATION,
                        status=e.code,
                        since=e.ktime,
                    ),
                    imp.at,
                    key=(imp.pid, f"handle:{imp.handle:x}"),
                )
    for x in ledger.ipc.values():
        if x.pid != e.pid:
            continue
        for o in x.opens:
            if o.closed_at is None and ledger.alive(o.pid):
                ledger.after_death[(o.pid, f"ipc:{o.ptr:x}")] = HeldAfterDeath(
                    o.pid, e.pid, e.ktime, e.code, Memory.IPC, ptr=o.ptr, size=x.size
                )
                ledger.orphans.wait(  # said once it outlasts one teardown window
                    LedgerFinding(
                        "held-after-exporter-died",
                        o.pid,
                        e.ktime,
                        peer=e.pid,
                        ptr=o.ptr,
                        peer_ptr=x.ptr,
                        size=x.size,
                        memory=Memory.IPC,
                        status=e.code,
                        since=e.ktime,
                    ),
                    o.at,
                    key=(o.pid, f"ipc:{o.ptr:x}"),
                )
    for px in ledger.pool_ptrs.values():
        if px.pid != e.pid:
            continue
        for held in px.imports:
            if held.freed_at is None and ledger.alive(held.pid):
                ledger.after_death[(held.pid, f"ptr:{held.ptr:x}")] = HeldAfterDeath(
                    held.pid, e.pid, e.ktime, e.code, Memory.POOL_POINTER, ptr=held.ptr
                )
                ledger.orphans.wait(  # said once it outlasts one teardown window
                    LedgerFinding(
                        "held-after-exporter-died",
                        held.pid,
                        e.ktime,
                        peer=e.pid,
                        ptr=held.ptr,
                        peer_ptr=px.ptr,
                        memory=Memory.POOL_POINTER,
                        status=e.code,
                        since=e.ktime,
                    ),
                    held.at,
                    key=(held.pid, f"ptr:{held.ptr:x}"),
                )
