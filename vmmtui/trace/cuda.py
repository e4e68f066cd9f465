"""The CUDA driver functions ``vmmtui trace`` probes in libcuda.so.1, and where that library is.

The index of a function in ``FUNCS`` is its BPF cookie (trace.bpf.c reads 0, 5, 8, 9, 15, 17
and 20 by number: keep them). Uprobes sit on libcuda's exported entry points, so they see calls made
through the runtime (cudaMalloc → cuGetProcAddress → cuMemAlloc_v2) as well as direct ones; the
versioned ``_v2`` symbols are the ones current runtimes reach, the plain names are kept for old
binaries. ``cuGetProcAddress`` is never probed (hundreds of calls at every start). What a failed
call's CUresult means, and what to do about it, is worded in ``vmmtui/words/cuda.py``.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from pathlib import Path

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
