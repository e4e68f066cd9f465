"""The interface both backends implement, and the record of every driver or system call they make."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vmmtui.stream.failures import StepError, failure
from vmmtui.stream.values import Call, Verification


@dataclass
class CallLog:
    """Calls made since the last ``take()``; a worker takes them once per step."""

    calls: list[Call] = field(default_factory=list)

    def timed(
        self,
        name: str,
        args: dict[str, Any],
        fn: Callable[[], Any],
        show: Callable[[Any], str] = repr,
    ) -> Any:
        """Run ``fn``, record it, and return its value; an exception is recorded then re-raised."""
        t0 = time.perf_counter_ns()
        try:
            value = fn()
        except Exception as exc:
            self.calls.append(
                Call(
                    name,
                    args,
                    f"{type(exc).__name__}: {exc}",
                    time.perf_counter_ns() - t0,
                    ok=False,
                )
            )
            raise
        self.calls.append(Call(name, args, show(value), time.perf_counter_ns() - t0))
        return value

    def add(self, call: Call) -> None:
        self.calls.append(call)

    def take(self) -> list[Call]:
        calls, self.calls = self.calls, []
        return calls


@dataclass
class DeviceInfo:
    """What the backend found about the device it runs on."""

    backend: str
    label: str
    index: int
    name: str
    vmm: bool
    posix_fd: bool
    granularity_min: int
    granularity_rec: int
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class SizeCheck:
    """What this process learnt about an imported allocation's size, against what the peer claimed.

    ``reported`` is None where the kernel or driver cannot tell; ``code`` is set when the import
    must be refused (SIZE_MISMATCH, UNSEALED)."""

    claimed: int
    reported: int | None
    source: str
    seals: str = ""
    code: str = ""
    detail: str = ""
    #: the allocation's granularity as the kernel or driver reports it (None: not known)
    granularity: int | None = None
    #: the claim stands until the map step: its real mapping of the claimed size is the last check
    by_map: bool = False

    def refuse(self, code: str, detail: str) -> None:
        self.code, self.detail = code, detail


class Backend(ABC):
    """One way to make, share and map memory. ``cuda`` and ``memfd`` implement the same steps.

    Handles and addresses are plain ints so that they can be shown and sent as JSON.
    """

    name: str = ""
    label: str = ""
    #: the backend's name in the worker's banner (``=== CUDA VMM Producer ===``)
    title: str = ""
    #: whether the memory lives on a device (a GPU) driven by this backend; memfd's is CPU memory
    has_device: bool = False
    #: what made the exported fd, for its note in the fd table
    export_note: str = ""

    def __init__(self, calls: CallLog | None = None):
        self.calls = calls or CallLog()

    @abstractmethod
    def init(self, device: int) -> DeviceInfo: ...

    @abstractmethod
    def query(self) -> DeviceInfo:
        """Capabilities and granularity; raises StepError when sharing cannot work here."""

    @abstractmethod
    def create(self, size: int, shareable: bool = True) -> int: ...

    def create_fabric(self, size: int) -> int:
        """An allocation with fabric handles (other nodes, over IMEX): a device backend's only."""
        raise NotImplementedError(f"{type(self).__name__} has no fabric handles")

    @abstractmethod
    def reserve(self, size: int, alignment: int) -> int: ...

    @abstractmethod
    def map(self, va: int, size: int, handle: int) -> None: ...

    @abstractmethod
    def set_access(self, va: int, size: int) -> None: ...

    def load_kernels(self) -> str | None:
        """Make the device fill/verify kernels ready (compile or load from cache); say where they came from.

        Host-only backends have none (None)."""
        return None

    def last_kernel_ms(self) -> float | None:
        """The last kernel's GPU time (CUDA events), for the bench and the mapping card; None without kernels."""
        return None

    @abstractmethod
    def fill(self, va: int, size: int, on: str = "host", first: int = 0) -> int:
        """Write the pattern (indices from ``first``) over ``size`` bytes, on the host or the device.

        Returns the number of integers written."""

    @abstractmethod
    def clear(self, va: int, size: int) -> None:
        """Set every byte to 0 (the producer's first step when the consumers write)."""

    def can_access_peer(self, owner: int) -> bool:
        """Whether this process's device can reach memory on device ``owner`` (one device: always)."""
        return True

    @abstractmethod
    def export_fd(self, handle: int) -> int: ...

    @abstractmethod
    def import_fd(self, fd: int) -> int: ...

    def check_size(self, fd: int, handle: int, claimed: int) -> SizeCheck:
        """Before mapping: what the kernel or driver says of the imported allocation's size (the received
        ``fd``, the imported ``handle``) against the ``claimed`` size; a refusal sets ``code``."""
        return SizeCheck(claimed, None, "not checked")

    @abstractmethod
    def verify(self, va: int, size: int, on: str = "host") -> Verification:
        """Check the pattern: ``host``, ``device`` (a kernel) or ``both`` (and they must agree)."""

    @abstractmethod
    def unmap(self, va: int, size: int) -> None: ...

    @abstractmethod
    def free_range(self, va: int, size: int) -> None: ...

    @abstractmethod
    def release(self, handle: int) -> None: ...

    def free_memory(self) -> tuple[int, int] | None:
        """(free, total) bytes of device memory, where the backend has a device to ask."""
        return None

    @abstractmethod
    def wrong_release(self, va: int) -> str:
        """The wrong release (worker flag ``wrong-release``): free ``va`` with the call meant for another kind of memory.

        Returns the result as the driver or library gave it; may kill the process (that is the lesson).
        """

    def handle_fd(self, handle: int) -> int | None:
        """The fd a handle itself occupies in this process, if any (memfd's handles are fds)."""
        return None

    def shutdown(self) -> None:
        """Release the context or whatever ``init`` acquired (nothing by default)."""
        return None

    def pools(self) -> Any:
        """Stream-ordered memory pools (create, export, import, free): a CUDA driver road only."""
        raise StepError(
            failure(
                "UNAVAILABLE",
                "cuMemPoolCreate",
                f"{self.name} has no memory pools: they are stream-ordered CUDA allocations",
            )
        )

    # -- legacy IPC (seed 003): cuMemAlloc + a 64-byte handle, no fd. Only a device driver has it. ----
    def _no_legacy(self, call: str) -> StepError:
        return StepError(
            failure(
                "UNAVAILABLE",
                call,
                f"{self.name} has no legacy IPC: cuIpcGetMemHandle/"
                "cuIpcOpenMemHandle are CUDA driver calls with no CPU analogue",
            )
        )

    def unified_addressing(self) -> bool:
        """Whether the device shares one address space with the host (legacy IPC needs it)."""
        raise self._no_legacy("unified addressing query")

    def alloc(self, size: int) -> int:
        """cuMemAlloc: memory and an address in one call."""
        raise self._no_legacy("cuMemAlloc")

    def free(self, ptr: int) -> None:
        """cuMemFree of what ``alloc`` returned."""
        raise self._no_legacy("cuMemFree")

    def ipc_export(self, ptr: int) -> bytes:
        """The 64-byte IPC handle of an ``alloc`` allocation."""
        raise self._no_legacy("cuIpcGetMemHandle")

    def ipc_open(self, handle: bytes) -> int:
        """Map another process's allocation from its IPC handle; returns the address here."""
        raise self._no_legacy("cuIpcOpenMemHandle")

    def ipc_close(self, ptr: int) -> None:
        raise self._no_legacy("cuIpcCloseMemHandle")

    def ipc_open_in_second_context(self, handle: bytes) -> str:
        """Try to open ``handle`` from a second context on the same device; returns the result code."""
        raise self._no_legacy("cuIpcOpenMemHandle (second context)")
