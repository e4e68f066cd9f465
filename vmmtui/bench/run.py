"""``vmmtui bench``: every way to share, side by side on one device, next to the hardware's ceiling.

For each size it runs whole sessions through the same Session the inspector drives (VMM, legacy
IPC, memfd), the host-staged copy (``vmmtui.bench.staged``), and the device's own copy bandwidth. From
the workers' step reports it takes each step's latency, the end-to-end time from ``cuMemCreate``
to the consumer's verified ACK (driver init excluded, reported apart), the fill and verify
kernels' GPU time, and the inspector's own overhead per step. Figures are medians over
``--repeat`` runs with min/max beside them; nothing here is asserted in a test.
"""

from __future__ import annotations

import json
import os
import platform
import socket
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from vmmtui.backends import Choice, ram_available
from vmmtui.bench.peers import PEER_PATHS
from vmmtui.bench.result import (
    BenchResult,
    Machine,
    PathSummary,
    Settings,
    Target,
    median,
    stats,
)
from vmmtui.plan.config import SessionConfig
from vmmtui.session import Session
from vmmtui.stream.events import StepDone
from vmmtui.stream.failures import StepError
from vmmtui.stream.sizes import format_size
from vmmtui.stream.state import WorkerState
from vmmtui.words.troubleshooting import one_line

if TYPE_CHECKING:
    from vmmtui.backends.cuda import CudaBackend

GiB, MiB = 1 << 30, 1 << 20
DEFAULT_SIZES = [2 * MiB, 8 * MiB, 32 * MiB, 64 * MiB, 256 * MiB, GiB, 4 * GiB, 16 * GiB]
SESSION_PATHS = ("vmm", "legacy", "memfd", "pool", "pidfd")
#: path -> (backend, mechanism, transport) of its sessions
ROADS = {
    "vmm": ("cuda", "vmm", "scm-rights"),
    "legacy": ("cuda", "legacy", "scm-rights"),
    "memfd": ("memfd", "vmm", "scm-rights"),
    "pool": ("cuda", "pool", "scm-rights"),
    "pidfd": ("cuda", "vmm", "pidfd"),
}
#: the span "share and prove": from the producer's create to the ACK it receives (consumer init excluded)
SPAN_FROM, SPAN_TO = ("producer", "create"), ("producer", "wait_ack")
TARGETS = {
    "e2e_2mib_ms": 3.5,
    "e2e_1gib_ms": 4.5,
    "verify_vs_copy": 0.80,
    "staged_speedup": 100.0,
    "overhead_ms": 2.0,
    "vs_c_floor": 1.5,
}


@dataclass
class BenchConfig:
    backend: str = "auto"
    sizes: list[int] = field(default_factory=lambda: list(DEFAULT_SIZES))
    repeat: int = 5
    device: int = 0
    memfd_max: int = 2 * GiB
    staged_max: int = 4 * GiB
    tmpdir: str | None = None


@dataclass
class SessionSample:
    """One session's figures, in milliseconds (GB/s for bandwidths)."""

    verified: bool
    steps: dict[str, float]
    init: dict[str, float]
    span_ms: float
    overhead: list[float]
    rtt_overhead: list[float]
    fill_gbps: float | None = None
    verify_gbps: float | None = None
    failure: str = ""


def span_ms(plan: list[tuple[str, str]], steps: dict[str, float]) -> float:
    """Sum of the worker step times from SPAN_FROM to SPAN_TO in plan order, inits left out."""
    first, last = plan.index(SPAN_FROM), plan.index(SPAN_TO)
    return sum(
        steps.get(f"{who} {what}", 0.0) for who, what in plan[first : last + 1] if what != "init"
    )


def run_session(config: SessionConfig, choice: Choice) -> SessionSample:
    """One whole session, stepped as the inspector steps it, with each step's cost taken apart."""
    s = Session(config, choice)
    steps: dict[str, float] = {}
    init: dict[str, float] = {}
    overhead: list[float] = []
    rtt: list[float] = []
    states: dict[str, WorkerState] = {}
    try:
        s.start()
        while not s.stopped:
            t0 = time.perf_counter_ns()
            events = s.step()
            wall = time.perf_counter_ns() - t0
            for e in events:
                if not isinstance(e, StepDone):
                    continue
                report = e.report
                ms = report.duration_ns / 1e6
                if report.step == "init":
                    init[report.role] = ms
                else:
                    steps[f"{report.role} {report.step}"] = ms
                overhead.append(max(0.0, (wall - report.duration_ns) / 1e6))
                rtt.append(e.overhead_ns / 1e6)
                states[f"{report.role} {report.step}"] = report.state
    finally:
        s.close()
    span = span_ms(s.plan, steps)
    size = states["producer query"].alloc_size if "producer query" in states else config.size
    fill_ms = states["producer fill"].gpu_ms.get("fill") if "producer fill" in states else None
    verify_ms = (
        states["consumer verify"].gpu_ms.get("verify") if "consumer verify" in states else None
    )
    return SessionSample(
        s.verified and s.failure is None,
        steps,
        init,
        span,
        overhead,
        rtt,
        size / (fill_ms / 1e3) / 1e9 if fill_ms else None,
        size / (verify_ms / 1e3) / 1e9 if verify_ms else None,
        one_line(s.failure) if s.failure else "",
    )


