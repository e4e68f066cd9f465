"""The road of a transfer on the screen and the handle type at each end, from the screen's fold
alone (no ledger): a fd that went by SCM_RIGHTS or pidfd_getfd is a ``posix-fd`` at export when
the exporter's driver made it, and at import once the receiver imported it; legacy IPC and pool
pointers are their 64 bytes at both ends. No words."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmmtui.model.roads import HandleType, Road, road_of

if TYPE_CHECKING:
    from vmmtui.view.programs import ProgramsView, TransferView

_BYTES = {Road.LEGACY_IPC: HandleType.IPC_HANDLE, Road.POOL_EXPORT_DATA: HandleType.POOL_PTR}


def transfer_road(v: ProgramsView, t: TransferView) -> tuple[Road | None, HandleType, HandleType]:
    """(road, handle type at export, handle type at import) of ``t`` as this frame knows it."""
    road = road_of(t.how)
    if road in _BYTES:
        return road, _BYTES[road], _BYTES[road]
    if not t.file:
        return road, HandleType.NONE, HandleType.NONE
    src = v.proc(t.from_pid)
    exported = any(
        f.file == t.file and f.how == "exported" for f in (*src.fds.values(), *src.closed)
    ) or any(
        m.kind in ("allocation", "pool") and t.from_fd in m.exported for m in src.mems.values()
    )
    to = v.proc(t.to_pid)
    imported = any(
        m.file == t.file and m.kind in ("import", "pool import") for m in to.mems.values()
    )
    at_export = HandleType.POSIX_FD if exported else HandleType.FD
    return road, at_export, (HandleType.POSIX_FD if imported else HandleType.FD)
