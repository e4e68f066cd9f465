"""NVML's reading of the GPUs as a fact of the stream: every GPU, its memory, and the bytes NVML
charges each compute process on it, as one event at the time it was read.

A reading is an event (not a query a renderer makes) so that a recording replays the same GPU
panel as the live run showed: the world keeps the newest (``model/world.py``) and the GPU ledger
(``model/gpu_ledger.py``) sets it beside what the trace saw made, imported and released.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vmmtui.stream.events import AttachEvent


@dataclass(frozen=True)
class GpuCharge:
    """The bytes NVML charges one process on one GPU (``usedGpuMemory``: host PID namespace)."""

    pid: int
    bytes: int


@dataclass(frozen=True)
class GpuReading:
    """One GPU as NVML read it: its index, UUID, memory (``nvmlDeviceGetMemoryInfo``) and the
    compute processes it charges (``nvmlDeviceGetComputeRunningProcesses``); ``error`` where NVML
    could not say the processes of this GPU."""

    index: int
    uuid: str = ""
    total: int = 0
    used: int = 0
    charges: list[GpuCharge] = field(default_factory=list)
    error: str = ""

    def charged(self, pid: int) -> int | None:
        """What NVML charges ``pid`` here; None where it charges it nothing (not listed)."""
        got = [c.bytes for c in self.charges if c.pid == pid]
        return sum(got) if got else None


@dataclass(frozen=True)
class NvmlSample(AttachEvent):
    """One reading of NVML, every GPU at once, ``at`` seconds since the start (the source's
    clock); ``ktime`` the kernel's clock where the source has one (eBPF). ``error`` where NVML
    could not be read at all (no driver, no library): the GPU panel then says why."""

    gpus: list[GpuReading] = field(default_factory=list)
    at: float = 0.0
    ktime: int = 0
    error: str = ""


@dataclass(frozen=True)
class GpuHeld:
    """One piece of another process's memory a holder keeps (a row's ``held``)."""

    creator: int  # 0: not seen made
    kind: str
    bytes: int
    creator_alive: bool
    since_ns: int = 0
    creator_gone_ns: int | None = None
    found: bool = False


@dataclass(frozen=True)
class GpuHolder:
    """One process on one GPU in the GPU ledger: NVML's charge beside the world's account
    (``charged`` None: NVML charges it nothing there; ``difference``: charged less accounted)."""

    gpu: int
    pid: int
    name: str = ""
    alive: bool = True
    charged: int | None = None
    created: int = 0
    imported: int = 0
    pinned_for_others: int = 0
    orphaned: int = 0
    after_importers: int = 0
    accounted: int = 0
    difference: int | None = None
    found: bool = False
    by_kind: dict[str, int] = field(default_factory=dict)
    imports: int = 0
    ipc_opens: int = 0
    held: list[GpuHeld] = field(default_factory=list)
    uuid: str = ""
    #: the trace follows it (else NVML charges a process on the GPU the trace does not watch)
    traced: bool = True


@dataclass(frozen=True)
class GpuTable(AttachEvent):
    """The GPU ledger as of one NVML reading (``model/gpu_ledger.py``), made by the world right
    after it folds the reading, as it makes findings: a replay makes it again from the readings
    (a recorded one is left out). Every renderer reads this: the text, ``--json``, the panel."""

    #: the reading it joins (each GPU's UUID, memory and charges)
    gpus: list[GpuReading] = field(default_factory=list)
    rows: list[GpuHolder] = field(default_factory=list)
    #: GPU index → NVML's charges summed, and bytes orphaned (each piece once)
    charged: dict[int, int] = field(default_factory=dict)
    orphaned: dict[int, int] = field(default_factory=dict)
    at: float = 0.0
    error: str = ""
    #: the kernel clock of the newest event the world had folded (what "exited … ago" is against)
    clock: int = 0
