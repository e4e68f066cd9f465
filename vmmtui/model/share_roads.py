"""The road each share took, read from the ledger's fold: a ``shared`` or ``imported`` finding
gets its road (``model.roads.Road``) and the handle type at export and at import, so the
``--json`` stream, the transfer rows and the verdicts say how the memory travelled. No words."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmmtui.model.roads import HandleType, Road, handle_type
from vmmtui.stream.events import Event
from vmmtui.stream.observed import CudaCall, FdsReceived, FdTaken, LedgerFinding, base_name

if TYPE_CHECKING:
    from vmmtui.model.ledger import Ledger

_FD_ROADS = {"received": Road.SCM_RIGHTS, "taken": Road.PIDFD_GETFD, "present": Road.KCMP}


def _exported_as(ledger: Ledger, file: str) -> HandleType:
    a = ledger.allocation_of_file(file) if file else None
    if a is not None:
        return HandleType.POSIX_FD
    return HandleType.POSIX_FD if file and ledger.pool_of_file(file) else HandleType.FD


def with_road(ledger: Ledger, e: Event, f: LedgerFinding) -> LedgerFinding:
    """``f`` with the road it took, where ``e`` (the event that brought it) says."""
    if f.kind not in ("shared", "imported") or f.road:
        return f
    road: Road | None = None
    exported = imported = HandleType.NONE
    if isinstance(e, FdsReceived):
        road, exported = Road.SCM_RIGHTS, _exported_as(ledger, f.file)
        imported = exported
    elif isinstance(e, FdTaken):
        road, exported = Road.PIDFD_GETFD, _exported_as(ledger, f.file)
        imported = exported
    elif isinstance(e, CudaCall):
        func = base_name(e.func)
        if func in ("cuMemImportFromShareableHandle", "cuMemPoolImportFromShareableHandle"):
            imported = handle_type(e.handle_types)
            if imported is HandleType.FABRIC:
                road, exported = Road.FABRIC, HandleType.FABRIC
            else:
                held = ledger.holdings.get((e.pid, e.fd))
                road = _FD_ROADS.get(held.how) if held else None
                exported = HandleType.POSIX_FD
        elif func == "cuIpcOpenMemHandle":
            road, exported = Road.LEGACY_IPC, HandleType.IPC_HANDLE
            imported = HandleType.IPC_HANDLE
        elif func == "cuMemPoolImportPointer":
            road, exported = Road.POOL_EXPORT_DATA, HandleType.POOL_PTR
            imported = HandleType.POOL_PTR
    if road is None and exported is HandleType.NONE:
        return f
    return f.but(road=str(road or ""), exported_as=str(exported), imported_as=str(imported))
