"""How the allocation is shared: VMM (cuMemCreate + an exported fd) or legacy IPC (cuMemAlloc + 64 bytes).

Each step that differs between the two asks the worker's ``Sharing``: query, create, export, the
payload sent, what receive expects, import and release. The step bodies stay the same.
"""

from __future__ import annotations

import os
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from vmmtui.plan.steps import CONSUMER
from vmmtui.stream.failures import StepError, failure
from vmmtui.stream.sizes import align_up
from vmmtui.stream.state import HeldKind
from vmmtui.stream.values import AllocMessage
from vmmtui.wire import channel
from vmmtui.worker import transport

if TYPE_CHECKING:
    from vmmtui.worker.core import Worker

Attempt = Callable[..., None]
IPC_HANDLE_BYTES = 64


class Sharing(ABC):
    #: the mechanism's name in the banner (``=== CUDA VMM Producer ===``)
    title: str = ""
    #: fds that travel with the metadata
    want_fds: int = 0
    #: what the consumer's recvmsg waits for, as the call log shows it
    wants: str = ""
    #: whether the consumer's import step checks the fd's size with the backend (VMM); pools ask the driver
    checks_size: bool = False
    #: pool: the allocation's 64 bytes of export data, sent beside the fd (hex)
    export_data: str = ""

    @abstractmethod
    def query(self, w: Worker) -> None:
        """What the device supports for this mechanism; sets the size to allocate."""

    @abstractmethod
    def create(self, w: Worker) -> None: ...

    @abstractmethod
    def export(self, w: Worker) -> None:
        """Make what will travel to the consumers (an fd, or the handle's bytes)."""

    def send(self, w: Worker, sock: socket.socket, peer: str) -> AllocMessage:
        """Send the metadata and this mechanism's payload to ``peer``; returns what was sent."""
        s = w.state
        ipc_handle, fds, shown, line = self.payload(w, peer)
        message = AllocMessage(
            w.cfg.size,
            s.alloc_size,
            s.granularity or 0,
            s.device or 0,
            s.device_name,
            w.backend.name,
            w.cfg.mechanism,
            ipc_handle,
        )
        message.export_data = self.export_data
        fds, shown, line = transport.offer(w, message, fds, shown, line, peer)
        w.backend.calls.timed(
            "sendmsg",
            {"fd": sock.fileno(), **shown},
            lambda: channel.send_message(sock, message, fds, w.cfg.connect_timeout),
            lambda n: f"{n} bytes",
        )
        w.say(line)
        return message

    @abstractmethod
    def payload(self, w: Worker, peer: str) -> tuple[str, list[int], dict[str, Any], str]:
        """(IPC handle in hex, fds to pass, what the call log shows, the log line)."""

    @abstractmethod
    def received(self, w: Worker, message: AllocMessage, fds: list[int]) -> None:
        """Keep what arrived (already checked: the fd count, the backend and mechanism)."""

    @abstractmethod
    def import_(self, w: Worker) -> None:
        """Make the producer's memory reachable in this process."""

    @abstractmethod
    def release(self, w: Worker, attempt: Attempt) -> None:
        """Undo create/import and any mapping; each call through ``attempt`` so that the rest still runs."""


