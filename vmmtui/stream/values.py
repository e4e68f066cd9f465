"""The values the stream's events carry, of the layers that make them: a driver or system call
as a worker made it (``Call``), what a verification of the shared memory found
(``Verification``), and the producer's message to a consumer beside the fd and the consumer's
verdict (``AllocMessage``, ``Ack``).

A backend times and records its calls (``backends.base.CallLog``), ``backends.pattern`` checks
the memory, ``wire.channel`` sends the messages; a worker's state after a step holds all of
them, so the step report, the events and recordings carry them, and they live here, with the
stream, which imports nothing of ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Call:
    """One driver or system call as the inspector shows it: name, arguments, result, duration."""

    name: str
    args: dict[str, Any]
    result: str
    duration_ns: int
    ok: bool = True


@dataclass
class Verification:
    """What a verification found: how many integers, how many differ, and the first that did."""

    checked: int
    mismatches: int
    first_index: int | None = None
    first_expected: int | None = None
    first_got: int | None = None
    #: where it was checked: host (numpy), device (the verify kernel) or both
    on: str = "host"

    @property
    def passed(self) -> bool:
        return self.mismatches == 0 and self.checked > 0

    def describe(self) -> str:
        if self.passed:
            return f"Data verification PASSED ({self.checked} integers verified)"
        if self.first_index is None:
            return f"Data verification FAILED ({self.checked} integers checked)"
        return (
            f"Data verification FAILED ({self.mismatches} of {self.checked} integers differ; first at "
            f"index {self.first_index}: expected 0x{self.first_expected:08x}, got 0x{self.first_got:08x})"
        )


@dataclass
class AllocMessage:
    """What the producer tells each consumer beside the fd (or, for legacy IPC, the handle bytes).

    Nothing in it is trusted: the consumer checks the size against what the kernel or the driver
    reports for the fd it received."""

    requested_size: int
    alloc_size: int
    granularity: int
    device: int
    device_name: str
    backend: str
    mechanism: str
    #: legacy IPC: the 64-byte cuIpcMemHandle in hex; empty for VMM (the fd travels as SCM_RIGHTS)
    ipc_handle: str = ""
    type: str = "alloc"
    #: how the fd travels: ``scm-rights`` (in this message) or ``pidfd`` (the consumer takes it)
    transport: str = "scm-rights"
    #: pidfd: the producer's pid and the number of the fd to take (untrusted: checked by the consumer)
    pid: int = 0
    fd: int = -1
    #: pool: the 64-byte CUmemPoolPtrExportData of the allocation, in hex
    export_data: str = ""


@dataclass
class Ack:
    """The consumer's verdict, sent back so that the producer does not release memory in use."""

    verified: bool
    detail: str
    #: integers the consumer checked (producer-writes)
    checked: int = 0
    #: integers [start, end) the consumer wrote (consumer-writes)
    slice: tuple[int, int] | None = None
    type: str = "ack"
