"""The CUDA driver functions ``vmmtui trace`` probes in libcuda.so.1, and where that library is.

The index of a function in ``FUNCS`` is its BPF cookie (trace.bpf.c reads 0, 5, 8, 9, 15, 17
and 20 by number: keep them). Uprobes sit on libcuda's exported entry points, so they see calls made
through the runtime (cudaMalloc → cuGetProcAddress → cuMemAlloc_v2) as well as direct ones; the
versioned ``_v2`` symbols are the ones current runtimes reach, the plain names are kept for old
binaries. ``cuGetProcAddress`` is never probed (hundreds of calls at every start).
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from vmmtui.stream.observed import base_name

if TYPE_CHECKING:
    from vmmtui.stream.observed import CudaCall

FUNCS = (
    "cuMemCreate",
    "cuMemExportToShareableHandle",
    "cuMemImportFromShareableHandle",
    "cuMemMap",
    "cuMemUnmap",
    "cuMemSetAccess",
    "cuMemRelease",
    "cuIpcGetMemHandle",
    "cuIpcOpenMemHandle_v2",
    "cuIpcOpenMemHandle",
    "cuIpcCloseMemHandle",
    "cuMemAlloc_v2",
    "cuMemAlloc",
    "cuMemFree_v2",
    "cuMemFree",
    # stream-ordered pools (15..22: trace.bpf.c reads 15, 17 and 20 by number)
    "cuMemPoolCreate",
    "cuMemAllocFromPoolAsync",
    "cuMemPoolExportToShareableHandle",
    "cuMemPoolImportFromShareableHandle",
    "cuMemPoolExportPointer",
    "cuMemPoolImportPointer",
    "cuMemFreeAsync",
    "cuMemPoolDestroy",
    "cuMemAllocFromPoolAsync_ptsz",
    "cuMemFreeAsync_ptsz",
    # one more reference on the handle that maps an address (NCCL frees with it, then releases
    # twice): the handle comes back through arg 0, as every output does
    "cuMemRetainAllocationHandle",
)


PLACES = (
    "/usr/local/nvidia/lib64",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/local/cuda/compat",
)


def _from_maps(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/maps", encoding="utf-8", errors="replace") as f:
            for line in f:
                path = line.rstrip("\n").split(None, 5)[-1]
                if re.search(r"/libcuda\.so(\.|$)", path) and os.path.exists(path):
                    return path
    except OSError:
        pass
    return None


def _from_ldconfig() -> str | None:
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    for line in out.splitlines():
        if "libcuda.so.1 " in line and "x86-64" in line and "=>" in line:
            return line.split("=>", 1)[1].strip()
    return None


def find_libcuda(pids: Sequence[int] = ()) -> str | None:
    """The real path of libcuda.so.1: $VMMTUI_LIBCUDA, a target's mappings, LD_LIBRARY_PATH, ldconfig, the usual
    directories (symlinks resolved: a uprobe sits on the file's inode)."""
    candidates = [os.environ.get("VMMTUI_LIBCUDA")]
    candidates += [_from_maps(p) for p in pids]
    # the dynamic loader looks in LD_LIBRARY_PATH before its cache: so does this
    ld_path = os.environ.get("LD_LIBRARY_PATH", "")
    candidates += [str(Path(d) / "libcuda.so.1") for d in ld_path.split(":") if d]
    candidates.append(_from_ldconfig())
    candidates += [str(Path(d) / "libcuda.so.1") for d in PLACES]
    for c in candidates:
        if c and os.path.exists(c):
            return os.path.realpath(c)
    return None


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
