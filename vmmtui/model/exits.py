"""Where leaks are decided: a process's exit, and what it leaves behind. Received fds it never
closed (a problem when the file carries memory, a quiet fact otherwise), imports never released,
IPC handles never closed, pool pointers never freed and pools never destroyed, and the memory
others still map of an exporter that died. Part of the ledger's fold (``Ledger._on_ProcessExit``);
each leak goes through ``Ledger._leak``, which says ``unknown`` where lost records could overturn it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmmtui.model.findings import Memory, carries_memory
from vmmtui.stream.observed import LedgerFinding, ProcessExit

if TYPE_CHECKING:
    from vmmtui.model.ledger import Ledger


def leaks_at_exit(ledger: Ledger, e: ProcessExit, out: list) -> None:
    """Everything process ``e.pid`` held is let go at its exit: each leak found is added to ``out``."""
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
            ),
        )
    for (pid, ptr), (x, o) in list(ledger.ipc_opens.items()):
        if pid != e.pid:
            continue
        del ledger.ipc_opens[(pid, ptr)]
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
    _pools_at_exit(ledger, e, out)
    _exporter_died(ledger, e, out)


def _pools_at_exit(ledger: Ledger, e: ProcessExit, out: list) -> None:
    """Pool pointers imported and never freed, pools never destroyed: found at the exit."""
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
        ledger.leak(out, pool_imp.at, _pool_leak(e, pool, "imported", src.pid if src else 0))


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
            if imp.released_at is None and ledger.alive(imp.pid):
                ledger.leak(
                    out,
                    imp.at,
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
                    ),
                )
    for x in ledger.ipc.values():
        if x.pid != e.pid:
            continue
        for o in x.opens:
            if o.closed_at is None and ledger.alive(o.pid):
                ledger.leak(
                    out,
                    o.at,
                    LedgerFinding(
                        "held-after-exporter-died",
                        o.pid,
                        e.ktime,
                        peer=e.pid,
                        ptr=o.ptr,
                        peer_ptr=x.ptr,
                        memory=Memory.IPC,
                        status=e.code,
                    ),
                )
    for px in ledger.pool_ptrs.values():
        if px.pid != e.pid:
            continue
        for held in px.imports:
            if held.freed_at is None and ledger.alive(held.pid):
                ledger.leak(
                    out,
                    held.at,
                    LedgerFinding(
                        "held-after-exporter-died",
                        held.pid,
                        e.ktime,
                        peer=e.pid,
                        ptr=held.ptr,
                        peer_ptr=px.ptr,
                        memory=Memory.POOL_POINTER,
                        status=e.code,
                    ),
                )
