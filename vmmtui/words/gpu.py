"""The words of the GPU ledger (``model/gpu_ledger.py``): who NVML charges, who really holds the
memory, and where the two disagree, both numbers and the difference. Bytes in MiB, as
``nvidia-smi`` prints them, so that its table and this one are read side by side.

What is "found" (held before the trace began, its making not seen) is never said as made."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from vmmtui.model.gpu_ledger import (
    UNKNOWN_GPU,
    Gpu,
    GpuLedger,
    Kind,
    Row,
    Share,
    as_table,
    of_world,
    shape,
)
from vmmtui.stream.gpu import NvmlSample
from vmmtui.stream.names import shown

if TYPE_CHECKING:
    from vmmtui.model.world import World

MIB = 1 << 20

#: how each kind of memory is named in a sentence
KIND_WORDS = {
    Kind.VMM: "VMM",
    Kind.IPC: "legacy IPC",
    Kind.DEVICE: "cuMemAlloc",
    Kind.POOL_POINTER: "pool pointer",
}

#: the columns of the table (``attach --once``, the end of a trace, the inspector's GPU panel)
COLUMNS = ("pid", "process", "charged", "created", "imported", "pinned for others", "orphaned")


def mib(n: int | None) -> str:
    """``4,706 MiB`` (rounded, as nvidia-smi rounds); ``-`` where there is no number."""
    if n is None:
        return "-"
    if 0 < n < MIB:
        return f"{n:,} B"
    return f"{round(n / MIB):,} MiB"


def gpu_name(g: Gpu) -> str:
    if g.index == UNKNOWN_GPU:
        return "a GPU not known"
    return f"GPU {g.index}" + (f" ({shown(g.uuid)})" if g.uuid else "")


def _ago(at: int | None, clock: int) -> str:
    if not at or not clock or clock < at:
        return "exited"
    s = (clock - at) / 1e9
    return f"exited {s:.1f} s ago" if s < 120 else f"exited {s / 60:.0f} min ago"


def who(r: Row) -> str:
    name = f" {shown(r.name)}" if r.name else ""
    return f"pid {r.pid}{name}" + ("" if r.alive else " (exited)")


def share_words(s: Share, clock: int) -> str:
    """``64 MiB of VMM from pid 12 (exited 2.1 s ago)``."""
    size = mib(s.bytes) if s.bytes else "size not seen"
    if not s.creator:
        src = "a process the trace did not see make it"
    else:
        src = f"pid {s.creator}" + (
            "" if s.creator_alive else f" ({_ago(s.creator_gone_at, clock)})"
        )
    found = ", found held at the start" if s.found else ""
    return f"{size} of {KIND_WORDS[s.kind]} from {src}{found}"


def difference_words(r: Row) -> str:
    """Where NVML and the world disagree on ``r``: both numbers and the difference (or "")."""
    d = r.difference
    if d is None or r.charged is None:
        return ""
    if d == 0:
        return "NVML's charge and the trace's account agree"
    if not r.accounted:
        return (
            "the trace saw none of it made: found held (made before the trace began, the CUDA "
            "context, or calls not traced)"
        )
    if d > 0:
        return (
            f"NVML charges {mib(r.charged)}, the trace accounts for {mib(r.accounted)}: "
            f"{mib(d)} the trace did not see made (the CUDA context, memory made before the "
            "trace or by calls not traced)"
        )
    return (
        f"NVML charges {mib(r.charged)}, the trace accounts for {mib(r.accounted)}: {mib(-d)} "
        "less (NVML charges shared memory to one process: another holder may carry it)"
    )


def row_sentence(r: Row, clock: int) -> str:
    """``nvidia-smi charges X to pid A; A made Y; holds Z imported from pid B (exited …)``."""
    head = (
        f"NVML charges {mib(r.charged)} to {who(r)}"
        if r.charged is not None
        else f"NVML charges nothing to {who(r)}"
    )
    parts = [head]
    made = "found" if r.found and not r.alive else "made"
    if r.created:
        kinds = ", ".join(f"{mib(n)} {KIND_WORDS[Kind(k)]}" for k, n in sorted(r.by_kind.items()))
        parts.append(f"it {made} {mib(r.created)} that still lives ({kinds})")
    if r.pinned_for_others:
        parts.append(f"{mib(r.pinned_for_others)} of it held by another process now")
    if r.shares:
        parts.append("it holds " + "; ".join(share_words(s, clock) for s in r.shares))
    if r.orphaned:
        parts.append(f"{mib(r.orphaned)} orphaned: no living creator owns it, this process pins it")
    if r.after_importers:
        parts.append(
            f"{mib(r.after_importers)} it exported is still held by it after every importer let "
            "go (PyTorch keeps a sent block until torch.cuda.ipc_collect())"
        )
    if r.imports or r.ipc_opens:
        parts.append(f"{r.imports} VMM handle(s) imported, {r.ipc_opens} legacy IPC handle(s) open")
    diff = difference_words(r)
    if diff:
        parts.append(diff)
    return "; ".join(parts)


def gpu_head(g: Gpu) -> str:
    """``GPU 0 (GPU-…): NVML charges 5,318 MiB to 2 processes; 4,096 MiB orphaned``."""
    n = sum(1 for r in g.rows if r.charged is not None)
    used = f" of {mib(g.used)} used" if g.used else ""
    orphaned = f"; {mib(g.orphaned)} orphaned" if g.orphaned else "; nothing orphaned"
    err = f"; NVML could not say its processes: {shown(g.error)}" if g.error else ""
    return (
        f"{gpu_name(g)}: NVML charges {mib(g.charged)}{used} to {n} process"
        f"{'' if n == 1 else 'es'}{orphaned}{err}"
    )


def table_cells(r: Row) -> tuple[str, ...]:
    """One row of the table, in ``COLUMNS``' order."""
    return (
        str(r.pid),
        (shown(r.name) if r.traced else "(not traced)") + ("" if r.alive else " (exited)"),
        mib(r.charged),
        ("found " if r.found else "") + mib(r.created) if r.created else "-",
        mib(r.imported) if r.shares else "-",
        mib(r.pinned_for_others) if r.pinned_for_others else "-",
        mib(r.orphaned) if r.orphaned else "-",
    )