class VmmSharing(Sharing):
    title = "VMM"
    want_fds = 1
    wants = "1 fd (SCM_RIGHTS) + metadata"
    checks_size = True

    def query(self, w: Worker) -> None:
        info = w.backend.query()
        gran = info.granularity_min
        s = w.state
        s.capabilities = {"vmm": info.vmm, "posix_fd": info.posix_fd, **info.extra}
        s.granularity, s.granularity_recommended = gran, info.granularity_rec
        s.alloc_size = align_up(w.cfg.size, gran)
        if w.backend.has_device:
            w.say(f"VMM support: {'yes' if info.vmm else 'no'}")
        else:
            w.say(
                f"No VMM needed on {w.backend.name}: the allocation is a file, shareable as an fd from the start"
            )
        w.say(f"Memory granularity: {gran} bytes (recommended {info.granularity_rec})")
        if "unrounded-size" in w.flags:
            s.alloc_size = w.cfg.size if w.cfg.size % gran else w.cfg.size + 1
            w.say(f"SCENARIO: using {s.alloc_size} bytes as is, not rounded to {gran}")
        elif "oversize" in w.flags:
            free, total = w.backend.free_memory() or (0, 0)
            s.alloc_size = align_up(free + (1 << 30), gran)
            s.device_memory = (free, total)
            w.say(f"SCENARIO: {free} bytes free of {total}; asking for {s.alloc_size}")
        else:
            w.say(f"Buffer size: {w.cfg.size} bytes, aligned size: {s.alloc_size} bytes")

    def create(self, w: Worker) -> None:
        shareable = "without-fd-handle-type" not in w.flags
        if not shareable:
            w.say("SCENARIO: creating without requestedHandleTypes = POSIX_FILE_DESCRIPTOR")
        if "fabric-handle" in w.flags and w.backend.has_device:
            w.say(
                "SCENARIO: requesting CU_MEM_HANDLE_TYPE_FABRIC (a handle for other nodes, over IMEX)"
            )
            w.handle = w.backend.create_fabric(w.state.alloc_size)
        else:
            w.handle = w.backend.create(w.state.alloc_size, shareable=shareable)
        w.state.mapping.handle = w.handle
        fd = w.backend.handle_fd(w.handle)
        if fd is not None:
            w.book.hold(fd, HeldKind.ALLOCATION, "the allocation itself (memfd)")
        w.say(
            "Created physical memory allocation"
            if w.backend.has_device
            else f"Created a memfd of {w.state.alloc_size} bytes (its pages are allocated when first touched)"
        )

    def export(self, w: Worker) -> None:
        fd = w.backend.export_fd(w.allocation)
        w.book.hold(fd, HeldKind.EXPORTED, f"exported allocation ({w.backend.export_note})")
        w.state.exported_fd = fd
        w.say(f"Exported allocation as FD: {fd}")

    def payload(self, w: Worker, peer: str) -> tuple[str, list[int], dict[str, Any], str]:
        fd = w.state.exported_fd
        if fd is None:
            raise StepError(failure("PROTOCOL", "sendmsg", "nothing exported to send"))
        return (
            "",
            [fd],
            {"SCM_RIGHTS": [fd], "bytes": "metadata"},
            f"Sent FD and size metadata to {peer}",
        )

    def received(self, w: Worker, message: AllocMessage, fds: list[int]) -> None:
        w.state.received_fd = fds[0]
        how = "Holding the taken FD" if transport.takes_fd(w) else "Received FD"
        w.say(f"{how}: {fds[0]}, size: {message.alloc_size} bytes")

    def import_(self, w: Worker) -> None:
        w.handle = w.backend.import_fd(w.received_fd)
        w.state.mapping.handle = w.handle
        fd = w.backend.handle_fd(w.handle)
        if fd is not None:
            w.book.hold(fd, HeldKind.IMPORTED, "imported handle (dup of the received memfd)")
        w.say("Imported allocation handle from FD")

    def release(self, w: Worker, attempt: Attempt) -> None:
        size = w.state.alloc_size
        if w.mapped:
            attempt(w.backend.unmap, w.va, size)
            w.mapped = False
        if w.va is not None:
            attempt(w.backend.free_range, w.va, size)
            w.va = None
        if w.handle is not None:
            hfd = w.backend.handle_fd(w.handle)
            attempt(w.backend.release, w.handle)
            if hfd is not None:
                w.book.forget(hfd)
            w.handle = None


