"""What ``vmmtui bench`` measured, typed: the JSON it writes (``bench/results/*.json``) is this,
through the codec, so the tables, the plot and the targets read fields, never a dict by key.

Sizes are ``int`` keys (the JSON's object keys are their decimal strings, read back as ints).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field

from vmmtui.stream.codec import decode, encode


@dataclass
class Stats:
    """Median, min, max, 90th percentile and count of some figures (``n`` 0: none, the rest None)."""

    n: int = 0
    median: float | None = None
    min: float | None = None
    max: float | None = None
    p90: float | None = None


def stats(values: list[float]) -> Stats:
    """The Stats of ``values``."""
    if not values:
        return Stats()
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(round(0.9 * (len(ordered) - 1))))]
    return Stats(len(ordered), statistics.median(ordered), ordered[0], ordered[-1], p90)


@dataclass
class PathSummary:
    """One way to share at one size, over ``--repeat`` runs (milliseconds; GB/s for bandwidths)."""

    #: "verified/runs": "5/5" when every run verified
    verified: str
    #: create → verified ACK (the staged copy: its whole copy and check)
    e2e_ms: Stats = field(default_factory=Stats)
    failures: list[str] = field(default_factory=list)
    #: each step's time, by "role step" (driver init excluded: ``init_ms``)
    steps_ms: dict[str, Stats] = field(default_factory=dict)
    init_ms: dict[str, Stats] = field(default_factory=dict)
    #: step() wall time minus the worker's own step time
    overhead_ms: Stats = field(default_factory=Stats)
    #: the step's round trip minus its own time (control channel and /proc reads)
    rtt_overhead_ms: Stats = field(default_factory=Stats)
    fill_gbps: Stats = field(default_factory=Stats)
    verify_gbps: Stats = field(default_factory=Stats)
    #: the staged copy's verification, in words
    detail: str = ""

    @property
    def all_verified(self) -> bool:
        done, _, runs = self.verified.partition("/")
        return done == runs


#: picks one figure of a PathSummary (the tables and targets name theirs with these)
Figure = Callable[[PathSummary], Stats]


def e2e(p: PathSummary) -> Stats:
    return p.e2e_ms


def median(entry: PathSummary | None, figure: Figure = e2e) -> float | None:
    """The median of ``figure`` in ``entry``; None where there is no entry or no figure."""
    return None if entry is None else figure(entry).median


@dataclass
class Target:
    """One performance target: wanted, measured (None: not), met (None: not measured), why not."""

    name: str
    target: str
    measured: str | None = None
    met: bool | None = None
    why: str = ""


@dataclass
class Machine:
    hostname: str = ""
    kernel: str = ""
    python: str = ""
    cpu: str = ""
    cpus: int | None = None
    cuda_bindings: str = ""
    #: the device, on the cuda backend
    gpu: str = ""
    driver: str | None = None
    cuda_driver_api: int | None = None
    gpu_memory: int | None = None
    gpu_free_at_start: int | None = None


@dataclass
class Settings:
    """The options the bench ran with."""

    backend: str = ""
    sizes: list[int] = field(default_factory=list)
    repeat: int = 0
    device: int = 0
    memfd_max: int = 0
    staged_max: int = 0


@dataclass
class BenchResult:
    date: str
    config: Settings = field(default_factory=Settings)
    machine: Machine = field(default_factory=Machine)
    tool: str = "vmmtui bench"
    #: the device's own copy bandwidth, GB/s, by size
    ceiling_gbps: dict[int, float] = field(default_factory=dict)
    #: path (vmm, legacy, memfd, pool, pidfd, staged, c_floor, torch) -> size -> summary
    paths: dict[str, dict[int, PathSummary]] = field(default_factory=dict)
    #: path (or "ceiling") -> size -> why it was not measured
    skipped: dict[str, dict[int, str]] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)

    def path(self, name: str) -> dict[int, PathSummary]:
        return self.paths.get(name, {})

    def skip(self, path: str, size: int, why: str) -> None:
        self.skipped.setdefault(path, {})[size] = why

    def to_json(self) -> object:
        """JSON-ready values (the file ``vmmtui bench`` writes)."""
        return encode(self)

    @staticmethod
    def from_json(data: object) -> BenchResult:
        """A result file read back (DecodeError when its shape is wrong)."""
        return decode(BenchResult, data, "bench")