def table_lines(ledger: GpuLedger) -> list[str]:
    """The GPU ledger as plain lines: per GPU a head, the table, then one sentence a process
    where the world has something to say of it (or NVML and the world disagree)."""
    if ledger.error:
        return [f"GPU memory: {shown(ledger.error)}"]
    out: list[str] = []
    for g in ledger.gpus:
        out.append(gpu_head(g))
        cells = [COLUMNS, *(table_cells(r) for r in g.rows)]
        widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
        out += [
            "  " + "  ".join(c[i].ljust(widths[i]) for i in range(len(COLUMNS))).rstrip()
            for c in cells
        ]
        for r in g.rows:
            if r.traced and (r.created or r.shares or r.difference):
                out.append("  " + row_sentence(r, ledger.clock))
    return out


@dataclass
class GpuLines:
    """The GPU ledger in a printed stream: ``after(e, world)`` is asked before each event and at
    the end; after an NVML reading has been folded it gives the table (text: where its shape
    changed, or at the end; ``--json``: the ``GpuTable`` after every reading)."""

    json: bool = False
    due: bool = False
    said: tuple | None = None
    #: an NVML reading was ever folded (the end's table is said only then)
    read: bool = False

    def after(self, e: object, world: World, end: bool = False) -> list[str]:
        due, self.due = self.due, isinstance(e, NvmlSample)
        self.read |= self.due
        if not (due or (end and self.read)):
            return []
        ledger = of_world(world)
        if self.json:
            return [as_table(ledger).to_json()] if due else []
        now = shape(ledger)
        if now == self.said:
            return []
        self.said = now
        return table_lines(ledger)
