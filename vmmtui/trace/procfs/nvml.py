"""The GPU memory NVML charges to each process, through ``cuda.bindings.nvml``.

NVML charges an allocation to the process that created it: memory a process imported from another
(VMM fd, legacy IPC handle) shows under the exporter, not the importer, as in ``nvidia-smi``. Pids
are those of the host's PID namespace. Where NVML is missing every answer says why, once.
"""

from __future__ import annotations

import contextlib
import os
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from vmmtui.stream.events import GpuMemory


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
        try:
            from cuda.bindings import nvml
        except ImportError as exc:
            return cls(error=f"NVML unavailable: cuda.bindings.nvml not importable ({exc})")
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
        if not os.path.exists("/dev/nvidiactl"):
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

    def close(self) -> None:
        if self._lib is not None:
            with contextlib.suppress(Exception):
                self._lib.shutdown()
            self._lib = None


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:200]