def summarise(samples: list[SessionSample]) -> PathSummary:
    names = list(dict.fromkeys(n for smp in samples for n in smp.steps))
    roles = list(dict.fromkeys(r for smp in samples for r in smp.init))
    return PathSummary(
        verified=f"{sum(smp.verified for smp in samples)}/{len(samples)}",
        failures=sorted({smp.failure for smp in samples if smp.failure}),
        e2e_ms=stats([smp.span_ms for smp in samples]),
        steps_ms={n: stats([smp.steps[n] for smp in samples if n in smp.steps]) for n in names},
        init_ms={r: stats([smp.init[r] for smp in samples if r in smp.init]) for r in roles},
        overhead_ms=stats([o for smp in samples for o in smp.overhead]),
        rtt_overhead_ms=stats([o for smp in samples for o in smp.rtt_overhead]),
        fill_gbps=stats([smp.fill_gbps for smp in samples if smp.fill_gbps]),
        verify_gbps=stats([smp.verify_gbps for smp in samples if smp.verify_gbps]),
    )


def machine(device: Machine | None = None) -> Machine:
    """This machine, with what the device said of itself (cuda) filled in."""
    info = replace(
        device or Machine(),
        hostname=socket.gethostname(),
        kernel=platform.release(),
        python=platform.python_version(),
        cpu=_cpu_name(),
        cpus=os.cpu_count(),
    )
    try:
        import cuda.bindings

        return replace(info, cuda_bindings=cuda.bindings.__version__)
    except Exception:
        return info


def nvidia_driver() -> str | None:
    """The kernel module's version (580.159.04), as the driver reports it in /proc."""
    try:
        with open("/proc/driver/nvidia/version") as f:
            words = f.readline().split()
    except OSError:
        return None
    return next((w for w in words if w.count(".") >= 1 and w.replace(".", "").isdigit()), None)


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


