"""Backends: the driver (or system) calls that make, share and map memory, one class per kind.

``choose()`` resolves ``auto`` into ``cuda`` or ``memfd`` with a one-line reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vmmtui.backends.labels import LABELS, NAMES

if TYPE_CHECKING:  # the probe module is for the session's side: workers start without it
    from vmmtui.backends.base import Backend, CallLog, DeviceInfo
    from vmmtui.backends.probe import DeviceRecord, ProbeRecord

#: re-exported from base on first use: the command line reads NAMES without loading the backends' classes
_FROM_BASE = ("Backend", "CallLog", "DeviceInfo")


def __getattr__(name: str) -> Any:
    if name in _FROM_BASE:
        from vmmtui.backends import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class Choice:
    name: str
    reason: str
    usable: bool = True
    #: bytes the backend can hold at most (device memory, or available RAM for memfd); None if unknown
    capacity: int | None = None
    #: how many CUDA devices the driver sees (None for memfd)
    devices: int | None = None
    #: what the capability probe found about the chosen device (fabric_create, kernels_error ...); None for memfd
    device_probe: DeviceRecord | None = None

    @property
    def kernels_error(self) -> str | None:
        """Why the fill/verify kernels cannot load on the device (the probe tried), or None."""
        return self.device_probe.kernels_error if self.device_probe else None


def create(name: str, calls: CallLog | None = None) -> Backend:
    """A backend instance by name (``cuda`` imports cuda.bindings lazily)."""
    if name == "memfd":
        from vmmtui.backends.memfd import MemfdBackend

        return MemfdBackend(calls)
    if name == "cuda":
        from vmmtui.backends.cuda import CudaBackend

        return CudaBackend(calls)
    raise ValueError(f"unknown backend {name!r}: choose one of {', '.join(NAMES)}")


def choose(requested: str, device: int = 0, probe_result: ProbeRecord | None = None) -> Choice:
    """Resolve ``requested`` into a backend this machine can run, and say why."""
    if requested not in NAMES:
        return Choice(
            requested,
            f"unknown backend {requested!r}: choose one of {', '.join(NAMES)}",
            usable=False,
        )
    from vmmtui.system import host

    if not host.is_linux():  # the backends' calls are Linux's (and replays run anywhere)
        why: str | None = (
            f"--backend cuda cannot run here: {host.CUDA_NEEDS} for live runs; this is "
            f"{host.platform_name()}, where vmmtui replays: {host.REPLAY_INSTEAD}"
            if requested == "cuda"
            else host.needs_linux("the memfd backend", "memfd_create, fds passed between processes")
        )
        return Choice(requested, why or "live runs need Linux", usable=False)
    if requested == "memfd":
        return Choice(
            "memfd",
            "memfd backend requested (CPU memory, not GPU memory)",
            capacity=ram_available(),
        )
    from vmmtui.backends.probe import probe

    info = probe_result if probe_result is not None else probe()
    why_not = cuda_unusable(info, device)
    if requested == "cuda":
        if why_not:
            needs = "" if info.driver and info.bindings else f"; {host.CUDA_NEEDS}"
            return Choice(
                "cuda",
                f"--backend cuda cannot run here: {why_not}{needs}; try --backend memfd",
                usable=False,
            )
        d = info.devices[device]
        return Choice(
            "cuda",
            f"cuda backend on device {device} ({d.name})",
            capacity=d.mem_total,
            devices=len(info.devices),
            device_probe=d,
        )
    if why_not:
        return Choice("memfd", f"{why_not}: using the memfd backend", capacity=ram_available())
    d = info.devices[device]
    return Choice(
        "cuda",
        f"{d.name} supports VMM and POSIX-fd handles: using the cuda backend",
        capacity=d.mem_total,
        devices=len(info.devices),
        device_probe=d,
    )


def ram_available() -> int | None:
    """MemAvailable from /proc/meminfo: a memfd buffer is filled, so it must fit in RAM."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def cuda_unusable(info: ProbeRecord, device: int) -> str | None:
    """Why the cuda backend cannot run on ``device``, or None when it can."""
    if not info.driver:
        return info.error or "no NVIDIA driver"
    if info.error:
        return info.error
    devices = info.devices
    if not devices:
        return "the NVIDIA driver sees no CUDA device"
    if device >= len(devices):
        return f"device {device} does not exist (the driver sees {len(devices)})"
    d = devices[device]
    if not d.vmm:
        return f"{d.name} does not support virtual memory management"
    if not d.posix_fd:
        return f"{d.name} does not support POSIX file descriptor handles"
    return None


__all__ = [
    "Backend",
    "CallLog",
    "Choice",
    "DeviceInfo",
    "LABELS",
    "NAMES",
    "choose",
    "create",
    "cuda_unusable",
]
