"""The pattern's fill and verify kernels, loaded into one CUDA context and launched on its own stream.

Filling on the host and checking with numpy costs about 2 s per GiB; these kernels do the same
work at memory speed. Both walk the buffer as ``uint4`` (four integers per load or store) in a
grid-stride loop, with a scalar tail for counts that are not a multiple of four. The verify
kernel counts mismatches and keeps the lowest mismatching index (``atomicMin``); the host then
reads that one integer back, so a failure still names index, expected and got. Where the module
comes from (shipped PTX through the driver's JIT, NVRTC as the second way) is kernel_image.py.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from vmmtui.backends.base import CallLog, DeviceInfo
from vmmtui.backends.errors import error_name, error_text
from vmmtui.backends.kernel_image import load_module
from vmmtui.backends.pattern import pattern
from vmmtui.stream.failures import StepError, failure
from vmmtui.stream.values import Call, Verification


class Driver(Protocol):
    """What the kernels need of the cuda backend (named here so that kernels.py does not import it)."""

    calls: CallLog
    info: DeviceInfo

    def call(
        self, name: str, fn: Callable[..., Any], *args: Any, show: dict[str, Any] | None = None
    ) -> Any: ...

    def attribute(self, attr_name: str) -> int | None: ...


NO_MISMATCH = (1 << 64) - 1
BLOCK = 256
BLOCKS_PER_SM = 8


class PatternKernels:
    """The two kernels loaded into one CUDA context, launched on the backend's own stream."""

    def __init__(self, backend: Driver):
        from cuda.bindings import driver as cu

        self.cu = cu
        self.b = backend
        cc = backend.info.extra.get("compute_capability") or "{}.{}".format(
            backend.attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
            backend.attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"),
        )
        self.arch = "sm_" + cc.replace(".", "")
        self.module, self.how = load_module(backend, self.arch)
        self.fill_fn = backend.call(
            "cuModuleGetFunction",
            cu.cuModuleGetFunction,
            self.module,
            b"fill_pattern",
            show={"name": "fill_pattern"},
        )
        self.verify_fn = backend.call(
            "cuModuleGetFunction",
            cu.cuModuleGetFunction,
            self.module,
            b"verify_pattern",
            show={"name": "verify_pattern"},
        )
        self.sms = backend.attribute("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT") or 1
        self.stream = backend.call(
            "cuStreamCreate",
            cu.cuStreamCreate,
            cu.CUstream_flags.CU_STREAM_NON_BLOCKING.value,
            show={"flags": "NON_BLOCKING"},
        )
        self.start_ev = backend.call("cuEventCreate", cu.cuEventCreate, 0, show={"flags": 0})
        self.stop_ev = backend.call("cuEventCreate", cu.cuEventCreate, 0, show={"flags": 0})
        self.result = backend.call(
            "cuMemAlloc", cu.cuMemAlloc, 16, show={"bytesize": 16, "what": "verify result"}
        )
        self.host_result = np.zeros(2, dtype=np.uint64)
        self.last_ms: float | None = None
        # CUDA loads kernels lazily at their first launch; do it now, so that no timed launch pays for it
        self._launch(
            self.fill_fn,
            "fill_pattern",
            0,
            [int(self.result), 0, 0],
            note="warm-up: loads the kernel",
        )
        self._launch(
            self.verify_fn,
            "verify_pattern",
            0,
            [int(self.result), 0, 0, int(self.result)],
            note="warm-up: loads the kernel",
        )
        self.last_ms = None

    def _grid(self, count: int) -> int:
        return max(1, min(self.sms * BLOCKS_PER_SM, (count // 4 + BLOCK - 1) // BLOCK))

    def _launch(self, fn, name: str, count: int, params: list, note: str = "") -> float:
        """Launch ``fn`` over ``count`` integers, wait for it, and return its GPU time in ms (CUDA events)."""
        cu, b = self.cu, self.b
        keep = [ctypes.c_uint64(int(p)) for p in params]
        argv = np.array([ctypes.addressof(k) for k in keep], dtype=np.uint64)
        grid = self._grid(count)
        t0 = time.perf_counter_ns()
        for err_call in (
            lambda: cu.cuEventRecord(self.start_ev, self.stream),
            lambda: cu.cuLaunchKernel(
                fn, grid, 1, 1, BLOCK, 1, 1, 0, self.stream, argv.ctypes.data, 0
            ),
            lambda: cu.cuEventRecord(self.stop_ev, self.stream),
            lambda: cu.cuStreamSynchronize(self.stream),
        ):
            (err,) = err_call()
            if err != cu.CUresult.CUDA_SUCCESS:
                b.calls.add(
                    Call(
                        "cuLaunchKernel",
                        {"kernel": name},
                        error_name(err),
                        time.perf_counter_ns() - t0,
                        ok=False,
                    )
                )
                raise StepError(
                    failure(error_name(err), f"cuLaunchKernel({name})", error_text(err))
                )
        wall = time.perf_counter_ns() - t0
        err, ms = cu.cuEventElapsedTime(self.start_ev, self.stop_ev)
        ms = float(ms) if err == cu.CUresult.CUDA_SUCCESS else wall / 1e6
        gbps = count * 4 / (ms / 1e3) / 1e9 if ms > 0 else 0.0
        b.calls.add(
            Call(
                f"cuLaunchKernel {name}",
                {
                    "ptr": hex(int(params[0])),
                    "integers": count,
                    "grid": grid,
                    "block": BLOCK,
                    "stream": "own",
                    **({"note": note} if note else {}),
                },
                f"{ms:.3f} ms on the GPU, {gbps:.0f} GB/s",
                wall,
            )
        )
        self.last_ms = ms
        return ms

    def fill(self, va: int, count: int, first: int = 0) -> int:
        self._launch(self.fill_fn, "fill_pattern", count, [va, count, first])
        return count

    def verify(self, va: int, count: int, first: int = 0) -> Verification:
        cu, b = self.cu, self.b
        self.host_result[:] = (0, NO_MISMATCH)
        b.call(
            "cuMemcpyHtoD",
            cu.cuMemcpyHtoD,
            self.result,
            self.host_result.ctypes.data,
            16,
            show={"what": "reset verify result", "bytes": 16},
        )
        self._launch(self.verify_fn, "verify_pattern", count, [va, count, first, int(self.result)])
        b.call(
            "cuMemcpyDtoH",
            cu.cuMemcpyDtoH,
            self.host_result.ctypes.data,
            self.result,
            16,
            show={"what": "verify result", "bytes": 16},
        )
        bad, low = int(self.host_result[0]), int(self.host_result[1])
        if bad == 0:
            return Verification(count, 0)
        got = np.zeros(1, dtype=np.uint32)
        b.call(
            "cuMemcpyDtoH",
            cu.cuMemcpyDtoH,
            got.ctypes.data,
            cu.CUdeviceptr(va + low * 4),
            4,
            show={"what": "first mismatching integer", "index": low},
        )
        return Verification(count, bad, low, int(pattern(first + low, 1)[0]), int(got[0]))

    def close(self) -> None:
        cu, b = self.cu, self.b
        b.call("cuMemFree", cu.cuMemFree, self.result, show={"what": "verify result"})
        b.call("cuEventDestroy", cu.cuEventDestroy, self.start_ev)
        b.call("cuEventDestroy", cu.cuEventDestroy, self.stop_ev)
        b.call("cuStreamDestroy", cu.cuStreamDestroy, self.stream)
        b.call("cuModuleUnload", cu.cuModuleUnload, self.module)
