"""What a worker knows after each step: the typed contract between worker, session and renderers.

A ``StepReport`` carries the worker's ``WorkerState`` as it stands after the step. The mapping
card, the wire panel, the bench and the tests read these fields, never a dict by key; the codec
turns them into JSON and back, so recordings hold exactly this.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from vmmtui.stream.failures import Failure
from vmmtui.stream.values import Ack, AllocMessage, Call, Verification


class HeldKind(StrEnum):
    """What an fd a worker declares is for."""

    CONTROL = "control"  # the worker's control socket to the session
    LISTENER = "listener"
    CONNECTION = "connection"
    ALLOCATION = "allocation"  # the memory itself (memfd)
    EXPORTED = "exported"
    RECEIVED = "received"
    IMPORTED = "imported"
    PIDFD = "pidfd"  # a pidfd of the producer, held while pidfd_getfd takes the fd


@dataclass
class HeldFd:
    """An fd a worker says it holds, with the identity the inspector checks against /proc."""

    fd: int
    kind: HeldKind
    dev: int
    ino: int
    target: str  # what the worker itself reads in /proc/self/fd
    note: str = ""

    @classmethod
    def of(cls, fd: int, kind: HeldKind, note: str = "") -> HeldFd:
        st = os.fstat(fd)
        return cls(
            fd, HeldKind(kind), st.st_dev, st.st_ino, os.readlink(f"/proc/self/fd/{fd}"), note
        )


@dataclass
class Mapping:
    """The memory as this process sees it: the card under each worker's steps."""

    #: the allocation handle (cuda), the memfd's fd number (memfd), None before create / after cleanup
    handle: int | None = None
    va: int | None = None
    #: bytes mapped at ``va`` (0 until mapped)
    size: int = 0
    access: str = ""
    #: legacy IPC: the 64-byte handle in hex (no fd exists)
    ipc_handle: str = ""

    @property
    def va_end(self) -> int | None:
        return None if self.va is None else self.va + self.size


@dataclass
class Peer:
    """The other end of a connection as the kernel reports it (SO_PEERCRED)."""

    pid: int
    uid: int
    gid: int = -1
    #: our fd for the connection (-1: refused and closed)
    fd: int = -1


@dataclass
class WorkerState:
    role: str
    pid: int
    backend: str
    mechanism: str
    direction: str
    requested_size: int
    socket_path: str
    verify_on: str = "host"
    # -- init / query
    device: int | None = None
    device_name: str = ""
    backend_label: str = ""
    #: what query found (cuda: VMM, POSIX fd, unified addressing, compute capability, driver version)
    capabilities: dict[str, Any] = field(default_factory=dict)
    granularity: int | None = None
    granularity_recommended: int | None = None
    #: the size actually allocated (rounded up to the granularity)
    alloc_size: int = 0
    #: (free, total) device bytes when a step asked (the out-of-memory scenario)
    device_memory: tuple[int, int] | None = None
    # -- memory
    mapping: Mapping = field(default_factory=Mapping)
    integers: int = 0
    fill_on: str = ""
    #: kernel times (CUDA events) by what ran: fill, write, verify
    gpu_ms: dict[str, float] = field(default_factory=dict)
    # -- fds and the wire
    exported_fd: int | None = None
    received_fd: int | None = None
    stale_socket: str = ""
    #: accepted (producer) or connected-to (consumer: "producer") peers by name
    peers: dict[str, Peer] = field(default_factory=dict)
    #: connections refused by the SO_PEERCRED check (the first channel.MAX_REFUSED_SHOWN of them)
    refused: list[Peer] = field(default_factory=list)
    #: how many were refused in all
    refused_total: int = 0
    connect_tries: int = 0
    connect_retries: list[str] = field(default_factory=list)
    #: the last metadata sent (producer) or received (consumer)
    sent: AllocMessage | None = None
    received: AllocMessage | None = None
    #: consumer: the size the producer claimed, the size the kernel or driver reports for what arrived
    #: (None where it cannot tell), and who reported it ("kernel fstat", "driver cuMemMap probe")
    size_claimed: int = 0
    size_reported: int | None = None
    size_source: str = ""
    #: cuda: the map step's cuMemMap of the claimed size is the last size check (its refusal: SIZE_MISMATCH)
    size_by_map: bool = False
    #: memfd: the seals the kernel reports on the received memfd (F_GET_SEALS)
    seals: str = ""
    #: consumer on another GPU than the producer: whether cuDeviceCanAccessPeer allowed it
    owner_device: int | None = None
    peer_access: bool | None = None
    # -- results
    verification: Verification | None = None
    #: consumer-writes: the integers [start, end) this consumer wrote
    slice: tuple[int, int] | None = None
    write_on: str = ""
    acks: dict[str, Ack] = field(default_factory=dict)
    #: what a scenario's extra call returned (wrong-release, second context)
    scenario_results: dict[str, str] = field(default_factory=dict)


@dataclass
class StepReport:
    """Everything one step did, as the worker saw it."""

    role: str
    step: str
    ok: bool
    duration_ns: int
    state: WorkerState
    calls: list[Call] = field(default_factory=list)
    log: list[str] = field(default_factory=list)
    opened: list[HeldFd] = field(default_factory=list)
    closed: list[int] = field(default_factory=list)
    held: list[HeldFd] = field(default_factory=list)
    failure: Failure | None = None
