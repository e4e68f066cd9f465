"""The messages between a producer and its consumers, beside the fd (``wire.channel`` sends them).

They are in the stream too: a worker's state after a step holds the message it sent or received
and the verdict it got, so the wire panel and recordings show them.
"""

from __future__ import annotations

from dataclasses import dataclass


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
