"""The GPU ledger: for each GPU, what NVML charges each process, and beside it, from the world,
what each process created, imported, pins for others, and pins of a creator that is gone. A pure
projection of the world (the ledger and the newest ``NvmlSample``): no words, no NVML call.

Why both. NVML (``nvmlDeviceGetComputeRunningProcesses``, and so ``nvidia-smi`` and DCGM) charges
shared memory to one process: the creator while it lives, an importer once the creator is gone
(measured on an H200, docs/gpu-ledger.md: a 4 GiB pool handed over by torch.multiprocessing is
charged to the client, 4,706 MiB, then to the server, 4,708 MiB, once the client is killed). The
driver frees an allocation only when its last reference goes: "the memory will be freed when all
outstanding mappings to the memory are unmapped and when all outstanding references to the handle
(including its shareable counterparts) are also released" (CUDA Driver API, cuMemRelease); legacy
IPC memory "must be freed with cuIpcCloseMemHandle" in the importer, and freeing it in the exporter
before that "will result in undefined behavior" (cuIpcOpenMemHandle): on the H200 the memory of a
killed exporter stayed, charged to the importer that had it open. So the charge says who
pays, the world says who keeps it.

Honest joins: what the trace did not see made (an allocation exported, a pool pointer imported,
before the trace began) is ``found``, never ``made``; where NVML charges more or less than the
world can account for, both numbers stand and the difference is kept (a CUDA context, allocations
the trace did not see, another process's memory now charged here).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import TYPE_CHECKING

from vmmtui.stream.gpu import GpuHeld, GpuHolder, GpuReading, GpuTable, NvmlSample

if TYPE_CHECKING:
    from vmmtui.model.ledger import Ledger
    from vmmtui.model.world import World

#: the GPU of memory whose device the trace did not see (a legacy allocation, a found one), where
#: NVML does not settle it either (several GPUs)
UNKNOWN_GPU = -1


class Kind(StrEnum):
    """How the memory was made, which is how it is shared."""

    #: cuMemCreate, shared as a POSIX fd (PyTorch's expandable segments, NCCL)
    VMM = "vmm"
    #: cuMemAlloc, shared as 64 legacy IPC handle bytes (PyTorch's default CUDA tensor sharing)
    IPC = "ipc"
    #: cuMemAlloc, not exported
    DEVICE = "device"
    #: a pool's allocation, shared as 64 export bytes (its size is not in the calls)
    POOL_POINTER = "pool-pointer"


@dataclass(frozen=True)
class Share:
    """One piece of memory ``holder`` holds of ``creator``'s, now."""

    holder: int
    creator: int  # 0: a creator the trace did not see
    kind: Kind
    bytes: int  # 0 where the trace did not see its size
    since: int  # when the holder imported or opened it (kernel ns)
    creator_alive: bool
    creator_gone_at: int | None = None
    found: bool = False  # made before the trace began (its size and maker not seen)
    gpu: int = UNKNOWN_GPU
    #: which memory it is (one allocation, one IPC export): two importers of it pin one piece
    piece: str = ""


@dataclass(frozen=True)
class Made:
    """One allocation ``pid`` created that still lives (held by it or by an importer)."""

    pid: int
    kind: Kind
    bytes: int
    gpu: int
    creator_alive: bool
    #: the processes that hold it now, other than its creator
    holders: tuple[int, ...] = ()
    #: every process that imported it, ever
    importers: tuple[int, ...] = ()
    #: exported and imported, every importer let go, the creator still holds it (torch keeps a
    #: sent block until ``torch.cuda.ipc_collect()``)
    after_importers: bool = False
    found: bool = False


