"""The pattern's fill and verify kernels: CUDA C compiled at run time by NVRTC, cached on disk.

Filling on the host and checking with numpy costs about 2 s per GiB; these kernels do the same
work at memory speed. Both walk the buffer as ``uint4`` (four integers per load or store) in a
grid-stride loop, with a scalar tail for counts that are not a multiple of four. The verify
kernel counts mismatches and keeps the lowest mismatching index (``atomicMin``); the host then
reads that one integer back, so a failure still names index, expected and got.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from vmmtui.backends.base import Call, CallLog, DeviceInfo
from vmmtui.backends.errors import error_name, error_text
from vmmtui.pattern import Verification, pattern
from vmmtui.troubleshooting import StepError, failure


class Driver(Protocol):
    """What the kernels need of the cuda backend (named here so that kernels.py does not import it)."""

    calls: CallLog
    info: DeviceInfo

    def call(self, name: str, fn: Callable[..., Any], *args: Any, show: dict[str, Any] | None = None) -> Any: ...

    def attribute(self, attr_name: str) -> int | None: ...

SOURCE = r"""
#define PATTERN(i) ((unsigned int)((i) * 2ull + 1337ull) ^ 0xDEADBEEFu)

extern "C" __global__ void fill_pattern(unsigned int* __restrict__ data, unsigned long long count,
                                        unsigned long long first) {
    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long quads = count / 4;
    uint4* __restrict__ d4 = reinterpret_cast<uint4*>(data);
    for (unsigned long long q = tid; q < quads; q += stride) {
        const unsigned long long i = first + q * 4;
        d4[q] = make_uint4(PATTERN(i), PATTERN(i + 1), PATTERN(i + 2), PATTERN(i + 3));
    }
    for (unsigned long long j = quads * 4 + tid; j < count; j += stride) data[j] = PATTERN(first + j);
}

