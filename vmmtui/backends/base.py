"""The interface both backends implement, and the record of every driver or system call they make."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from vmmtui.pattern import Verification


@dataclass
class Call:
    """One driver or system call as the inspector shows it: name, arguments, result, duration."""

    name: str
    args: dict[str, Any]
    result: str
    duration_ns: int
    ok: bool = True


@dataclass
class CallLog:
    """Calls made since the last ``take()``; a worker takes them once per step."""

    calls: list[Call] = field(default_factory=list)

    def timed(self, name: str, args: dict[str, Any], fn: Callable[[], Any], show: Callable[[Any], str] = repr) -> Any:
        """Run ``fn``, record it, and return its value; an exception is recorded then re-raised."""
        t0 = time.perf_counter_ns()
        try:
            value = fn()
        except Exception as exc:
            self.calls.append(Call(name, args, f"{type(exc).__name__}: {exc}", time.perf_counter_ns() - t0, ok=False))
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


class Backend(ABC):
    """One way to make, share and map memory. ``cuda`` and ``memfd`` implement the same steps.

    Handles and addresses are plain ints so that they can be shown and sent as JSON.
    """

    name: str = ""
    label: str = ""
    #: what the exported fd's /proc target starts with (the inspector checks it)
    fd_target_prefix: str = ""

    def __init__(self, calls: CallLog | None = None):
        self.calls = calls or CallLog()

    @abstractmethod
    def init(self, device: int) -> DeviceInfo: ...

    @abstractmethod
    def query(self) -> DeviceInfo:
        """Capabilities and granularity; raises StepError when sharing cannot work here."""

    @abstractmethod
    def create(self, size: int, shareable: bool = True) -> int: ...

    @abstractmethod
    def reserve(self, size: int, alignment: int) -> int: ...

    @abstractmethod
    def map(self, va: int, size: int, handle: int) -> None: ...

    @abstractmethod
    def set_access(self, va: int, size: int) -> None: ...

    #: where this backend can write and check the pattern: "host" always, "device" with kernels
    places: tuple[str, ...] = ("host",)

    def load_kernels(self) -> None:
        """Make the device fill/verify kernels ready (compile or load from cache); host-only backends have none."""
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
        """The wrong-release scenario: free ``va`` with the call meant for another kind of memory.

        Returns the result as the driver or library gave it; may kill the process (that is the lesson).
        """

    def handle_fd(self, handle: int) -> int | None:
        """The fd a handle itself occupies in this process, if any (memfd's handles are fds)."""
        return None

    def shutdown(self) -> None:
        """Release the context or whatever ``init`` acquired (nothing by default)."""
        return None