class Bench:
    """Runs the sweep; ``progress`` gets one line per measurement."""

    def __init__(
        self, config: BenchConfig, choice: Choice, progress: Callable[[str], None] = print
    ):
        self.cfg = config
        self.choice = choice
        self.progress = progress
        self.cuda = choice.name == "cuda"
        self.device: CudaBackend | None = None
        #: why the device kernels cannot load (the sessions then verify on the host), or None
        self.kernels_error: str | None = None

    def run(self) -> BenchResult:
        cfg = self.cfg
        result = BenchResult(
            datetime.now(UTC).isoformat(timespec="seconds"),
            Settings(
                self.choice.name, cfg.sizes, cfg.repeat, cfg.device, cfg.memfd_max, cfg.staged_max
            ),
            paths={p: {} for p in (*SESSION_PATHS, "staged", *PEER_PATHS)},
        )
        try:
            result.machine = machine(self._open_device() if self.cuda else None)
            for size in cfg.sizes:
                self._size(size, result)
            self._peers(result)
        finally:
            if self.device is not None:
                self.device.shutdown()
        result.targets = targets(result)
        return result

    def _open_device(self) -> Machine:
        from vmmtui.backends.cuda import CudaBackend

        device = self.device = CudaBackend()
        info = device.init(self.cfg.device)
        try:
            device.load_kernels()
        except (
            StepError
        ) as exc:  # sessions then check on the host (--verify auto), and the ceiling is skipped
            self.kernels_error = one_line(exc.failure)
            self.progress(f"the fill/verify kernels cannot load: {self.kernels_error}")
        free, total = device.free_memory()
        api = info.extra.get("driver_version")
        return Machine(
            gpu=info.name,
            driver=nvidia_driver(),
            cuda_driver_api=int(api) if api is not None else None,
            gpu_memory=total,
            gpu_free_at_start=free,
        )

    def _peers(self, result: BenchResult) -> None:
        """The C floor and torch's IPC at every size vmm could run (vmmtui.bench.peers)."""
        from vmmtui.bench.peers import measure

        sizes = []
        for size in self.cfg.sizes:
            free = self.device.free_memory()[0] if self.device else None
            why = self._why_not("vmm", size, free)
            if why:
                for path in PEER_PATHS:
                    result.skip(path, size, why)
            else:
                sizes.append(size)
        if sizes:
            found = measure(
                sizes,
                self.cfg.repeat,
                self.cfg.device,
                result.skip,
                self.progress,
            )
            for path, entries in found.items():
                result.paths[path].update(entries)

    def _size(self, size: int, result: BenchResult) -> None:
        cfg = self.cfg
        free = self.device.free_memory()[0] if self.device else None
        for path in SESSION_PATHS:
            why = self._why_not(path, size, free)
            if why:
                result.skip(path, size, why)
                continue
            backend, mechanism, transport = ROADS[path]
            config = SessionConfig(
                backend=backend,
                size=size,
                device=cfg.device,
                mechanism=mechanism,
                transport=transport,
                tmpdir=cfg.tmpdir,
                verify="host" if backend == "memfd" or self.kernels_error else "device",
                ack_timeout=600,
            )
            choice = Choice("memfd", "bench") if backend == "memfd" else self.choice
            samples = [run_session(config, choice) for _ in range(cfg.repeat)]
            summary = summarise(samples)
            result.paths[path][size] = summary
            self.progress(
                f"{path:<7} {format_size(size):>9}: create→ACK median {summary.e2e_ms.median or 0:.3f} ms, "
                f"verified {summary.verified}"
            )
        if not self.cuda:
            for path in ("staged", "ceiling"):
                result.skip(path, size, "needs the cuda backend: " + self.choice.reason)
            return
        if self.kernels_error:
            result.skip(
                "ceiling",
                size,
                "the device copy is timed on the kernels' stream, and they cannot load",
            )
        elif self.device is not None and size * 2 < (free or 0) * 0.9:
            gbps = self.device.copy_bandwidth(size, repeat=max(3, cfg.repeat))
            result.ceiling_gbps[size] = gbps
            self.progress(
                f"ceiling {format_size(size):>9}: device copy {gbps:.0f} GB/s (read + write)"
            )
        else:
            result.skip(
                "ceiling", size, "two buffers of this size do not fit in free device memory"
            )
        why = self._why_not("staged", size, free)
        if why:
            result.skip("staged", size, why)
            return
        from vmmtui.bench.staged import measure

        r = measure(size, cfg.device, repeat=max(2, min(cfg.repeat, 3)))
        result.paths["staged"][size] = PathSummary(
            verified=f"{len(r.seconds) if r.verified else 0}/{len(r.seconds)}",
            e2e_ms=stats([t * 1e3 for t in r.seconds]),
            detail=r.detail,
        )
        self.progress(
            f"staged  {format_size(size):>9}: median {statistics.median(r.seconds) * 1e3:.1f} ms, "
            f"verified {r.verified}"
        )

    def _why_not(self, path: str, size: int, free: int | None) -> str | None:
        cfg = self.cfg
        if ROADS.get(path, ("cuda",))[0] == "memfd":
            if size > cfg.memfd_max:
                return f"above --memfd-max {format_size(cfg.memfd_max)} (memfd fills and checks with numpy: about 5 s per GiB)"
            ram = ram_available()
            if ram is not None and size > ram // 3:
                return f"does not fit in a third of the available RAM ({format_size(ram)})"
            return None
        if not self.cuda:
            return "needs the cuda backend: " + self.choice.reason
        if path == "staged" and self.kernels_error:
            return "the staged copy is checked by the kernels, and they cannot load"
        if path == "staged" and size > cfg.staged_max:
            return f"above --staged-max {format_size(cfg.staged_max)}"
        if free is not None and size > free * 0.9:
            return f"more than 90 % of free device memory ({format_size(free)})"
        return None