/* result[0] += mismatches; result[1] = min(result[1], first mismatching index) */
extern "C" __global__ void verify_pattern(const unsigned int* __restrict__ data, unsigned long long count,
                                          unsigned long long first, unsigned long long* result) {
    const unsigned long long stride = (unsigned long long)blockDim.x * gridDim.x;
    const unsigned long long tid = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
    const unsigned long long quads = count / 4;
    const uint4* __restrict__ d4 = reinterpret_cast<const uint4*>(data);
    unsigned long long bad = 0, low = ~0ull;
    unsigned long long q = tid;
    /* four independent 16-byte loads in flight per thread before any compare: memory-level parallelism */
    for (; q + 3 * stride < quads; q += 4 * stride) {
        uint4 v[4];
        #pragma unroll
        for (int u = 0; u < 4; u++) v[u] = d4[q + u * stride];
        #pragma unroll
        for (int u = 0; u < 4; u++) {
            const unsigned long long j = (q + u * stride) * 4, i = first + j;
            if (v[u].x != PATTERN(i))     { bad++; low = min(low, j); }
            if (v[u].y != PATTERN(i + 1)) { bad++; low = min(low, j + 1); }
            if (v[u].z != PATTERN(i + 2)) { bad++; low = min(low, j + 2); }
            if (v[u].w != PATTERN(i + 3)) { bad++; low = min(low, j + 3); }
        }
    }
    for (; q < quads; q += stride) {
        const uint4 v = d4[q];
        const unsigned long long j = q * 4, i = first + j;
        if (v.x != PATTERN(i))     { bad++; low = min(low, j); }
        if (v.y != PATTERN(i + 1)) { bad++; low = min(low, j + 1); }
        if (v.z != PATTERN(i + 2)) { bad++; low = min(low, j + 2); }
        if (v.w != PATTERN(i + 3)) { bad++; low = min(low, j + 3); }
    }
    for (unsigned long long j = quads * 4 + tid; j < count; j += stride)
        if (data[j] != PATTERN(first + j)) { bad++; low = min(low, j); }
    if (bad) {
        atomicAdd(&result[0], bad);
        atomicMin(&result[1], low);
    }
}
"""

NO_MISMATCH = (1 << 64) - 1
BLOCK = 256
BLOCKS_PER_SM = 8


def cache_dir() -> Path:
    """Where compiled kernels are kept: $VMMTUI_CACHE, else $XDG_CACHE_HOME/vmmtui, else ~/.cache/vmmtui."""
    if os.environ.get("VMMTUI_CACHE"):
        return Path(os.environ["VMMTUI_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "vmmtui"


def _nvrtc_check(nvrtc, name: str, res) -> tuple:
    err, *values = res
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise StepError(failure("NVRTC_ERROR", name, nvrtc.nvrtcResult(err).name))
    return tuple(values)


def compile_cubin(arch: str) -> tuple[bytes, str]:
    """NVRTC-compile SOURCE for ``arch`` (``sm_90``); returns the cubin and the compile log."""
    from cuda.bindings import nvrtc

    (prog,) = _nvrtc_check(nvrtc, "nvrtcCreateProgram",
                           nvrtc.nvrtcCreateProgram(SOURCE.encode(), b"vmmtui_pattern.cu", 0, [], []))
    try:
        opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17"]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        (log_size,) = _nvrtc_check(nvrtc, "nvrtcGetProgramLogSize", nvrtc.nvrtcGetProgramLogSize(prog))
        # NVRTC writes into these buffers. Never let one be a 1-byte bytes object: CPython shares those as
        # singletons (b" " * 1 is b" "), and writing the log's NUL into it corrupts every b" " in the process.
        log = b" " * max(log_size, 2)
        _nvrtc_check(nvrtc, "nvrtcGetProgramLog", nvrtc.nvrtcGetProgramLog(prog, log))
        text = log.decode(errors="replace").rstrip("\0 \n")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise StepError(failure("NVRTC_ERROR", "nvrtcCompileProgram", f"{nvrtc.nvrtcResult(err).name}: {text[:300]}"))
        (size,) = _nvrtc_check(nvrtc, "nvrtcGetCUBINSize", nvrtc.nvrtcGetCUBINSize(prog))
        cubin = b" " * max(size, 2)
        _nvrtc_check(nvrtc, "nvrtcGetCUBIN", nvrtc.nvrtcGetCUBIN(prog, cubin))
        return cubin[:size], text
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    major, minor = _nvrtc_check(nvrtc, "nvrtcVersion", nvrtc.nvrtcVersion())
    return f"{major}.{minor}"


def cached_cubin(arch: str) -> tuple[bytes, str]:
    """The cubin for ``arch``, from the disk cache when the same source and NVRTC made it before.

    Returns the cubin and where it came from (``cache <path>`` or ``nvrtc``)."""
    try:
        version = nvrtc_version()
    except StepError:
        raise
    except Exception as exc:  # libnvrtc missing: cuda.pathfinder raises its own error type
        raise StepError(failure("NVRTC_ERROR", "load libnvrtc", f"{type(exc).__name__}: {str(exc)[:200]}")) from exc
    key = hashlib.sha256(f"{SOURCE}\0{arch}\0{version}".encode()).hexdigest()[:16]
    path = cache_dir() / f"pattern-{arch}-{key}.cubin"
    try:
        return path.read_bytes(), f"cache {path}"
    except OSError:
        pass
    cubin, _ = compile_cubin(arch)
    try:  # a cache that cannot be written only costs a compile next time
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(cubin)
        os.replace(tmp, path)
    except OSError:
        pass
    return cubin, "nvrtc"


class PatternKernels:
    """The two kernels loaded into one CUDA context, launched on the backend's own stream."""

    def __init__(self, backend: Driver):
        from cuda.bindings import driver as cu

        self.cu = cu
        self.b = backend
        cc = backend.info.extra.get("compute_capability") or "{}.{}".format(
            backend.attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR"),
            backend.attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR"))
        self.arch = "sm_" + cc.replace(".", "")
        t0 = time.perf_counter_ns()
        cubin, source = cached_cubin(self.arch)
        backend.calls.add(Call("nvrtcCompileProgram" if source == "nvrtc" else "load cached cubin",
                               {"kernels": "fill_pattern, verify_pattern", "arch": self.arch},
                               f"{len(cubin)} bytes" + ("" if source == "nvrtc" else f" from {source[6:]}"),
                               time.perf_counter_ns() - t0))
        self.source = source
        self.module = backend.call("cuModuleLoadData", cu.cuModuleLoadData, cubin, show={"image": f"cubin {self.arch}"})
        self.fill_fn = backend.call("cuModuleGetFunction", cu.cuModuleGetFunction, self.module, b"fill_pattern",
                                    show={"name": "fill_pattern"})
        self.verify_fn = backend.call("cuModuleGetFunction", cu.cuModuleGetFunction, self.module, b"verify_pattern",
                                      show={"name": "verify_pattern"})
        self.sms = backend.attribute("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT") or 1
        self.stream = backend.call("cuStreamCreate", cu.cuStreamCreate, cu.CUstream_flags.CU_STREAM_NON_BLOCKING.value,
                                   show={"flags": "NON_BLOCKING"})
        self.start_ev = backend.call("cuEventCreate", cu.cuEventCreate, 0, show={"flags": 0})
        self.stop_ev = backend.call("cuEventCreate", cu.cuEventCreate, 0, show={"flags": 0})
        self.result = backend.call("cuMemAlloc", cu.cuMemAlloc, 16, show={"bytesize": 16, "what": "verify result"})
        self.host_result = np.zeros(2, dtype=np.uint64)
        self.last_ms: float | None = None
        # CUDA loads kernels lazily at their first launch; do it now, so that no timed launch pays for it
        self._launch(self.fill_fn, "fill_pattern", 0, [int(self.result), 0, 0], note="warm-up: loads the kernel")
        self._launch(self.verify_fn, "verify_pattern", 0, [int(self.result), 0, 0, int(self.result)],
                     note="warm-up: loads the kernel")
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
            lambda: cu.cuLaunchKernel(fn, grid, 1, 1, BLOCK, 1, 1, 0, self.stream, argv.ctypes.data, 0),
            lambda: cu.cuEventRecord(self.stop_ev, self.stream),
            lambda: cu.cuStreamSynchronize(self.stream),
        ):
            (err,) = err_call()
            if err != cu.CUresult.CUDA_SUCCESS:
                b.calls.add(Call("cuLaunchKernel", {"kernel": name}, error_name(err), time.perf_counter_ns() - t0, ok=False))
                raise StepError(failure(error_name(err), f"cuLaunchKernel({name})", error_text(err)))
        wall = time.perf_counter_ns() - t0
        err, ms = cu.cuEventElapsedTime(self.start_ev, self.stop_ev)
        ms = float(ms) if err == cu.CUresult.CUDA_SUCCESS else wall / 1e6
        gbps = count * 4 / (ms / 1e3) / 1e9 if ms > 0 else 0.0
        b.calls.add(Call(f"cuLaunchKernel {name}", {"ptr": hex(int(params[0])), "integers": count, "grid": grid,
                                                    "block": BLOCK, "stream": "own", **({"note": note} if note else {})},
                         f"{ms:.3f} ms on the GPU, {gbps:.0f} GB/s", wall))
        self.last_ms = ms
        return ms

    def fill(self, va: int, count: int, first: int = 0) -> int:
        self._launch(self.fill_fn, "fill_pattern", count, [va, count, first])
        return count

    def verify(self, va: int, count: int, first: int = 0) -> Verification:
        cu, b = self.cu, self.b
        self.host_result[:] = (0, NO_MISMATCH)
        b.call("cuMemcpyHtoD", cu.cuMemcpyHtoD, self.result, self.host_result.ctypes.data, 16,
               show={"what": "reset verify result", "bytes": 16})
        self._launch(self.verify_fn, "verify_pattern", count, [va, count, first, int(self.result)])
        b.call("cuMemcpyDtoH", cu.cuMemcpyDtoH, self.host_result.ctypes.data, self.result, 16,
               show={"what": "verify result", "bytes": 16})
        bad, low = int(self.host_result[0]), int(self.host_result[1])
        if bad == 0:
            return Verification(count, 0)
        got = np.zeros(1, dtype=np.uint32)
        b.call("cuMemcpyDtoH", cu.cuMemcpyDtoH, got.ctypes.data, cu.CUdeviceptr(va + low * 4), 4,
               show={"what": "first mismatching integer", "index": low})
        return Verification(count, bad, low, int(pattern(first + low, 1)[0]), int(got[0]))

    def close(self) -> None:
        cu, b = self.cu, self.b
        b.call("cuMemFree", cu.cuMemFree, self.result, show={"what": "verify result"})
        b.call("cuEventDestroy", cu.cuEventDestroy, self.start_ev)
        b.call("cuEventDestroy", cu.cuEventDestroy, self.stop_ev)
        b.call("cuStreamDestroy", cu.cuStreamDestroy, self.stream)
        b.call("cuModuleUnload", cu.cuModuleUnload, self.module)