@dataclass(frozen=True)
class Row:
    """One process on one GPU: NVML's charge beside the world's account."""

    pid: int
    name: str
    alive: bool
    charged: int | None  # None: NVML charges it nothing here (or was not read)
    created: int = 0  # bytes of the live memory it made (its own and what others hold of it)
    imported: int = 0  # bytes of others' memory it holds
    pinned_for_others: int = 0  # of what it created, held by another process now
    orphaned: int = 0  # of what it imported, bytes whose creator is gone
    after_importers: int = 0  # exported, every importer let go, it still holds it
    by_kind: dict[str, int] = field(default_factory=dict)
    imports: int = 0  # VMM handles imported and held
    ipc_opens: int = 0  # legacy IPC handles opened and held
    shares: tuple[Share, ...] = ()  # what it holds of others', one a piece
    found: bool = False  # some of its memory was there before the trace began
    #: the trace follows it (else NVML charges a process the trace does not watch)
    traced: bool = True

    @property
    def accounted(self) -> int:
        """What the world expects NVML to charge it: what it made while it lives, what it pins of a
        creator that is gone (the driver re-charges that to an importer)."""
        return (self.created if self.alive else 0) + self.orphaned

    @property
    def difference(self) -> int | None:
        """NVML's charge less the world's account (None where NVML charges nothing)."""
        return None if self.charged is None else self.charged - self.accounted


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str = ""
    total: int = 0
    used: int = 0
    rows: tuple[Row, ...] = ()
    error: str = ""

    @property
    def charged(self) -> int:
        """NVML's charges on this GPU, summed over its processes."""
        return sum(r.charged or 0 for r in self.rows)

    @property
    def orphaned(self) -> int:
        """Bytes no living creator owns that an importer still pins (each piece once)."""
        return sum({s.piece or id(s): s.bytes for r in self.rows
                    for s in r.shares if not s.creator_alive}.values())  # fmt: skip


@dataclass(frozen=True)
class GpuLedger:
    gpus: tuple[Gpu, ...] = ()
    #: the NVML reading it joins (None: no reading in the stream; the world's side alone)
    sample: NvmlSample | None = None
    #: the kernel clock of the newest event folded (what "since" is against)
    clock: int = 0

    @property
    def error(self) -> str:
        return self.sample.error if self.sample is not None else ""

    def rows(self) -> list[tuple[Gpu, Row]]:
        return [(g, r) for g in self.gpus for r in g.rows]


def _holds_vmm(
    ledger: Ledger, mapped: Counter[tuple[int, int]], pid: int, handle: int, released: int | None
) -> bool:
    """``pid`` still holds an import: its handle unreleased, or a mapping of it still there
    (``mapped``: the bytes mapped now, by (pid, handle))."""
    if not ledger.alive(pid):
        return False
    return released is None or (pid, handle) in mapped


