"""What this machine can run, asked in a throw-away process so the caller never opens driver fds.

``python -m vmmtui.backends.probe`` prints one JSON object, a ``ProbeRecord``; ``probe()`` runs it
and reads it back typed (the codec checks its shape), so no caller reads the driver's answer by key.
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
from dataclasses import dataclass, field
from typing import Any

from vmmtui.stream.codec import DecodeError, decode, encode

RTLD_LAZY = 1


@dataclass(frozen=True)
class DeviceRecord:
    """What the driver says of one device, and what the probe tried on it."""

    index: int
    name: str
    compute_capability: str = ""
    vmm: bool = False
    posix_fd: bool = False
    fabric: bool = False
    ipc_event: bool = False
    #: allocation granularity for POSIX-fd handles (None: no VMM, not asked)
    granularity_min: int | None = None
    granularity_rec: int | None = None
    mem_free: int = 0
    mem_total: int = 0
    #: the CUresult name of a one-granule cuMemCreate with fabric handles (None: not tried)
    fabric_create: str | None = None
    #: whether the fill/verify kernels were loaded (only with VMM and POSIX fds)
    kernels_tried: bool = False
    #: why they cannot load (None: they load, or were not tried)
    kernels_error: str | None = None
    #: how they load (PTX JIT or NVRTC), when they do
    kernels: str = ""
    #: stream-ordered allocation (cuMemPoolCreate) and the handle types its pools can export
    memory_pools: bool = False
    pool_handle_types: int = 0


@dataclass(frozen=True)
class ProbeRecord:
    """The probe's answer: ``driver`` False when libcuda does not load; ``error`` when it stopped."""

    driver: bool
    error: str | None = None
    #: cuDriverGetVersion (13000 is CUDA 13.0)
    driver_version: int | None = None
    devices: list[DeviceRecord] = field(default_factory=list)
    #: False when cuda-python is not installed (the driver could not be asked)
    bindings: bool = True

    @property
    def driver_api(self) -> str:
        """``CUDA driver API 13.0``, or "" when the version is not known."""
        v = self.driver_version
        return f"CUDA driver API {v // 1000}.{v % 1000 // 10}" if v else ""


def record(data: Any) -> ProbeRecord:
    """The probe's JSON object as a ProbeRecord; one with ``error`` set when its shape is wrong."""
    try:
        return decode(ProbeRecord, data, "probe")
    except DecodeError as exc:
        return ProbeRecord(True, f"the CUDA probe's answer is not understood: {exc}")


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


def _collect(retained: list) -> ProbeRecord:
    """What the driver says of every device; each retained context's release goes into ``retained``."""
    from cuda.bindings import driver as cu

    def ok(res):
        err = res[0]
        if err != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(cu.CUresult(err).name)
        return res[1] if len(res) == 2 else res[1:]

    try:
        ok(cu.cuInit(0))
    except RuntimeError as exc:
        return ProbeRecord(True, f"cuInit failed: {exc}")
    driver_version = int(ok(cu.cuDriverGetVersion()))
    count = int(ok(cu.cuDeviceGetCount()))
    devices = []
    attr = cu.CUdevice_attribute
    for i in range(count):
        dev = ok(cu.cuDeviceGet(i))

        def get(name: str, dev=dev) -> int | None:
            a = getattr(attr, name, None)
            return None if a is None else int(ok(cu.cuDeviceGetAttribute(a, dev)))

        cc = (
            f"{get('CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR')}."
            f"{get('CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR')}"
        )
        vmm = bool(get("CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED"))
        posix_fd = bool(get("CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED"))
        fabric = bool(get("CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED") or 0)
        gran_min = gran_rec = None
        if vmm:
            prop = cu.CUmemAllocationProp()
            prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
            prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
            prop.location.id = i
            prop.requestedHandleTypes = (
                cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
            )
            g = cu.CUmemAllocationGranularity_flags
            gran_min = int(
                ok(cu.cuMemGetAllocationGranularity(prop, g.CU_MEM_ALLOC_GRANULARITY_MINIMUM))
            )
            gran_rec = int(
                ok(cu.cuMemGetAllocationGranularity(prop, g.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
            )
        ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
        retained.append(lambda dev=dev: cu.cuDevicePrimaryCtxRelease(dev))
        ok(cu.cuCtxSetCurrent(ctx))
        free, total = ok(cu.cuMemGetInfo())
        fabric_create = _try_fabric(cu, ok, i) if vmm and fabric else None
        kernels_error, kernels = None, ""
        if vmm and posix_fd:  # the fill/verify kernels: do they load here (PTX JIT, else NVRTC)?
            from vmmtui.backends.kernel_image import try_load

            kernels_error, kernels = try_load("sm_" + cc.replace(".", ""))
        devices.append(
            DeviceRecord(
                i,
                ok(cu.cuDeviceGetName(256, dev)).split(b"\0", 1)[0].decode(),
                cc,
                vmm,
                posix_fd,
                fabric,
                bool(get("CU_DEVICE_ATTRIBUTE_IPC_EVENT_SUPPORTED") or 0),
                gran_min,
                gran_rec,
                int(free),
                int(total),
                fabric_create,
                vmm and posix_fd,
                kernels_error,
                kernels,
                bool(get("CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED") or 0),
                get("CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES") or 0,
            )
        )
    return ProbeRecord(True, None, driver_version, devices)


def probe(timeout: float = 60.0) -> ProbeRecord:
    """The CUDA capabilities of this machine; ``driver`` False, with ``error``, when there is no driver."""
    missing = driver_library()
    if missing:
        return ProbeRecord(False, f"no NVIDIA driver ({missing})")
    from vmmtui.system.host import cuda_python_missing

    if why := cuda_python_missing():  # the driver is there but nothing here can call it
        return ProbeRecord(True, why, bindings=False)
    return record(first_json_line([sys.executable, "-m", "vmmtui.backends.probe"], timeout))


def first_json_line(argv: list[str], timeout: float) -> dict[str, Any]:
    """Run the probe and return its JSON line's object as soon as it is printed (or an object with
    ``error`` saying why there is none); the process is reaped in the background (a daemon thread),
    so its driver teardown is not on the start-up path. ``record()`` reads the object."""
    deadline = time.monotonic() + timeout
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err)
        stdout = proc.stdout
        assert stdout is not None  # stdout=PIPE
        line, out, ended = None, b"", False
        try:
            while line is None and not ended:
                left = deadline - time.monotonic()
                if left <= 0 or not select.select([stdout], [], [], left)[0]:
                    proc.kill()
                    proc.wait()
                    return {
                        "driver": True,
                        "error": f"the CUDA probe did not finish within {timeout:.0f} s",
                        "devices": [],
                    }
                chunk = os.read(stdout.fileno(), 1 << 16)
                out += chunk
                ended = not chunk
                lines = out.split(b"\n") if ended else out.split(b"\n")[:-1]  # whole lines only
                line = next((ln for ln in lines if ln.startswith(b"{")), None)
        finally:
            stdout.close()
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
        result = ProbeRecord(True, f"{type(exc).__name__}: {exc}")
    print(json.dumps(encode(result)), flush=True)
    for release in retained:
        with contextlib.suppress(Exception):
            release()
    sys.exit(0)


if __name__ == "__main__":
    _main()
