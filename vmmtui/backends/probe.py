"""What this machine can run, asked in a throw-away process so the caller never opens driver fds.

``python -m vmmtui.backends.probe`` prints one JSON object; ``probe()`` runs it and parses it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

RTLD_LAZY = 1


def driver_library() -> str | None:
    """None when libcuda.so.1 loads, else why not (dlopen only: no device files are opened).

    Called through libc rather than ``ctypes.CDLL``, which holds the GIL while the dynamic loader
    maps the driver's large library: the inspector probes in a thread while Textual loads, and a
    foreign call lets that thread go on. Lazy binding: only whether it loads matters here."""
    try:
        libc = ctypes.CDLL(None)
        libc.dlopen.restype = ctypes.c_void_p
        libc.dlopen.argtypes = [ctypes.c_char_p, ctypes.c_int]
        libc.dlerror.restype = ctypes.c_char_p
    except (OSError, AttributeError):  # no dlopen to call: the way that holds the GIL
        try:
            ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            return why_not_loaded(str(exc))
        return None
    if not libc.dlopen(b"libcuda.so.1", RTLD_LAZY):  # kept loaded, as CDLL would
        return why_not_loaded((libc.dlerror() or b"unknown error").decode(errors="replace"))
    return None


def why_not_loaded(error: str) -> str:
    return (
        "libcuda.so.1 not found"
        if "cannot open" in error
        else f"libcuda.so.1 did not load: {error}"
    )


IMEX_CHANNELS = "/dev/nvidia-caps-imex-channels"


def imex_channels() -> str:
    """What /dev/nvidia-caps-imex-channels holds, in words: fabric handles need a channel this process can open."""
    try:
        names = sorted(os.listdir(IMEX_CHANNELS))
    except FileNotFoundError:
        return f"no {IMEX_CHANNELS}"
    except OSError as exc:
        return f"{IMEX_CHANNELS} cannot be read ({exc.strerror})"
    if not names:
        return f"{IMEX_CHANNELS} is empty"
    usable = [n for n in names if os.access(os.path.join(IMEX_CHANNELS, n), os.R_OK | os.W_OK)]
    return f"{IMEX_CHANNELS}: {', '.join(names)}" + (
        "" if usable else " (none readable and writable by this user)"
    )


def _try_fabric(cu, ok, index: int) -> str:
    """cuMemCreate with CU_MEM_HANDLE_TYPE_FABRIC, one granule, released at once: the CUresult's name.

    The device attribute says only that the GPU could; the driver refuses (CUDA_ERROR_NOT_PERMITTED)
    where no IMEX channel is open to this process, as on a single H100 box."""
    prop = cu.CUmemAllocationProp()
    prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    prop.location.id = index
    prop.requestedHandleTypes = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_FABRIC
    err, gran = cu.cuMemGetAllocationGranularity(
        prop, cu.CUmemAllocationGranularity_flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM
    )
    if err != cu.CUresult.CUDA_SUCCESS:
        return cu.CUresult(err).name
    err, handle = cu.cuMemCreate(int(gran), prop, 0)
    if err == cu.CUresult.CUDA_SUCCESS:
        ok(cu.cuMemRelease(handle))
    return cu.CUresult(err).name


def _collect(retained: list) -> dict[str, Any]:
    """What the driver says of every device; each retained context's release goes into ``retained``."""
    from cuda.bindings import driver as cu

    def ok(res):
        err = res[0]
        if err != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(cu.CUresult(err).name)
        return res[1] if len(res) == 2 else res[1:]

    out: dict[str, Any] = {"driver": True}
    try:
        ok(cu.cuInit(0))
    except RuntimeError as exc:
        return {"driver": True, "error": f"cuInit failed: {exc}", "devices": []}
    out["driver_version"] = int(ok(cu.cuDriverGetVersion()))
    count = int(ok(cu.cuDeviceGetCount()))
    devices = []
    attr = cu.CUdevice_attribute
    for i in range(count):
        dev = ok(cu.cuDeviceGet(i))

        def get(name: str, dev=dev) -> int | None:
            a = getattr(attr, name, None)
            return None if a is None else int(ok(cu.cuDeviceGetAttribute(a, dev)))

        d: dict[str, Any] = {
            "index": i,
            "name": ok(cu.cuDeviceGetName(256, dev)).split(b"\0", 1)[0].decode(),
            "compute_capability": f"{get('CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR')}.{get('CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR')}",
            "vmm": bool(get("CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED")),
            "posix_fd": bool(
                get("CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED")
            ),
            "fabric": bool(get("CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED") or 0),
            "ipc_event": bool(get("CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED") or 0),
            "memory_pools": bool(get("CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED") or 0),
            "pool_handle_types": get("CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES") or 0,
        }
        if d["vmm"]:
            prop = cu.CUmemAllocationProp()
            prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
            prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            prop.location.id = i
            prop.requestedHandleTypes = (
                cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
            )
            g = cu.CUmemAllocationGranularity_flags
            d["granularity_min"] = int(
                ok(cu.cuMemGetAllocationGranularity(prop, g.CU_MEM_ALLOC_GRANULARITY_MINIMUM))
            )
            d["granularity_rec"] = int(
                ok(cu.cuMemGetAllocationGranularity(prop, g.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
            )
        ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
        retained.append(lambda dev=dev: cu.cuDevicePrimaryCtxRelease(dev))
        ok(cu.cuCtxSetCurrent(ctx))
        free, total = ok(cu.cuMemGetInfo())
        d["mem_free"], d["mem_total"] = int(free), int(total)
        if d["vmm"] and d["fabric"]:
            d["fabric_create"] = _try_fabric(cu, ok, i)
        if (
            d["vmm"] and d["posix_fd"]
        ):  # the fill/verify kernels: do they load here (PTX JIT, else NVRTC)?
            from vmmtui.backends.kernel_image import try_load

            d["kernels_error"], d["kernels"] = try_load(
                "sm_" + d["compute_capability"].replace(".", "")
            )
        devices.append(d)
    out["devices"] = devices
    return out


def probe(timeout: float = 60.0) -> dict[str, Any]:
    """The CUDA capabilities of this machine; ``{"driver": False, "error": ...}`` when there is no driver."""
    missing = driver_library()
    if missing:
        return {"driver": False, "error": f"no NVIDIA driver ({missing})", "devices": []}
    return first_json_line([sys.executable, "-m", "vmmtui.backends.probe"], timeout)


def first_json_line(argv: list[str], timeout: float) -> dict[str, Any]:
    """Run the probe and return its JSON line as soon as it is printed; the process is reaped in the
    background (a daemon thread), so its driver teardown is not on the start-up path."""
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
        line, out, ended = None, b"", False
        try:
            while line is None and not ended:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([proc.stdout], [], [], left)[0]:
                    proc.kill()
                    proc.wait()
                    return {
                        "driver": True,
                        "error": f"the CUDA probe did not finish within {timeout:.0f} s",
                        "devices": [],
                    }
                chunk = os.read(proc.stdout.fileno(), 1 << 16)
                out += chunk
                ended = not chunk
                lines = out.split(b"\n") if ended else out.split(b"\n")[:-1]  # whole lines only
                line = next((ln for ln in lines if ln.startswith(b"{")), None)
        finally:
            proc.stdout.close()
        if line is not None:
            threading.Thread(target=proc.wait, name="probe-reaper", daemon=True).start()
            return json.loads(line)
        proc.wait()
        err.seek(0)
        tail = (err.read().decode(errors="replace").strip().splitlines() or ["no output"])[-1]
        return {"driver": True, "error": f"the CUDA probe failed: {tail}", "devices": []}


def _main() -> None:
    """Print the JSON line first, then release the contexts and exit: the caller reads the line and
    goes on while this process tears the driver down (tens to hundreds of ms on a GPU box)."""
    retained: list = []
    try:
        result = _collect(retained)
    except Exception as exc:  # report, never traceback: the caller parses one line
        result = {"driver": True, "error": f"{type(exc).__name__}: {exc}", "devices": []}
    print(json.dumps(result), flush=True)
    for release in retained:
        with contextlib.suppress(Exception):
            release()
    sys.exit(0)


if __name__ == "__main__":
    _main()
