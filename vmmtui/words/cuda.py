"""A failed CUDA sharing call in words: its CUresult by name, why it failed and what to do.

The tracer records the call's facts (``CudaCall``: the function, its CUresult, the fd, the handle
types asked for); these tables word them where they are drawn, so that a recording replayed by a
later vmmtui gets that version's words. The meanings follow the CUDA Driver API reference
(docs.nvidia.com/cuda/cuda-driver-api, "Virtual Memory Management" and "Error Handling"):
cuMemImportFromShareableHandle fails with CUDA_ERROR_INVALID_VALUE or INVALID_HANDLE on an fd
that is not an exported allocation; cuMemExportToShareableHandle with INVALID_VALUE or
NOT_SUPPORTED for a handle type the allocation was not created with (requestedHandleTypes);
cuMemCreate with NOT_PERMITTED for a fabric handle without an IMEX channel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmmtui.stream.observed import base_name

if TYPE_CHECKING:
    from vmmtui.stream.observed import CudaCall


#: the CUresults a sharing call returns, by name
CUDA_ERRORS = {
    1: "CUDA_ERROR_INVALID_VALUE",
    2: "CUDA_ERROR_OUT_OF_MEMORY",
    3: "CUDA_ERROR_NOT_INITIALIZED",
    101: "CUDA_ERROR_INVALID_DEVICE",
    201: "CUDA_ERROR_INVALID_CONTEXT",
    208: "CUDA_ERROR_ALREADY_MAPPED",
    400: "CUDA_ERROR_INVALID_HANDLE",
    800: "CUDA_ERROR_NOT_PERMITTED",
    801: "CUDA_ERROR_NOT_SUPPORTED",
    999: "CUDA_ERROR_UNKNOWN",
}


def cuda_cause(e: CudaCall) -> str:
    """Why a CUDA sharing call failed, in one line (the ledger's ``refused`` finding)."""
    name = CUDA_ERRORS.get(e.result, f"CUresult {e.result}")
    f = base_name(e.func)
    if f == "cuMemImportFromShareableHandle" and e.result in (1, 400):
        return f"{name}: fd {e.fd} is not an exported allocation in this process (closed, or never received)"
    if f == "cuMemCreate" and e.result == 800 and e.handle_types & 8:
        return (
            f"{name}: a fabric-handle allocation needs an IMEX channel "
            "(/dev/nvidia-caps-imex-channels) and the IMEX daemon; fabric allocations worked in "
            "this process before (a first refusal is a capability probe, said as one)"
        )
    if f == "cuMemExportToShareableHandle" and e.result in (1, 801):
        return (
            f"{name}: the allocation was not created with this handle type in requestedHandleTypes"
        )
    if f == "cuIpcOpenMemHandle" and e.result in (1, 400):
        return f"{name}: the handle's process is gone, in another IPC namespace, or the handle was opened twice in one process"
    return name


def cuda_fix(e: CudaCall) -> str:
    """What to do about it ("" when nothing general can be said)."""
    f = base_name(e.func)
    if f == "cuMemCreate" and e.result == 800 and e.handle_types & 8:
        return (
            "check that nvidia-imex still runs and the process still has its channel "
            "(docs/attach.md, fabric handles); on one node, share with POSIX fds"
        )
    if f == "cuMemExportToShareableHandle":
        return "create it with prop.requestedHandleTypes including that type"
    if f == "cuMemImportFromShareableHandle":
        return "import the fd the exporter sent, before closing it"
    if f == "cuIpcOpenMemHandle":
        return "share the IPC namespace (docker --ipc=host) and open each handle once per process"
    return ""
