"""The GPU memory NVML charges to each process, through ``cuda.bindings.nvml``; or, where
``VMMTUI_NVML`` names a library, through that library by ctypes (the tests' stand-in NVML,
tests/fixtures/fake_nvml.c, or a driver's libnvidia-ml.so.1 at a path of its own).

NVML charges an allocation to one process, as ``nvidia-smi`` does: while the process that created
it lives, that process; memory imported from another (VMM fd, legacy IPC handle) does not show
under the importer. Once the creator has exited and an importer still holds the memory, the driver
charges it to an importer: measured on an H200 (tests/fixtures/kv_pool_kill.py, a 4 GiB pool
handed over by torch.multiprocessing, then the client killed), 4,706 MiB charged to the client and
612 MiB to the server before the kill, 4,708 MiB to the server after it, legacy IPC and expandable
segments alike (docs/gpu-ledger.md). Pids are those of the host's PID namespace. Where NVML is
missing every answer says why, once.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from vmmtui.stream.events import GpuMemory
from vmmtui.stream.gpu import GpuCharge, GpuReading, NvmlSample

#: a library to load NVML from by ctypes instead of ``cuda.bindings.nvml`` (a path)
LIBRARY_ENV = "VMMTUI_NVML"


@dataclass
class Nvml:
    error: str | None = None
    devices: list[int] = field(default_factory=list)
    _handles: list = field(default_factory=list)
    #: device index -> UUID (``GPU-…``), for the devices NVML named
    uuids: dict[int, str] = field(default_factory=dict)
    #: the cuda.bindings.nvml module (a compiled extension without type information)
    _lib: Any = None

    @classmethod
    def open(cls) -> Nvml:
        nvml: Any
        if os.environ.get(LIBRARY_ENV):
            try:
                nvml = _Ctypes(os.environ[LIBRARY_ENV])
            except OSError as exc:
                return cls(error=f"NVML unavailable: {LIBRARY_ENV} not loadable ({_short(exc)})")
        else:
            try:
                from cuda.bindings import nvml as bindings
            except ImportError as exc:
                return cls(error=f"NVML unavailable: cuda.bindings.nvml not importable ({exc})")
            nvml = bindings
        try:
            nvml.init_v2()
            count = nvml.device_get_count_v2()
            handles = [nvml.device_get_handle_by_index_v2(i) for i in range(count)]
        except Exception as exc:  # NVMLError subclasses, or the library not found
            return cls(error=f"NVML unavailable: {_short(exc)}")
        uuids: dict[int, str] = {}
        for i, h in enumerate(handles):
            with contextlib.suppress(Exception):  # a device NVML cannot name keeps no UUID
                uuid = nvml.device_get_uuid(h)
                uuids[i] = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        return cls(None, list(range(count)), handles, uuids, nvml)

    @classmethod
    def opening(cls) -> Future[Nvml] | None:
        """On a machine with an NVIDIA driver (``/dev/nvidiactl``), NVML opened in a thread, started now:
        importing the bindings and ``nvmlInit`` take a few hundred ms, which then overlap the caller's
        own imports and its /proc scan (``attach --once`` as a whole command). None elsewhere."""
        if not os.path.exists("/dev/nvidiactl") and not os.environ.get(LIBRARY_ENV):
            return None
        from concurrent.futures import ThreadPoolExecutor

        pool = ThreadPoolExecutor(1, thread_name_prefix="nvml")
        future = pool.submit(cls.open)
        pool.shutdown(wait=False)
        return future

    def usage(self, pids: set[int] | list[int], at: float = 0.0) -> dict[int, GpuMemory]:
        """What NVML charges each of ``pids`` on each device (compute processes)."""
        if self.error:
            return {pid: GpuMemory(pid, {}, self.error, at) for pid in pids}
        wanted = set(pids)
        used: dict[int, dict[int, int]] = {pid: {} for pid in wanted}
        errors: list[str] = []
        nvml = self._lib
        for index, handle in zip(self.devices, self._handles, strict=True):
            try:
                infos = nvml.device_get_compute_running_processes_v3(handle)
            except Exception as exc:
                errors.append(f"device {index}: {_short(exc)}")
                continue
            for i in range(len(infos)):
                info = infos[i]
                pid = int(info.pid)
                if pid in wanted:
                    mem = int(info.used_gpu_memory)
                    used[pid][index] = used[pid].get(index, 0) + (mem if mem < (1 << 63) else 0)
        err = "; ".join(errors) or None
        return {
            pid: GpuMemory(
                pid, used[pid], err, at, {d: self.uuids[d] for d in used[pid] if d in self.uuids}
            )
            for pid in wanted
        }

    def sample(self, at: float = 0.0, ktime: int = 0) -> NvmlSample:
        """Every GPU as NVML reads it now: its memory and every compute process it charges (any
        process, traced or not: the GPU ledger says who the others are)."""
        if self.error:
            return NvmlSample([], at, ktime, self.error)
        nvml = self._lib
        gpus: list[GpuReading] = []
        for index, handle in zip(self.devices, self._handles, strict=True):
            total = used = 0
            with contextlib.suppress(Exception):  # memory info is beside the point of the charges
                mem = nvml.device_get_memory_info_v2(handle)
                total, used = int(mem.total), int(mem.used)
            charges: list[GpuCharge] = []
            error = ""
            try:
                infos = nvml.device_get_compute_running_processes_v3(handle)
                for i in range(len(infos)):
                    mem = int(infos[i].used_gpu_memory)  # NVML_VALUE_NOT_AVAILABLE: 2**64 - 1
                    charges.append(GpuCharge(int(infos[i].pid), mem if mem < (1 << 63) else 0))
            except Exception as exc:
                error = _short(exc)
            gpus.append(GpuReading(index, self.uuids.get(index, ""), total, used, charges, error))
        return NvmlSample(gpus, at, ktime)

    def close(self) -> None:
        if self._lib is not None:
            with contextlib.suppress(Exception):
                self._lib.shutdown()
            self._lib = None


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:200]


class _Info(ctypes.Structure):
    """``nvmlProcessInfo_t`` (nvml.h, CUDA 12/13: the v2 layout the ``_v3`` call fills)."""

    _fields_ = [
        ("pid", ctypes.c_uint),
        ("used_gpu_memory", ctypes.c_ulonglong),
        ("gpu_instance_id", ctypes.c_uint),
        ("compute_instance_id", ctypes.c_uint),
    ]


class _Memory(ctypes.Structure):
    """``nvmlMemory_t`` (nvmlDeviceGetMemoryInfo)."""

    _fields_ = [
        ("total", ctypes.c_ulonglong),
        ("free", ctypes.c_ulonglong),
        ("used", ctypes.c_ulonglong),
    ]


class _Ctypes:
    """The few NVML calls vmmtui makes, by ctypes from the library at ``path``, with the names and
    answers of ``cuda.bindings.nvml`` (an error raises, as there)."""

    def __init__(self, path: str) -> None:
        self.lib = ctypes.CDLL(path)

    def _call(self, name: str, *args: Any) -> None:
        rc = getattr(self.lib, name)(*args)
        if rc:
            raise RuntimeError(f"{name} returned NVML error {rc}")

    def init_v2(self) -> None:
        self._call("nvmlInit_v2")

    def shutdown(self) -> None:
        self._call("nvmlShutdown")

    def device_get_count_v2(self) -> int:
        n = ctypes.c_uint()
        self._call("nvmlDeviceGetCount_v2", ctypes.byref(n))
        return n.value

    def device_get_handle_by_index_v2(self, index: int) -> ctypes.c_void_p:
        h = ctypes.c_void_p()
        self._call("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index), ctypes.byref(h))
        return h

    def device_get_uuid(self, h: ctypes.c_void_p) -> str:
        buf = ctypes.create_string_buffer(96)
        self._call("nvmlDeviceGetUUID", h, buf, ctypes.c_uint(len(buf)))
        return buf.value.decode(errors="replace")

    def device_get_memory_info_v2(self, h: ctypes.c_void_p) -> _Memory:
        mem = _Memory()
        self._call("nvmlDeviceGetMemoryInfo", h, ctypes.byref(mem))
        return mem

    def device_get_compute_running_processes_v3(self, h: ctypes.c_void_p) -> list[_Info]:
        n = ctypes.c_uint(0)
        rc = self.lib.nvmlDeviceGetComputeRunningProcesses_v3(h, ctypes.byref(n), None)
        if rc not in (0, 7):  # NVML_ERROR_INSUFFICIENT_SIZE: n says how many
            raise RuntimeError(f"nvmlDeviceGetComputeRunningProcesses_v3 returned NVML error {rc}")
        infos = (_Info * max(n.value, 1))()
        self._call("nvmlDeviceGetComputeRunningProcesses_v3", h, ctypes.byref(n), infos)
        return list(infos[: n.value])


@dataclass
class Sampler:
    """NVML read into the stream now and then (``NvmlSample``), for a source that has no poll of
    its own (eBPF): opened in a thread at the start where a driver or ``VMMTUI_NVML`` is there,
    a reading said only when it differs from the last one said (the processes and their bytes)."""

    #: seconds between two readings at most as often
    every: float = 1.0
    soon: Future[Nvml] | None = None
    nvml: Nvml | None = None
    last: tuple = ()
    next_at: float = 0.0

    @classmethod
    def start(cls, enabled: bool = True) -> Sampler | None:
        soon = Nvml.opening() if enabled else None
        return cls(soon=soon) if soon is not None else None

    def due(self, now: float, at: float, ktime: int) -> list[NvmlSample]:
        """A reading at ``now`` (monotonic s) where one is due and differs from the last said."""
        if now < self.next_at:
            return []
        self.next_at = now + self.every
        if self.nvml is None:
            if self.soon is None or not self.soon.done():
                return []
            self.nvml, self.soon = self.soon.result(), None
        s = self.nvml.sample(at, ktime)
        key = (s.error, tuple((g.index, tuple(g.charges), g.error) for g in s.gpus))
        if key == self.last:
            return []
        self.last = key
        return [s]

    def close(self) -> None:
        if self.soon is not None:
            self.nvml, self.soon = self.nvml or self.soon.result(), None
        if self.nvml is not None:
            self.nvml.close()
            self.nvml = None