class LegacySharing(Sharing):
    """Seed 003: cuMemAlloc memory (mapped from the start) and a 64-byte handle that travels as bytes."""

    title = "legacy IPC"
    want_fds = 0
    wants = "metadata + 64-byte handle, no fd"

    def query(self, w: Worker) -> None:
        unified = w.backend.unified_addressing()
        s = w.state
        s.capabilities = {"unified_addressing": unified, **(w.info.extra if w.info else {})}
        s.granularity, s.alloc_size = 4, align_up(w.cfg.size, 4)
        if not unified:
            raise StepError(
                failure(
                    "CUDA_ERROR_NOT_SUPPORTED",
                    "cuDeviceGetAttribute",
                    "UNIFIED_ADDRESSING = 0: legacy IPC needs it",
                )
            )
        w.say("Legacy IPC: cuMemAlloc + cuIpcGetMemHandle (no VMM, no granularity, no fd)")
        w.say(f"Buffer size: {s.alloc_size} bytes")

    def create(self, w: Worker) -> None:
        size = w.state.alloc_size
        w.va = w.backend.alloc(size)
        m = w.state.mapping
        m.handle, m.va, m.size, m.access = None, w.va, size, "read/write"
        w.say(f"Allocated {size} bytes with cuMemAlloc at 0x{w.va:x}")

    def export(self, w: Worker) -> None:
        handle = w.backend.ipc_export(w.address)
        w.state.mapping.ipc_handle = handle.hex()
        w.say(f"Got the IPC handle (64 bytes, no fd): {handle[:16].hex()}…")

    def payload(self, w: Worker, peer: str) -> tuple[str, list[int], dict[str, Any], str]:
        return (
            w.state.mapping.ipc_handle,
            [],
            {"SCM_RIGHTS": "none", "bytes": "metadata + 64-byte handle"},
            f"Sent the 64-byte IPC handle and size to {peer} (no fd)",
        )

    def received(self, w: Worker, message: AllocMessage, fds: list[int]) -> None:
        try:
            valid = len(bytes.fromhex(message.ipc_handle)) == IPC_HANDLE_BYTES
        except ValueError:
            valid = False
        if not valid:
            raise StepError(
                failure(
                    "BAD_MESSAGE",
                    "recvmsg",
                    f"ipc_handle is not {IPC_HANDLE_BYTES} bytes in hex: "
                    f"{message.ipc_handle[:40]!r}",
                )
            )
        w.state.mapping.ipc_handle = message.ipc_handle
        w.say(
            f"Received IPC handle {message.ipc_handle[:32]}… (64 bytes, no fd), size: {message.alloc_size} bytes"
        )

    def import_(self, w: Worker) -> None:
        handle = bytes.fromhex(w.state.mapping.ipc_handle)
        w.va = w.backend.ipc_open(handle)
        size = w.state.alloc_size
        m = w.state.mapping
        m.va, m.size, m.access = w.va, size, "read/write"
        w.say(f"Opened the IPC handle: the producer's memory is at 0x{w.va:x} in this process")
        if "open-second-context" in w.flags:
            self._second_context(w, handle)

    @staticmethod
    def _second_context(w: Worker, handle: bytes) -> None:
        """Seed 003's rule, tried for real: again in this context (counted), then from a second context."""
        again = w.backend.ipc_open(handle)
        w.say(
            f"SCENARIO: opened again in the same context: {'the same pointer' if again == w.va else 'a NEW pointer'} "
            f"0x{again:x} (the driver counts the opens)"
        )
        w.backend.ipc_close(again)
        code = w.backend.ipc_open_in_second_context(handle)
        w.state.scenario_results["second_context"] = code
        if code == "CUDA_SUCCESS":
            w.say(
                "SCENARIO: a second context on the same device opened it too: this driver did not enforce the rule"
            )
            return
        raise StepError(
            failure(
                code,
                "cuIpcOpenMemHandle (second context)",
                f"a second context on device {w.state.device} in pid {os.getpid()}",
            )
        )

    def release(self, w: Worker, attempt: Attempt) -> None:
        if w.va is not None:
            attempt(w.backend.ipc_close if w.kind == CONSUMER else w.backend.free, w.va)
            w.va = None
        w.handle = None