def _pieces(ledger: Ledger) -> tuple[list[Made], list[Share]]:
    """Every live allocation the world knows, and every piece of one held by a non-creator."""
    made: list[Made] = []
    shares: list[Share] = []
    procs = ledger.procs
    mapped: Counter[tuple[int, int]] = Counter()  # once: a run maps thousands of segments
    for m in ledger.mappings.values():
        mapped[(m.pid, m.handle)] += m.size

    def gone_at(pid: int) -> int | None:
        return procs[pid].exited_at if pid in procs else None

    for a in ledger.allocations.values():
        holders = [
            i
            for i in a.imports
            if i.pid != a.pid and _holds_vmm(ledger, mapped, i.pid, i.handle, i.released_at)
        ]
        mine = a.released_at is None and ledger.alive(a.pid)
        mine = mine or any(m.pid == a.pid and m.unmapped_at is None for m in a.mappings)
        if not mine and not holders:
            continue
        found = a.size == 0 and a.device < 0 and a.handle_types == 0
        alive = ledger.alive(a.pid)
        importers = tuple(sorted({i.pid for i in a.imports if i.pid != a.pid}))
        made.append(Made(a.pid, Kind.VMM, a.size, a.device, alive, tuple(sorted({i.pid for i in holders})),
                         importers, bool(importers) and not holders and mine, found))  # fmt: skip
        for i in holders:
            shares.append(
                Share(
                    i.pid,
                    a.pid,
                    Kind.VMM,
                    a.size,
                    i.at,
                    alive,
                    gone_at(a.pid),
                    found,
                    a.device,
                    f"vmm:{a.pid}:{a.handle:x}:{a.created_at}",
                )  # fmt: skip
            )
    for (pid, handle), (
        found_a,
        i,
    ) in ledger.imports.items():  # an import of memory the trace never saw made
        if found_a is None and ledger.alive(pid):
            size = mapped[(pid, handle)]
            shares.append(Share(pid, 0, Kind.VMM, size, i.at, True, None, True,
                                piece=f"import:{pid}:{handle:x}"))  # fmt: skip
    exported: set[tuple[int, int]] = set()
    for x in ledger.ipc.values():
        exported.add((x.pid, x.ptr))
        holders_ipc = [
            o for o in x.opens if o.pid != x.pid and o.closed_at is None and ledger.alive(o.pid)
        ]
        alive = ledger.alive(x.pid)
        mine = alive and (x.pid, x.ptr) in ledger.dev_sizes
        if not mine and not holders_ipc:
            continue
        opened = tuple(sorted({o.pid for o in x.opens if o.pid != x.pid}))
        made.append(Made(x.pid, Kind.IPC, x.size, UNKNOWN_GPU, alive, tuple(sorted({o.pid for o in holders_ipc})),
                         opened, bool(opened) and not holders_ipc and mine, x.size == 0))  # fmt: skip
        for o in holders_ipc:
            shares.append(
                Share(
                    o.pid,
                    x.pid,
                    Kind.IPC,
                    x.size,
                    o.at,
                    alive,
                    gone_at(x.pid),
                    x.size == 0,
                    piece=f"ipc:{x.ipc}:{x.at}",
                )  # fmt: skip
            )
    for (pid, ptr), (
        xx,
        o,
    ) in ledger.ipc_opens.items():  # a handle whose export the trace did not see
        if xx is None and ledger.alive(pid):
            shares.append(
                Share(pid, 0, Kind.IPC, 0, o.at, True, None, True, piece=f"open:{pid}:{ptr:x}")
            )
    for (pid, ptr), size in ledger.dev_sizes.items():
        if (pid, ptr) not in exported and ledger.alive(pid):
            made.append(Made(pid, Kind.DEVICE, size, UNKNOWN_GPU, True))
    for (pid, ptr), (px, pi) in ledger.pool_ptr_imports.items():
        if pi.freed_at is None and ledger.alive(pid):
            creator = px.pid if px is not None else 0
            alive = ledger.alive(creator) if creator else True
            shares.append(
                Share(
                    pid,
                    creator,
                    Kind.POOL_POINTER,
                    0,
                    pi.at,
                    alive,
                    gone_at(creator),
                    px is None,
                    piece=f"ptr:{px.data}" if px is not None else f"ptr:{pid}:{ptr:x}",
                )  # fmt: skip
            )
    return made, shares


def _gpu_of(gpu: int, pid: int, sample: NvmlSample | None) -> int:
    """The GPU of memory made or held by ``pid``: as the trace saw it made; else the only GPU
    NVML reads; else the only GPU NVML charges ``pid`` on; else not known."""
    if gpu >= 0 or sample is None:
        return gpu
    if len(sample.gpus) == 1:
        return sample.gpus[0].index
    on = [g.index for g in sample.gpus if g.charged(pid) is not None]
    return on[0] if len(on) == 1 else UNKNOWN_GPU