def targets(result: BenchResult) -> list[Target]:
    """The targets of issues 5 and 24, each with the figure measured and whether it was met."""
    vmm, ceiling = result.path("vmm"), result.ceiling_gbps
    out: list[Target] = []
    small = median(vmm.get(2 * MiB))
    out.append(
        Target(
            "share and verify 2 MiB (create → verified ACK, no driver init)",
            f"<= {TARGETS['e2e_2mib_ms']:g} ms",
            None if small is None else f"{small:.3f} ms",
            None if small is None else small <= TARGETS["e2e_2mib_ms"],
            _why(result, "vmm", 2 * MiB),
        )
    )
    e2e = median(vmm.get(GiB))
    out.append(
        Target(
            "share and verify 1 GiB (create → verified ACK, no driver init)",
            f"<= {TARGETS['e2e_1gib_ms']:g} ms",
            None if e2e is None else f"{e2e:.3f} ms",
            None if e2e is None else e2e <= TARGETS["e2e_1gib_ms"],
            _why(result, "vmm", GiB),
        )
    )
    ratios = []
    for size, entry in vmm.items():
        v = median(entry, lambda p: p.verify_gbps)
        if size >= 64 * MiB and v and ceiling.get(size):
            ratios.append((v / ceiling[size], size))
    worst = min(ratios) if ratios else None
    out.append(
        Target(
            "device verification vs the device's copy bandwidth, from 64 MiB up",
            f">= {TARGETS['verify_vs_copy']:.0%}",
            None if worst is None else f"{worst[0]:.0%} at worst ({format_size(worst[1])})",
            None if worst is None else worst[0] >= TARGETS["verify_vs_copy"],
            "needs the vmm path verified on the device and the device copy, at 64 MiB or more",
        )
    )
    staged = median(result.path("staged").get(GiB))
    speedup = staged / e2e if staged and e2e else None
    out.append(
        Target(
            "zero-copy vs host-staged copy at 1 GiB",
            f">= {TARGETS['staged_speedup']:g}x",
            None if speedup is None else f"{speedup:.0f}x ({staged:.1f} ms vs {e2e:.3f} ms)",
            None if speedup is None else speedup >= TARGETS["staged_speedup"],
            _why(result, "vmm", GiB) if e2e is None else _why(result, "staged", GiB),
        )
    )
    floors = []
    for size, entry in vmm.items():
        v, c = median(entry), median(result.path("c_floor").get(size))
        if size >= 64 * MiB and v and c:
            floors.append((v / c, size))
    worst_floor = max(floors) if floors else None
    out.append(
        Target(
            "vmmtui's VMM path vs the C floor (vmm_pair.cu), from 64 MiB up",
            f"<= {TARGETS['vs_c_floor']:g}x",
            None
            if worst_floor is None
            else f"{worst_floor[0]:.2f}x at worst ({format_size(worst_floor[1])})",
            None if worst_floor is None else worst_floor[0] <= TARGETS["vs_c_floor"],
            "needs the vmm path and the C floor (nvcc) at 64 MiB or more",
        )
    )

    def overheads(source: str) -> list[float]:
        medians = (median(e, lambda p: p.overhead_ms) for e in result.path(source).values())
        return [m for m in medians if m is not None]

    pooled = overheads("vmm") or overheads("memfd")  # the vmm path's, else memfd's
    over = max(pooled) if pooled else None
    out.append(
        Target(
            "inspector overhead per step (step() wall time minus the worker's step time)",
            f"median < {TARGETS['overhead_ms']:g} ms",
            None if over is None else f"{over:.3f} ms (worst size's median)",
            None if over is None else over < TARGETS["overhead_ms"],
            "no session ran (every path was skipped)",
        )
    )
    return out


def _why(result: BenchResult, path: str, size: int) -> str:
    """Why ``path`` has no figure at ``size``, for a target that needs it."""
    if result.config.sizes and size not in result.config.sizes:
        return f"{format_size(size)} was not among --sizes"
    why = result.skipped.get(path, {}).get(size)
    return f"{path} at {format_size(size)}: {why or 'no verified run'}"


def taken(out_dir: Path, stem: str) -> Path | None:
    """The file of ``stem`` (.json or .svg) already in ``out_dir``, or None."""
    return next(
        (p for p in (out_dir / f"{stem}.json", out_dir / f"{stem}.svg") if p.exists()), None
    )


def free_stem(out_dir: Path, stem: str) -> str:
    """``stem``, or ``stem-2``, ``stem-3`` ... : the first that names no file there yet."""
    n, free = 1, stem
    while taken(out_dir, free):
        n += 1
        free = f"{stem}-{n}"
    return free


def write(result: BenchResult, out_dir: Path, stem: str | None = None) -> tuple[Path, Path]:
    """The JSON and the SVG plot, side by side; returns both paths. Nothing is overwritten: a
    ``stem`` already there is an error (FileExistsError), the day's default gets -2, -3 ..."""
    from vmmtui.bench.report import svg

    if stem is not None and (there := taken(out_dir, stem)):
        raise FileExistsError(f"{there} exists")
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = stem or free_stem(out_dir, f"bench-{result.machine.hostname}-{result.date[:10]}")
    js, plot = out_dir / f"{stem}.json", out_dir / f"{stem}.svg"
    from vmmtui.system.atomic import write_whole

    # whole or not at all: a full disk leaves no half a result that a later run would misread
    write_whole(js, json.dumps(result.to_json(), indent=1) + "\n")
    write_whole(plot, svg(result))
    return js, plot
