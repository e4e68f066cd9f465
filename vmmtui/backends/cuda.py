"""GPU memory shared between processes with the CUDA VMM driver API (``cuda.bindings.driver``).

Every CUresult is checked: a failure raises StepError naming the error (``CUDA_ERROR_INVALID_VALUE``),
the call and a hint from the troubleshooting table.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np

from vmmtui.backends.base import Backend, DeviceInfo, SizeCheck

# imported with the backend, not on first use: there it cost 2-3 ms (a fresh checkout compiles it)
# inside the pool road's timed query and import steps on the H100
from vmmtui.backends.cuda_pool import CudaPools
from vmmtui.backends.cuda_size import (
    check_size,
)  # imported with the backend: not inside the import step
from vmmtui.backends.errors import checked_call, cu, error_name, error_text
from vmmtui.backends.ipc_bytes import ipc_bytes, ipc_handle
from vmmtui.backends.labels import LABELS
from vmmtui.backends.pattern import CHUNK, pattern, verify_chunks
from vmmtui.stream.failures import StepError, failure
from vmmtui.stream.values import Call, Verification

if TYPE_CHECKING:
    from vmmtui.backends.kernels import PatternKernels

LABEL = LABELS["cuda"]


class CudaBackend(Backend):
    name = "cuda"
    label = LABEL
    title = "CUDA"
    has_device = True
    export_note = "cuMemExportToShareableHandle"

    def __init__(self, calls=None):
        super().__init__(calls)
        self._handles: dict[int, Any] = {}
        self.ctx = None
        self.kernels: PatternKernels | None = None
        self._pools = None

    # -- the one place that checks every CUresult ---------------------------------------------
    def call(self, name: str, fn, *args: Any, show: dict[str, Any] | None = None) -> Any:
        return checked_call(self.calls, name, fn, *args, show=show)

    def _prop(self, shareable: bool = True):
        prop = cu.CUmemAllocationProp()
        prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = self.index
        prop.requestedHandleTypes = (
            cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
            if shareable
            else cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE
        )
        return prop

    def attribute(self, attr_name: str) -> int | None:
        """A cuDeviceGetAttribute value by its enum name; None where this driver's bindings lack it."""
        attr = getattr(cu.CUdevice_attribute, attr_name, None)
        if attr is None:
            return None
        return int(
            self.call(
                "cuDeviceGetAttribute",
                cu.cuDeviceGetAttribute,
                attr,
                self.dev,
                show={"attrib": attr_name.removeprefix("CU_DEVICE_ATTRIBUTE_")},
            )
        )

    # -- steps ------------------------------------------------------------------------------------
    def init(self, device: int) -> DeviceInfo:
        if cu is None:
            raise StepError(
                failure("NO_DRIVER", "import cuda.bindings", "cuda-python is not installed")
            )
        try:
            self.call("cuInit", cu.cuInit, 0, show={"flags": 0})
        except StepError as exc:
            if exc.failure.code == "PYTHON" and "driver" in exc.failure.message.lower():
                raise StepError(failure("NO_DRIVER", "cuInit", exc.failure.message)) from exc
            raise
        self.index = device
        self.driver_version = int(self.call("cuDriverGetVersion", cu.cuDriverGetVersion))
        self.dev = self.call("cuDeviceGet", cu.cuDeviceGet, device, show={"ordinal": device})
        raw = self.call(
            "cuDeviceGetName", cu.cuDeviceGetName, 256, self.dev, show={"len": 256, "dev": device}
        )
        self.device_name = raw.split(b"\0", 1)[0].decode()
        self.ctx = self.call(
            "cuDevicePrimaryCtxRetain", cu.cuDevicePrimaryCtxRetain, self.dev, show={"dev": device}
        )
        self.call("cuCtxSetCurrent", cu.cuCtxSetCurrent, self.ctx, show={"ctx": "primary"})
        self.info = DeviceInfo(
            self.name,
            self.label,
            device,
            self.device_name,
            False,
            False,
            0,
            0,
            {"driver_version": self.driver_version},
        )
        return self.info

    def query(self) -> DeviceInfo:
        info = self.info
        info.vmm = bool(self.attribute("CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED"))
        info.posix_fd = bool(
            self.attribute("CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED")
        )
        major = self.attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR")
        minor = self.attribute("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR")
        info.extra["compute_capability"] = f"{major}.{minor}"
        if not info.vmm:
            raise StepError(
                failure(
                    "CUDA_ERROR_NOT_SUPPORTED",
                    "cuDeviceGetAttribute",
                    "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 0 on this device",
                )
            )
        if not info.posix_fd:
            raise StepError(
                failure(
                    "CUDA_ERROR_NOT_SUPPORTED",
                    "cuDeviceGetAttribute",
                    "HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 0 on this device",
                )
            )
        prop = self._prop()
        flags = cu.CUmemAllocationGranularity_flags
        info.granularity_min = int(
            self.call(
                "cuMemGetAllocationGranularity",
                cu.cuMemGetAllocationGranularity,
                prop,
                flags.CU_MEM_ALLOC_GRANULARITY_MINIMUM,
                show={"option": "MINIMUM"},
            )
        )
        info.granularity_rec = int(
            self.call(
                "cuMemGetAllocationGranularity",
                cu.cuMemGetAllocationGranularity,
                prop,
                flags.CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
                show={"option": "RECOMMENDED"},
            )
        )
        return info

    def create(self, size: int, shareable: bool = True) -> int:
        handle_type = (
            "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR" if shareable else "CU_MEM_HANDLE_TYPE_NONE"
        )
        h = self.call(
            "cuMemCreate",
            cu.cuMemCreate,
            size,
            self._prop(shareable),
            0,
            show={
                "size": size,
                "type": "PINNED",
                "location": f"device {self.index}",
                "requestedHandleTypes": handle_type,
            },
        )
        self._handles[int(h)] = h
        return int(h)

    def create_fabric(self, size: int) -> int:
        """cuMemCreate asking for a fabric handle (for other nodes, over IMEX): refused without an IMEX channel."""
        prop = self._prop()
        prop.requestedHandleTypes = cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_FABRIC
        try:
            h = self.call(
                "cuMemCreate",
                cu.cuMemCreate,
                size,
                prop,
                0,
                show={
                    "size": size,
                    "type": "PINNED",
                    "location": f"device {self.index}",
                    "requestedHandleTypes": "CU_MEM_HANDLE_TYPE_FABRIC",
                },
            )
        except (
            StepError
        ) as exc:  # the fabric's own cause and fix (troubleshooting: "cuMemCreate (fabric)")
            raise StepError(
                failure(exc.failure.code, "cuMemCreate (fabric)", exc.failure.message)
            ) from None
        self._handles[int(h)] = h
        return int(h)

    def free_memory(self) -> tuple[int, int]:
        free, total = self.call("cuMemGetInfo", cu.cuMemGetInfo)
        return int(free), int(total)

    def wrong_release(self, va: int) -> str:
        t0 = time.perf_counter_ns()
        (err,) = cu.cuMemFree(cu.CUdeviceptr(va))
        code = error_name(err)
        self.calls.add(
            Call(
                "cuMemFree",
                {"dptr": hex(va), "note": "WRONG: imported VMM memory"},
                code,
                time.perf_counter_ns() - t0,
                ok=err == cu.CUresult.CUDA_SUCCESS,
            )
        )
        return code

    def reserve(self, size: int, alignment: int) -> int:
        ptr = self.call(
            "cuMemAddressReserve",
            cu.cuMemAddressReserve,
            size,
            alignment,
            0,
            0,
            show={"size": size, "alignment": alignment, "addr": 0, "flags": 0},
        )
        return int(ptr)

    def map(self, va: int, size: int, handle: int) -> None:
        self.call(
            "cuMemMap",
            cu.cuMemMap,
            cu.CUdeviceptr(va),
            size,
            0,
            self._handles[handle],
            0,
            show={"ptr": hex(va), "size": size, "offset": 0, "handle": hex(handle)},
        )

    def set_access(self, va: int, size: int) -> None:
        """Grant this process's device read/write access (a peer device when the memory lives elsewhere)."""
        desc = cu.CUmemAccessDesc()
        desc.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        desc.location.id = self.index
        desc.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        self.call(
            "cuMemSetAccess",
            cu.cuMemSetAccess,
            cu.CUdeviceptr(va),
            size,
            [desc],
            1,
            show={
                "ptr": hex(va),
                "size": size,
                "location": f"device {self.index}",
                "flags": "PROT_READWRITE",
            },
        )

    def _chunked_copy(self, name: str, va: int, count: int, per_chunk) -> None:
        """Run ``per_chunk(start, n)`` over the buffer and record the copies as one call."""
        t0 = time.perf_counter_ns()
        chunks = 0
        for start in range(0, count, CHUNK):
            n = min(CHUNK, count - start)
            per_chunk(start, n)
            chunks += 1
        self.calls.add(
            Call(
                name,
                {"ptr": hex(va), "bytes": count * 4, "chunks": chunks},
                "CUDA_SUCCESS",
                time.perf_counter_ns() - t0,
            )
        )

    def load_kernels(self) -> str:
        return self.loaded_kernels().how

    def loaded_kernels(self) -> PatternKernels:
        """The fill/verify kernels, loaded into the context the first time (StepError if they cannot)."""
        from vmmtui.backends.kernels import PatternKernels

        if self.kernels is None:
            self.kernels = PatternKernels(self)
        return self.kernels

    def last_kernel_ms(self) -> float | None:
        return None if self.kernels is None else self.kernels.last_ms

    def fill(self, va: int, size: int, on: str = "host", first: int = 0) -> int:
        count = size // 4
        if on != "host":
            return self.loaded_kernels().fill(va, count, first)

        def put(start: int, n: int) -> None:
            host = pattern(first + start, n)
            (err,) = cu.cuMemcpyHtoD(cu.CUdeviceptr(va + start * 4), host.ctypes.data, n * 4)
            if err != cu.CUresult.CUDA_SUCCESS:
                raise StepError(failure(error_name(err), "cuMemcpyHtoD", error_text(err)))

        self._chunked_copy("cuMemcpyHtoD", va, count, put)
        return count

    def clear(self, va: int, size: int) -> None:
        self.call(
            "cuMemsetD32",
            cu.cuMemsetD32,
            cu.CUdeviceptr(va),
            0,
            size // 4,
            show={"dstDevice": hex(va), "ui": 0, "N": size // 4},
        )
        self.call("cuCtxSynchronize", cu.cuCtxSynchronize)

    def can_access_peer(self, owner: int) -> bool:
        """Whether this process's device can reach memory that lives on device ``owner``."""
        if owner == self.index:
            return True
        _, peer = cu.cuDeviceGet(owner)
        return bool(
            self.call(
                "cuDeviceCanAccessPeer",
                cu.cuDeviceCanAccessPeer,
                self.dev,
                peer,
                show={"dev": self.index, "peerDev": owner},
            )
        )

    def copy_bandwidth(self, size: int, repeat: int = 5) -> float:
        """The device's own copy speed (cuMemcpyDtoDAsync between two buffers), in GB/s counting bytes
        read and written: the ceiling for the fill and verify kernels. Each copy is timed alone with CUDA
        events, as each kernel is, and the median is kept, so that both pay the same launch cost."""
        k = self.loaded_kernels()
        a, b = self.alloc(size), self.alloc(size)
        try:
            self.call("cuMemsetD32", cu.cuMemsetD32, cu.CUdeviceptr(a), 7, size // 4)
            self.call(
                "cuMemcpyDtoD", cu.cuMemcpyDtoD, cu.CUdeviceptr(b), cu.CUdeviceptr(a), size
            )  # warm-up
            times = []
            for _ in range(repeat):
                self.call("cuEventRecord", cu.cuEventRecord, k.start_ev, k.stream)
                self.call(
                    "cuMemcpyDtoDAsync",
                    cu.cuMemcpyDtoDAsync,
                    cu.CUdeviceptr(b),
                    cu.CUdeviceptr(a),
                    size,
                    k.stream,
                )
                self.call("cuEventRecord", cu.cuEventRecord, k.stop_ev, k.stream)
                self.call("cuStreamSynchronize", cu.cuStreamSynchronize, k.stream)
                times.append(
                    float(
                        self.call(
                            "cuEventElapsedTime", cu.cuEventElapsedTime, k.start_ev, k.stop_ev
                        )
                    )
                )
        finally:
            self.free(a)
            self.free(b)
        ms = sorted(times)[len(times) // 2]
        return 2 * size / (ms / 1e3) / 1e9

    # -- legacy IPC (seed 003): cuMemAlloc + a 64-byte handle, no fd ----------------------------------
    def unified_addressing(self) -> bool:
        return bool(self.attribute("CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING"))

    def alloc(self, size: int) -> int:
        ptr = self.call("cuMemAlloc", cu.cuMemAlloc, size, show={"bytesize": size})
        return int(ptr)

    def ipc_export(self, ptr: int) -> bytes:
        h = self.call(
            "cuIpcGetMemHandle", cu.cuIpcGetMemHandle, cu.CUdeviceptr(ptr), show={"dptr": hex(ptr)}
        )
        return ipc_bytes(h)

    @staticmethod
    def _ipc_handle(handle: bytes):
        return ipc_handle(cu.CUipcMemHandle, handle)

    def ipc_open(self, handle: bytes) -> int:
        ptr = self.call(
            "cuIpcOpenMemHandle",
            cu.cuIpcOpenMemHandle,
            self._ipc_handle(handle),
            cu.CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS.value,
            show={"handle": handle[:8].hex() + "…", "Flags": "CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS"},
        )
        return int(ptr)

    def ipc_open_in_second_context(self, handle: bytes) -> str:
        """Open ``handle`` from a second context on this device (seed 003 forbids it); returns the result.

        The second context is destroyed and the primary one made current again, whatever happened."""
        t0 = time.perf_counter_ns()
        try:
            err, ctx = cu.cuCtxCreate(None, 0, self.dev)  # CUDA 13: (params, flags, dev)
        except TypeError:
            err, ctx = cu.cuCtxCreate(0, self.dev)  # CUDA 12: (flags, dev)
        self.calls.add(
            Call(
                "cuCtxCreate",
                {"flags": 0, "dev": self.index, "note": "a second context"},
                error_name(err) if err != cu.CUresult.CUDA_SUCCESS else "CUDA_SUCCESS",
                time.perf_counter_ns() - t0,
                ok=err == cu.CUresult.CUDA_SUCCESS,
            )
        )
        if err != cu.CUresult.CUDA_SUCCESS:
            raise StepError(failure(error_name(err), "cuCtxCreate", error_text(err)))
        try:
            t0 = time.perf_counter_ns()
            err, ptr = cu.cuIpcOpenMemHandle(
                self._ipc_handle(handle), cu.CUipcMem_flags.CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS.value
            )
            code = error_name(err)
            self.calls.add(
                Call(
                    "cuIpcOpenMemHandle",
                    {"handle": handle[:8].hex() + "…", "context": "second"},
                    code if err != cu.CUresult.CUDA_SUCCESS else hex(int(ptr)),
                    time.perf_counter_ns() - t0,
                    ok=err == cu.CUresult.CUDA_SUCCESS,
                )
            )
            if err == cu.CUresult.CUDA_SUCCESS:
                self.call(
                    "cuIpcCloseMemHandle", cu.cuIpcCloseMemHandle, ptr, show={"dptr": hex(int(ptr))}
                )
            return code
        finally:
            self.call("cuCtxDestroy", cu.cuCtxDestroy, ctx, show={"ctx": "second"})
            self.call("cuCtxSetCurrent", cu.cuCtxSetCurrent, self.ctx, show={"ctx": "primary"})

    def ipc_close(self, ptr: int) -> None:
        self.call(
            "cuIpcCloseMemHandle",
            cu.cuIpcCloseMemHandle,
            cu.CUdeviceptr(ptr),
            show={"dptr": hex(ptr)},
        )

    def free(self, ptr: int) -> None:
        self.call("cuMemFree", cu.cuMemFree, cu.CUdeviceptr(ptr), show={"dptr": hex(ptr)})

    def export_fd(self, handle: int) -> int:
        fd = self.call(
            "cuMemExportToShareableHandle",
            cu.cuMemExportToShareableHandle,
            self._handles[handle],
            cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            0,
            show={
                "handle": hex(handle),
                "handleType": "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR",
                "flags": 0,
            },
        )
        return int(fd)

    def import_fd(self, fd: int) -> int:
        h = self.call(
            "cuMemImportFromShareableHandle",
            cu.cuMemImportFromShareableHandle,
            fd,
            cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            show={"osHandle": fd, "shHandleType": "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR"},
        )
        self._handles[int(h)] = h
        return int(h)

    def check_size(self, fd: int, handle: int, claimed: int) -> SizeCheck:
        """The driver's cheap checks; the map step's real mapping is the last (cuda_size's docstring)."""
        return check_size(self, handle, claimed)

    def verify(self, va: int, size: int, on: str = "host") -> Verification:
        if on == "host":
            return self.verify_host(va, size)
        device = self.loaded_kernels().verify(va, size // 4)
        if on == "both":
            host = self.verify_host(va, size)
            if (host.mismatches, host.first_index) != (device.mismatches, device.first_index):
                raise StepError(
                    failure(
                        "VERIFY_DISAGREE",
                        "verify",
                        f"kernel: {device.describe()}; host: {host.describe()}",
                    )
                )
        return device

    def verify_host(self, va: int, size: int) -> Verification:
        """The seed's way: copy to the host in chunks and compare with numpy."""
        count = size // 4
        buf = np.empty(min(CHUNK, count), dtype=np.uint32)
        t_copy = 0

        def read(start: int, n: int) -> np.ndarray:
            nonlocal t_copy
            t0 = time.perf_counter_ns()
            (err,) = cu.cuMemcpyDtoH(buf.ctypes.data, cu.CUdeviceptr(va + start * 4), n * 4)
            t_copy += time.perf_counter_ns() - t0
            if err != cu.CUresult.CUDA_SUCCESS:
                raise StepError(failure(error_name(err), "cuMemcpyDtoH", error_text(err)))
            return buf[:n]

        t0 = time.perf_counter_ns()
        result = verify_chunks(count, read)
        total = time.perf_counter_ns() - t0
        self.calls.add(
            Call("cuMemcpyDtoH", {"ptr": hex(va), "bytes": size}, "CUDA_SUCCESS", t_copy)
        )
        self.calls.add(
            Call(
                "compare pattern (host)",
                {"integers": count},
                "PASSED" if result.passed else f"FAILED ({result.mismatches} differ)",
                total - t_copy,
            )
        )
        return result

    def unmap(self, va: int, size: int) -> None:
        self.call(
            "cuMemUnmap",
            cu.cuMemUnmap,
            cu.CUdeviceptr(va),
            size,
            show={"ptr": hex(va), "size": size},
        )

    def free_range(self, va: int, size: int) -> None:
        self.call(
            "cuMemAddressFree",
            cu.cuMemAddressFree,
            cu.CUdeviceptr(va),
            size,
            show={"ptr": hex(va), "size": size},
        )

    def release(self, handle: int) -> None:
        self.call(
            "cuMemRelease", cu.cuMemRelease, self._handles.pop(handle), show={"handle": hex(handle)}
        )

    def pools(self):
        """The memory-pool calls (``cuda_pool.CudaPools``), made on first use."""
        if self._pools is None:
            self._pools = CudaPools(self)
        return self._pools

    def shutdown(self) -> None:
        if self._pools is not None:
            pools, self._pools = self._pools, None
            pools.close()
        if self.kernels is not None:
            kernels, self.kernels = self.kernels, None
            kernels.close()
        if self.ctx is not None:
            self.ctx = None
            self.call(
                "cuDevicePrimaryCtxRelease",
                cu.cuDevicePrimaryCtxRelease,
                self.dev,
                show={"dev": self.index},
            )