def gpu_ledger(ledger: Ledger, sample: NvmlSample | None) -> GpuLedger:
    """The GPU ledger of the world now (``sample``: the newest NVML reading, None if none)."""
    made, shares = _pieces(ledger)
    readings: dict[int, GpuReading] = {g.index: g for g in (sample.gpus if sample else [])}
    by_gpu: dict[int, dict[int, dict]] = {}

    def acc(gpu: int, pid: int) -> dict:
        return by_gpu.setdefault(gpu, {}).setdefault(pid, {"kinds": Counter(), "shares": [], "n": Counter(),
                                                           "created": 0, "for": 0, "after": 0, "found": False})  # fmt: skip

    for m in made:
        r = acc(_gpu_of(m.gpu, m.pid, sample), m.pid)
        r["created"] += m.bytes
        r["kinds"][str(m.kind)] += m.bytes
        r["for"] += m.bytes if m.holders and m.creator_alive else 0
        r["after"] += m.bytes if m.after_importers else 0
        r["found"] |= m.found
    for s in shares:
        gpu = _gpu_of(s.gpu, s.holder, sample)
        s = replace(s, gpu=gpu)
        r = acc(gpu, s.holder)
        r["shares"].append(s)
        r["n"][s.kind] += 1
        r["found"] |= s.found
    for reading in readings.values():
        for c in reading.charges:
            acc(reading.index, c.pid)
    gpus: list[Gpu] = []
    for index in sorted(by_gpu.keys() | readings.keys()):
        g: GpuReading | None = readings.get(index)
        rows = []
        for pid, r in sorted(by_gpu.get(index, {}).items()):
            mine: list[Share] = r["shares"]
            p = ledger.procs.get(pid)
            rows.append(Row(
                pid, p.comm if p else "", ledger.alive(pid), g.charged(pid) if g else None,
                created=r["created"], imported=sum(s.bytes for s in mine), pinned_for_others=r["for"],
                orphaned=sum(s.bytes for s in mine if not s.creator_alive), after_importers=r["after"],
                by_kind=dict(r["kinds"]), imports=r["n"][Kind.VMM], ipc_opens=r["n"][Kind.IPC],
                shares=tuple(sorted(mine, key=lambda s: (s.creator, s.since))), found=r["found"],
                traced=p is not None or bool(mine or r["created"]),
            ))  # fmt: skip
        gpus.append(Gpu(index, g.uuid if g else "", g.total if g else 0, g.used if g else 0,
                        tuple(rows), g.error if g else ""))  # fmt: skip
    return GpuLedger(tuple(gpus), sample, ledger.clock)


def of_world(world: World) -> GpuLedger:
    """The GPU ledger of a run's world as it stands (its ledger, its newest NVML reading)."""
    return gpu_ledger(world.ledger, world.gpu)


def as_table(g: GpuLedger) -> GpuTable:
    """The GPU ledger as the stream's table (``--json``)."""
    rows = [
        GpuHolder(
            gpu.index, r.pid, r.name, r.alive, r.charged, r.created, r.imported,
            r.pinned_for_others, r.orphaned, r.after_importers, r.accounted, r.difference, r.found,
            dict(r.by_kind), r.imports, r.ipc_opens,
            [GpuHeld(s.creator, str(s.kind), s.bytes, s.creator_alive, s.since, s.creator_gone_at, s.found)
             for s in r.shares],
            gpu.uuid, r.traced,
        )
        for gpu, r in g.rows()
    ]  # fmt: skip
    return GpuTable(
        list(g.sample.gpus) if g.sample else [],
        rows,
        {gpu.index: gpu.charged for gpu in g.gpus},
        {gpu.index: gpu.orphaned for gpu in g.gpus},
        g.sample.at if g.sample else 0.0,
        g.error,
        g.clock,
    )


def shape(t: GpuTable) -> tuple:
    """What a reader of the table would see change: who is there, alive or not, who holds whose
    memory, what is orphaned (not every byte of a charge that moves with each step)."""
    return tuple(
        (r.gpu, r.pid, r.alive, bool(r.created), tuple(h.creator for h in r.held), r.orphaned)
        for r in t.rows
    )
