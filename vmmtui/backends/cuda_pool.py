"""Stream-ordered memory pools shared between processes (``cuda.bindings.driver``).

The exporter makes a pool with a POSIX-fd handle type, allocates from it on a stream, exports the
pool as an fd (cuMemPoolExportToShareableHandle) and each allocation as 64 bytes of
CUmemPoolPtrExportData (cuMemPoolExportPointer). The importer turns the fd into a pool of its own
(cuMemPoolImportFromShareableHandle) and the 64 bytes into a pointer (cuMemPoolImportPointer). The
importer frees first: the driver requires imported pointers to be freed, and the free completed,
before the exporter frees. cuda.core's ``DeviceMemoryResource(ipc_enabled=True)`` and
``IPCBufferDescriptor`` are built on these calls. Every CUresult is checked through the backend.
"""

from __future__ import annotations

import ctypes
from typing import Any, Protocol

from vmmtui.backends.errors import cu
from vmmtui.stream.failures import StepError, failure

EXPORT_DATA_BYTES = 64
POSIX_FD = "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR"


class Driver(Protocol):
    """What the pools use of vmmtui.backends.cuda.CudaBackend (not imported: cuda imports this module)."""

    index: int

    def call(self, name: str, fn, *args: Any, show: dict[str, Any] | None = None) -> Any: ...

    def attribute(self, attr_name: str) -> int | None: ...


class CudaPools:
    """The pools and pool pointers of one process, and the stream their allocations are ordered on."""

    def __init__(self, backend: Driver):
        self.b = backend
        self._pools: dict[int, Any] = {}
        self._stream = None

    @property
    def stream(self):
        if self._stream is None:
            self._stream = self.b.call(
                "cuStreamCreate",
                cu.cuStreamCreate,
                cu.CUstream_flags.CU_STREAM_NON_BLOCKING.value,
                show={"Flags": "CU_STREAM_NON_BLOCKING"},
            )
        return self._stream

    def query(self) -> dict[str, Any]:
        """MEMORY_POOLS_SUPPORTED and the pool handle types (a bit mask); StepError where pools cannot share."""
        pools = bool(self.b.attribute("CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED"))
        types = self.b.attribute("CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES") or 0
        fd_bit = int(cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        found = {
            "memory_pools": pools,
            "pool_handle_types": types,
            "pool_posix_fd": bool(types & fd_bit),
        }
        if not pools:
            raise StepError(
                failure(
                    "CUDA_ERROR_NOT_SUPPORTED", "cuDeviceGetAttribute", "MEMORY_POOLS_SUPPORTED = 0"
                )
            )
        if not types & fd_bit:
            raise StepError(
                failure(
                    "CUDA_ERROR_NOT_SUPPORTED",
                    "cuDeviceGetAttribute",
                    f"MEMPOOL_SUPPORTED_HANDLE_TYPES = {types:#x}: no POSIX_FILE_DESCRIPTOR bit",
                )
            )
        return found

    def create(self, shareable: bool = True) -> int:
        props = cu.CUmemPoolProps()
        props.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        props.handleTypes = (
            cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
            if shareable
            else cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_NONE
        )
        props.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        props.location.id = self.b.index
        pool = self.b.call(
            "cuMemPoolCreate",
            cu.cuMemPoolCreate,
            props,
            show={
                "allocType": "PINNED",
                "handleTypes": POSIX_FD if shareable else "CU_MEM_HANDLE_TYPE_NONE",
                "location": f"device {self.b.index}",
            },
        )
        self._pools[int(pool)] = pool
        return int(pool)

    def alloc(self, pool: int, size: int) -> int:
        """An allocation from ``pool``, usable once this returns (the stream is synchronized)."""
        ptr = self.b.call(
            "cuMemAllocFromPoolAsync",
            cu.cuMemAllocFromPoolAsync,
            size,
            self._pools[pool],
            self.stream,
            show={"bytesize": size, "pool": hex(pool), "hStream": "ours"},
        )
        self.sync()
        return int(ptr)

    def sync(self) -> None:
        self.b.call("cuStreamSynchronize", cu.cuStreamSynchronize, self.stream)

    def export_fd(self, pool: int) -> int:
        fd = self.b.call(
            "cuMemPoolExportToShareableHandle",
            cu.cuMemPoolExportToShareableHandle,
            self._pools[pool],
            cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            0,
            show={"pool": hex(pool), "handleType": POSIX_FD, "flags": 0},
        )
        return int(fd)

    def export_pointer(self, ptr: int) -> bytes:
        """The 64 bytes of CUmemPoolPtrExportData (read through its address: opaque in the bindings)."""
        data = self.b.call(
            "cuMemPoolExportPointer",
            cu.cuMemPoolExportPointer,
            cu.CUdeviceptr(ptr),
            show={"ptr": hex(ptr)},
        )
        return ctypes.string_at(data.getPtr(), EXPORT_DATA_BYTES)

    def import_fd(self, fd: int) -> int:
        pool = self.b.call(
            "cuMemPoolImportFromShareableHandle",
            cu.cuMemPoolImportFromShareableHandle,
            fd,
            cu.CUmemAllocationHandleType.CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            0,
            show={"handle": fd, "handleType": POSIX_FD, "flags": 0},
        )
        self._pools[int(pool)] = pool
        return int(pool)

    def import_pointer(self, pool: int, export_data: bytes) -> int:
        if len(export_data) != EXPORT_DATA_BYTES:
            raise StepError(
                failure(
                    "BAD_MESSAGE", "cuMemPoolImportPointer", f"{len(export_data)} bytes, not 64"
                )
            )
        data = cu.CUmemPoolPtrExportData()
        ctypes.memmove(data.getPtr(), export_data, EXPORT_DATA_BYTES)
        ptr = self.b.call(
            "cuMemPoolImportPointer",
            cu.cuMemPoolImportPointer,
            self._pools[pool],
            data,
            show={"pool": hex(pool), "shareData": export_data[:8].hex() + "…"},
        )
        return int(ptr)

    def allocation_size(self, ptr: int) -> int:
        """What the driver says of the allocation behind ``ptr`` (cuMemGetAddressRange: base, size)."""
        _base, size = self.b.call(
            "cuMemGetAddressRange",
            cu.cuMemGetAddressRange,
            cu.CUdeviceptr(ptr),
            show={"dptr": hex(ptr)},
        )
        return int(size)

    def free(self, ptr: int) -> None:
        """cuMemFreeAsync on our stream, completed before this returns (an importer must finish first)."""
        self.b.call(
            "cuMemFreeAsync",
            cu.cuMemFreeAsync,
            cu.CUdeviceptr(ptr),
            self.stream,
            show={"dptr": hex(ptr), "hStream": "ours"},
        )
        self.sync()

    def destroy(self, pool: int) -> None:
        self.b.call(
            "cuMemPoolDestroy", cu.cuMemPoolDestroy, self._pools.pop(pool), show={"pool": hex(pool)}
        )

    def close(self) -> None:
        """The stream goes before the context it belongs to."""
        if self._stream is not None:
            stream, self._stream = self._stream, None
            self.b.call("cuStreamDestroy", cu.cuStreamDestroy, stream)
