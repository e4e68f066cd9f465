"""What a session is asked to do, checked in one place.

``SessionConfig`` is what the CLI, the app and the session share; ``validate()`` is the one answer
to "can this run here?" that all three call. ``WorkerConfig`` is what one worker process needs,
and ``to_argv``/``from_argv`` are the only code that turns it into a command line and back.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vmmtui.backends.probe import DeviceRecord


class BackendName(StrEnum):
    AUTO = "auto"
    CUDA = "cuda"
    MEMFD = "memfd"


class Mechanism(StrEnum):
    """How the allocation is shared: VMM (cuMemCreate + an exported fd), legacy IPC (seed 003), or a
    stream-ordered memory pool (an exported pool fd, then 64 bytes of export data per allocation)."""

    VMM = "vmm"
    LEGACY = "legacy"
    POOL = "pool"


class Transport(StrEnum):
    """How the exported fd reaches the consumer: carried by the message (SCM_RIGHTS), or taken by the
    consumer from the producer's fd table with pidfd_open + pidfd_getfd (PyTorch's expandable segments)."""

    SCM_RIGHTS = "scm-rights"
    PIDFD = "pidfd"


class Verify(StrEnum):
    """Where the pattern is written and checked."""

    AUTO = "auto"
    DEVICE = "device"
    HOST = "host"
    BOTH = "both"


class Direction(StrEnum):
    """The seed's direction (the producer writes), or memMapIPCDrv's (each consumer writes its slice)."""

    PRODUCER_WRITES = "producer-writes"
    CONSUMER_WRITES = "consumer-writes"


def choices(enum: type[StrEnum]) -> list[str]:
    return [m.value for m in enum]


MAX_CONSUMERS = 8
#: (mechanism, consumers, direction) of the seed's own run; scenarios run with it
SEED_SHAPE = (Mechanism.VMM.value, 1, Direction.PRODUCER_WRITES.value)


@dataclass
class SessionConfig:
    backend: str = BackendName.AUTO
    size: int = 1 << 20
    device: int = 0
    connect_timeout: float = 10.0
    accept_timeout: float = 10.0
    ack_timeout: float = 120.0
    step_timeout: float = 600.0
    start_timeout: float = 60.0
    grace: float = 3.0
    tmpdir: str | None = None
    scenario: str | None = None
    verify: str = Verify.AUTO
    mechanism: str = Mechanism.VMM
    consumers: int = 1
    direction: str = Direction.PRODUCER_WRITES
    #: devices the consumers spread over, round-robin (None: the producer's device)
    devices: list[int] | None = None
    #: "ROLE:STEP:HOW" makes that worker misbehave at the start of STEP (crash tests)
    crash: str | None = None
    transport: str = Transport.SCM_RIGHTS
    #: follow the workers with eBPF and carry the kernel's record of their calls in the stream
    #: (the commands' default; ``--no-kernel`` turns it off); off for a session made in code
    kernel: bool = False

    @property
    def shape(self) -> tuple[str, int, str]:
        return (str(self.mechanism), self.consumers, str(self.direction))

    def device_of(self, index: int) -> int:
        """The device of the ``index``-th consumer (0-based): round-robin over ``devices``."""
        spread = self.devices or [self.device]
        return spread[index % len(spread)]


def resolve_verify(
    requested: str, backend: str, kernels_error: str | None = None
) -> tuple[str, str | None]:
    """``auto`` becomes the device's kernels on cuda (the host where they cannot load: a default run never
    fails for want of them) and numpy on memfd; the rest stay. Returns it and the line saying why, if any."""
    if requested != Verify.AUTO:
        return str(requested), None
    if backend != BackendName.CUDA:
        return Verify.HOST.value, None
    if kernels_error:
        return (
            Verify.HOST.value,
            f"--verify auto checks on the host: the fill/verify kernels cannot load ({kernels_error})",
        )
    return Verify.DEVICE.value, None


def validate(
    config: SessionConfig,
    backend: str,
    device_count: int | None = None,
    capacity: int | None = None,
    scenario=None,
    device_probe: DeviceRecord | None = None,
) -> str | None:
    """Why this configuration cannot run on ``backend``, as one line with the fix; None when it can.

    ``scenario`` is the resolved Scenario (or None); ``capacity`` the bytes the backend can hold;
    ``device_probe`` the capability probe's record of the device (some scenarios depend on it).
    """
    from vmmtui.stream.sizes import format_size

    c = config
    if c.verify not in choices(Verify):
        return f"unknown --verify {c.verify!r}: choose {', '.join(choices(Verify))}"
    if c.verify in (Verify.DEVICE, Verify.BOTH) and backend != BackendName.CUDA:
        return (
            f"--verify {c.verify} needs a GPU; the {backend} backend checks on the CPU "
            "(numpy on the mapped pages): use --verify host"
        )
    if c.mechanism not in choices(Mechanism):
        return f"unknown mechanism {c.mechanism!r}: choose {' or '.join(choices(Mechanism))}"
    if c.transport not in choices(Transport):
        return f"unknown transport {c.transport!r}: choose {' or '.join(choices(Transport))}"
    if c.transport == Transport.PIDFD and c.mechanism == Mechanism.LEGACY:
        return (
            "--transport pidfd takes an fd from the producer, and legacy IPC has none (its handle is 64 "
            "plain bytes): use --mechanism vmm or pool, or the default --transport scm-rights"
        )
    if c.direction not in choices(Direction):
        return f"unknown direction {c.direction!r}: choose {' or '.join(choices(Direction))}"
    if not 1 <= c.consumers <= MAX_CONSUMERS:
        return f"--consumers {c.consumers}: choose 1 to {MAX_CONSUMERS}"
    if c.device < 0 or (c.devices and min(c.devices) < 0):
        return f"device {min([c.device, *(c.devices or [])])} does not exist: device ordinals start at 0"
    if scenario is not None:
        host = None if backend in scenario.cannot else scenario.host_reason()
        why_not = host or scenario.why_not(backend, device_probe)
        if why_not:
            where = "on this host" if host else f"on the {backend} backend"
            return f"scenario {scenario.name} cannot be shown {where}: {why_not}"
        if (c.consumers, c.direction) != (
            1,
            Direction.PRODUCER_WRITES.value,
        ) or c.mechanism not in (Mechanism.VMM.value, scenario.mechanism):
            return (
                f"scenario {scenario.name} runs with the {scenario.mechanism} mechanism, one consumer "
                "and the producer writing"
            )
        if c.transport not in (Transport.SCM_RIGHTS.value, scenario.transport):
            return f"scenario {scenario.name} runs with --transport {scenario.transport}"
    if c.mechanism == Mechanism.LEGACY and backend != BackendName.CUDA:
        return (
            "memfd has no legacy mode: cuIpcGetMemHandle/cuIpcOpenMemHandle are CUDA driver calls with no "
            "CPU analogue; use --backend cuda, or --mechanism vmm on memfd"
        )
    if c.mechanism == Mechanism.POOL and backend != BackendName.CUDA:
        return (
            "memory pools are a CUDA road: cuMemPoolCreate, cuMemPoolExportPointer and "
            "cuMemPoolImportPointer are driver calls about stream-ordered GPU allocations, and memfd has "
            "no pool to export (nothing on the CPU would be more than a renamed memfd); use --backend "
            "cuda, or --mechanism vmm on memfd"
        )
    if c.mechanism == Mechanism.POOL and c.devices and set(c.devices) != {c.device}:
        return (
            "--mechanism pool keeps every consumer on the producer's device here (an importer on another "
            "GPU needs cuMemPoolSetAccess, which vmmtui does not show yet): drop --devices"
        )
    if c.devices and backend != BackendName.CUDA:
        return "--devices needs the cuda backend (memfd has no devices)"
    if backend != BackendName.CUDA and c.device != 0:
        return f"--device {c.device} needs the cuda backend (memfd has no devices)"
    if device_count is not None:
        bad = [d for d in [c.device, *(c.devices or [])] if d >= device_count]
        if bad:
            return f"device {bad[0]} does not exist (the driver sees {device_count}): fix --device/--devices"
    if capacity is not None and c.size > capacity:
        where = (
            f"device {c.device}'s memory"
            if backend == BackendName.CUDA
            else "the RAM available now"
        )
        return (
            f"--size {format_size(c.size)} is larger than {where} ({format_size(capacity)}): "
            "choose a smaller --size"
        )
    if capacity is not None and backend != BackendName.CUDA and c.size > capacity // 2:
        return (
            f"--size {format_size(c.size)} is more than half the RAM available now "
            f"({format_size(capacity)}, /proc/meminfo MemAvailable): a memfd lives in RAM and the "
            f"rest of the machine needs it too; choose at most {format_size(capacity // 2)}"
        )
    return None


#: from this size on, a memfd session says up front that its fill and checks take a while
SLOW_MEMFD = 1 << 30


def size_note(config: SessionConfig, backend: str) -> str | None:
    """One line before a session whose size will take a while to fill and check (seconds per GiB
    on the memfd backend, where the steps show nothing until they end); None otherwise."""
    from vmmtui.stream.sizes import format_size

    if backend == BackendName.CUDA or config.size < SLOW_MEMFD:
        return None
    return (
        f"note: --size {format_size(config.size)} on memfd: the producer fills it and each of "
        f"{config.consumers} consumer(s) checks it with numpy, seconds per GiB each; the fill "
        "and verify steps end only then"
    )


@dataclass
class WorkerConfig:
    """Everything one worker process is told at launch; travels as its command line."""

    role: str
    backend: str
    size: int
    socket_path: str
    device: int = 0
    connect_timeout: float = 10.0
    accept_timeout: float = 10.0
    ack_timeout: float = 120.0
    #: where the pattern is written and checked: host, device or both (never auto: resolved before)
    verify: str = Verify.HOST
    mechanism: str = Mechanism.VMM
    consumers: int = 1
    direction: str = Direction.PRODUCER_WRITES
    #: behaviours a scenario asks of this worker (``unrounded-size``, ``keep-received-fd`` ...)
    flags: list[str] = field(default_factory=list)
    #: "STEP:HOW" (kill, segv, exit, raise, noise, babble): misbehave at the start of STEP
    crash: str | None = None
    #: the worker's end of the control socketpair, as numbered in the session (inherited with pass_fds)
    control_fd: int | None = None
    #: the session's pid: a worker whose parent is not it was orphaned before it could ask for the
    #: death signal, and exits at once; the producer's reaper removes ``vmmtui-<session pid>-*``
    session_pid: int | None = None
    transport: str = Transport.SCM_RIGHTS

    def to_argv(self) -> list[str]:
        argv: list[str] = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None or (f.name == "flags" and not value):
                continue
            text = ",".join(value) if f.name == "flags" else str(value)
            argv += [f"--{f.name.replace('_', '-')}", text]
        return argv

    @classmethod
    def from_argv(cls, argv: list[str] | None = None) -> WorkerConfig:
        p = argparse.ArgumentParser(
            prog="python -m vmmtui.worker", description="One vmmtui worker role."
        )
        p.add_argument(
            "--role", required=True, help="producer, consumer or consumer-K (one of several)"
        )
        p.add_argument(
            "--backend", choices=[BackendName.CUDA.value, BackendName.MEMFD.value], required=True
        )
        p.add_argument("--size", type=int, required=True)
        p.add_argument("--socket-path", required=True)
        p.add_argument("--device", type=int, default=0)
        p.add_argument("--connect-timeout", type=float, default=10.0)
        p.add_argument("--accept-timeout", type=float, default=10.0)
        p.add_argument("--ack-timeout", type=float, default=120.0)
        p.add_argument(
            "--verify",
            choices=[Verify.HOST.value, Verify.DEVICE.value, Verify.BOTH.value],
            default=Verify.HOST.value,
        )
        p.add_argument("--mechanism", choices=choices(Mechanism), default=Mechanism.VMM.value)
        p.add_argument("--consumers", type=int, default=1)
        p.add_argument(
            "--direction", choices=choices(Direction), default=Direction.PRODUCER_WRITES.value
        )
        p.add_argument("--flags", default="")
        p.add_argument("--crash", help=argparse.SUPPRESS)
        p.add_argument("--control-fd", type=int)
        p.add_argument("--session-pid", type=int)
        p.add_argument(
            "--transport", choices=choices(Transport), default=Transport.SCM_RIGHTS.value
        )
        a = p.parse_args(argv)
        return cls(
            a.role,
            a.backend,
            a.size,
            a.socket_path,
            a.device,
            a.connect_timeout,
            a.accept_timeout,
            a.ack_timeout,
            a.verify,
            a.mechanism,
            a.consumers,
            a.direction,
            [f for f in a.flags.split(",") if f],
            a.crash,
            a.control_fd,
            a.session_pid,
            transport=a.transport,
        )