class PoolSharing(Sharing):
    """A stream-ordered memory pool exported as an fd, and one allocation from it as 64 bytes of export data.

    The producer's pool lives in ``w.handle`` and the allocation at ``w.va``; the consumer's imported
    pool and pointer likewise. Release frees the pointer (completed), then destroys the pool."""

    title = "memory pool"
    want_fds = 1
    wants = "1 fd (SCM_RIGHTS) + metadata + 64 bytes of pointer export data"

    def query(self, w: Worker) -> None:
        found = w.backend.pools().query()
        s = w.state
        s.capabilities = {**found, **(w.info.extra if w.info else {})}
        s.granularity, s.alloc_size = 4, align_up(w.cfg.size, 4)
        w.say(
            f"Memory pools: yes; pool handle types {found['pool_handle_types']:#x} "
            "(POSIX_FILE_DESCRIPTOR among them)"
        )
        w.say(f"Buffer size: {s.alloc_size} bytes (pool allocations take any size)")

    def create(self, w: Worker) -> None:
        pools = w.backend.pools()
        shareable = "pool-without-handle-type" not in w.flags
        if not shareable:
            w.say("SCENARIO: creating the pool with handleTypes = CU_MEM_HANDLE_TYPE_NONE")
        w.handle = pools.create(shareable)
        size = w.state.alloc_size
        w.va = pools.alloc(w.handle, size)
        m = w.state.mapping
        m.handle, m.va, m.size, m.access = w.handle, w.va, size, "read/write"
        w.say(f"Created a pool 0x{w.handle:x} and allocated {size} bytes from it at 0x{w.va:x}")

    def export(self, w: Worker) -> None:
        pools = w.backend.pools()
        fd = pools.export_fd(w.handle)
        w.book.hold(fd, HeldKind.EXPORTED, "exported pool (cuMemPoolExportToShareableHandle)")
        w.state.exported_fd = fd
        self.export_data = pools.export_pointer(w.va).hex()
        w.say(f"Exported the pool as FD: {fd}")
        w.say(f"Exported the pointer: 64 bytes of export data {self.export_data[:32]}…")

    def payload(self, w: Worker, peer: str) -> tuple[str, list[int], dict[str, Any], str]:
        fd = w.state.exported_fd
        if fd is None:
            raise StepError(failure("PROTOCOL", "sendmsg", "nothing exported to send"))
        return (
            "",
            [fd],
            {"SCM_RIGHTS": [fd], "bytes": "metadata + 64 bytes of pointer export data"},
            f"Sent the pool's FD and the pointer's export data to {peer}",
        )

    def received(self, w: Worker, message: AllocMessage, fds: list[int]) -> None:
        try:
            valid = len(bytes.fromhex(message.export_data)) == IPC_HANDLE_BYTES
        except ValueError:
            valid = False
        if not valid:
            raise StepError(
                failure(
                    "BAD_MESSAGE",
                    "recvmsg",
                    f"export_data is not {IPC_HANDLE_BYTES} bytes in hex: {message.export_data[:40]!r}",
                )
            )
        self.export_data = message.export_data
        w.state.received_fd = fds[0]
        w.say(
            f"Received the pool's FD: {fds[0]} and 64 bytes of export data, size: {message.alloc_size}"
        )

    def import_(self, w: Worker) -> None:
        pools = w.backend.pools()
        w.handle = pools.import_fd(w.state.received_fd)
        w.va = pools.import_pointer(w.handle, bytes.fromhex(self.export_data))
        s = w.state
        reported = pools.allocation_size(w.va)
        s.size_claimed, s.size_reported, s.size_source = (
            s.alloc_size,
            reported,
            "driver cuMemGetAddressRange",
        )
        if reported < s.alloc_size:
            raise StepError(
                failure(
                    "SIZE_MISMATCH",
                    "import",
                    f"the producer claimed {s.alloc_size} bytes; the driver reports {reported}",
                )
            )
        m = s.mapping
        m.handle, m.va, m.size, m.access = w.handle, w.va, s.alloc_size, "read/write"
        w.say(f"Imported the pool 0x{w.handle:x} and the pointer: 0x{w.va:x} in this process")
        w.say(
            f"Size claimed {s.alloc_size} bytes; the driver reports {reported} (cuMemGetAddressRange)"
        )

    def release(self, w: Worker, attempt: Attempt) -> None:
        if not w.backend_loaded:
            return
        pools = w.backend.pools()
        if w.va is not None:
            attempt(pools.free, w.va)
            w.va = None
        if w.handle is not None:
            attempt(pools.destroy, w.handle)
            w.handle = None
