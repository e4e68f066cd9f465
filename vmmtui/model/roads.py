"""The road a share took from its exporter to an importer, and the handle type at each end: data
only (words in ``trace/words.py``). One place says which road each way of sharing is, so the
transfer rows, the ``--json`` findings and the verdicts name it alike."""

from __future__ import annotations

from enum import StrEnum


class Road(StrEnum):
    """How the thing travelled between the two processes."""

    #: an fd in an SCM_RIGHTS message over a Unix socket (the kernel's struct file on both sides)
    SCM_RIGHTS = "scm-rights"
    #: the importer took the exporter's fd with pidfd_getfd
    PIDFD_GETFD = "pidfd-getfd"
    #: the 64 bytes of a legacy ``CUipcMemHandle`` (cuIpcGetMemHandle → cuIpcOpenMemHandle)
    LEGACY_IPC = "legacy-ipc"
    #: the 64 bytes of ``CUmemPoolPtrExportData`` (cuMemPoolExportPointer → ImportPointer)
    POOL_EXPORT_DATA = "pool-export-data"
    #: a fabric handle (``CU_MEM_HANDLE_TYPE_FABRIC``: 64 bytes, through IMEX)
    FABRIC = "fabric"
    #: shared before the trace began: kcmp proved one open file, the road was not seen
    KCMP = "kcmp"


class HandleType(StrEnum):
    """What the memory was at one end of the road."""

    POSIX_FD = "posix-fd"
    FABRIC = "fabric"
    WIN32 = "win32"
    WIN32_KMT = "win32-kmt"
    #: a legacy ``CUipcMemHandle`` (64 bytes)
    IPC_HANDLE = "ipc-handle"
    #: a pool pointer's ``CUmemPoolPtrExportData`` (64 bytes)
    POOL_PTR = "pool-ptr"
    #: an fd the trace did not see made (a memfd, a file)
    FD = "fd"
    NONE = ""


#: CU_MEM_HANDLE_TYPE_* bits
_BITS = {
    1: HandleType.POSIX_FD,
    2: HandleType.WIN32,
    4: HandleType.WIN32_KMT,
    8: HandleType.FABRIC,
}


def handle_type(bits: int) -> HandleType:
    """The one handle type a driver call asked for (``CUmemAllocationHandleType``)."""
    return _BITS.get(bits, HandleType.NONE)


def road_of(how: str) -> Road | None:
    """The road of a transfer as the ledger and the screen's fold name it (``SCM_RIGHTS``,
    ``pidfd_getfd``, ``IPC handle``, ``pool export data``, ``kcmp``, ``fabric``)."""
    return {
        "SCM_RIGHTS": Road.SCM_RIGHTS,
        "pidfd_getfd": Road.PIDFD_GETFD,
        "IPC handle": Road.LEGACY_IPC,
        "pool export data": Road.POOL_EXPORT_DATA,
        "kcmp": Road.KCMP,
        "fabric": Road.FABRIC,
    }.get(how)
