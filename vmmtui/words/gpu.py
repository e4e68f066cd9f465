"""The words of the GPU ledger (``model/gpu_ledger.py``): who NVML charges, who really holds the
memory, and where the two disagree, both numbers and the difference. Bytes in MiB, as
``nvidia-smi`` prints them, so that its table and this one are read side by side.

What is "found" (held before the trace began, its making not seen) is never said as made."""

from __future__ import annotations

from dataclasses import dataclass

from vmmtui.model.gpu_ledger import UNKNOWN_GPU, Kind, shape
from vmmtui.stream.gpu import GpuHeld, GpuHolder, GpuReading, GpuTable
from vmmtui.stream.names import shown

MIB = 1 << 20

#: how each kind of memory is named in a sentence
KIND_WORDS = {
    Kind.VMM: "VMM",
    Kind.IPC: "legacy IPC",
    Kind.DEVICE: "cuMemAlloc",
    Kind.POOL_POINTER: "pool pointer",
}

#: the columns of the table (``attach --once``, a trace's text)
COLUMNS = ("pid", "process", "charged", "created", "imported", "pinned for others", "orphaned")
#: the same, short, for the inspector's GPU panel (a third of the screen's width)
SHORT = ("pid", "process", "charged", "made", "imported", "for others", "orphaned")


def mib(n: int | None) -> str:
    """``4,706 MiB`` (rounded, as nvidia-smi rounds); ``-`` where there is no number."""
    if n is None:
        return "-"
    if 0 < n < MIB:
        return f"{n:,} B"
    return f"{round(n / MIB):,} MiB"


def _kind(k: str) -> str:
    return KIND_WORDS.get(Kind(k), k) if k in Kind._value2member_map_ else shown(k, 20)


def gpu_name(index: int, uuid: str = "") -> str:
    if index == UNKNOWN_GPU:
        return "a GPU not known"
    return f"GPU {index}" + (f" ({shown(uuid)})" if uuid else "")


def _ago(at: int | None, clock: int) -> str:
    if not at or not clock or clock < at:
        return "exited"
    s = (clock - at) / 1e9
    return f"exited {s:.1f} s ago" if s < 120 else f"exited {s / 60:.0f} min ago"


def who(r: GpuHolder) -> str:
    name = f" {shown(r.name)}" if r.name else ""
    return f"pid {r.pid}{name}" + ("" if r.alive else " (exited)")


def held_words(h: GpuHeld, clock: int) -> str:
    """``64 MiB of VMM from pid 12 (exited 2.1 s ago)``."""
    size = mib(h.bytes) if h.bytes else "size not seen"
    if not h.creator:
        src = "a process the trace did not see make it"
    else:
        gone = "" if h.creator_alive else f" ({_ago(h.creator_gone_ns, clock)})"
        src = f"pid {h.creator}{gone}"
    found = ", found held at the start" if h.found else ""
    return f"{size} of {_kind(h.kind)} from {src}{found}"


def difference_words(r: GpuHolder) -> str:
    """Where NVML and the world disagree on ``r``: both numbers and the difference (or "")."""
    d = r.difference
    if d is None or r.charged is None:
        return ""
    if d == 0:
        return "NVML's charge and the trace's account agree"
    if not r.accounted:
        return (
            "the trace saw none of it made (the CUDA context, memory made before the trace "
            "began or by calls not traced)"
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


def row_sentence(r: GpuHolder, clock: int) -> str:
    """``NVML charges X to pid A; it made Y; it holds Z of VMM from pid B (exited …)``."""
    parts = [
        f"NVML charges {mib(r.charged)} to {who(r)}"
        if r.charged is not None
        else f"NVML charges nothing to {who(r)}"
    ]
    if r.created:
        kinds = ", ".join(f"{mib(n)} {_kind(k)}" for k, n in sorted(r.by_kind.items()))
        made = "found held" if r.found and not r.by_kind else "made"
        parts.append(f"it {made} {mib(r.created)} that still lives ({kinds})")
    if r.pinned_for_others:
        parts.append(f"{mib(r.pinned_for_others)} of it held by another process now")
    if r.held:
        parts.append("it holds " + "; ".join(held_words(h, clock) for h in r.held))
    if r.orphaned:
        parts.append(f"{mib(r.orphaned)} orphaned: no living creator owns it, this process pins it")
    if r.after_importers:
        parts.append(
            f"{mib(r.after_importers)} it exported is still held by it after every importer let "
            "go (PyTorch keeps a sent block in its IPC limbo until torch.cuda.ipc_collect() or a later send collects it)"
        )
    if r.imports or r.ipc_opens:
        parts.append(f"{r.imports} VMM handle(s) imported, {r.ipc_opens} legacy IPC handle(s) open")
    if diff := difference_words(r):
        parts.append(diff)
    return "; ".join(parts)


def gpu_head(t: GpuTable, g: GpuReading) -> str:
    """``GPU 0 (GPU-…): NVML charges 5,318 MiB of 5,318 MiB used to 2 processes; nothing orphaned``."""
    charged = [r for r in t.rows if r.gpu == g.index and r.charged is not None]
    n = len(charged)
    used = f" of {mib(g.used)} used" if g.used else ""
    orphaned = t.orphaned.get(g.index, 0)
    said = f"; {mib(orphaned)} orphaned" if orphaned else "; nothing orphaned"
    err = f"; NVML could not say its processes: {shown(g.error)}" if g.error else ""
    return (
        f"{gpu_name(g.index, g.uuid)}: NVML charges {mib(t.charged.get(g.index, 0))}{used} to "
        f"{n} process{'' if n == 1 else 'es'}{said}{err}"
    )


def table_cells(r: GpuHolder) -> tuple[str, ...]:
    """One row of the table, in ``COLUMNS``' order (a process NVML charges that the trace does
    not follow is ``(not traced)``: NVML names every process on the GPU)."""
    return (
        str(r.pid),
        (shown(r.name, 24) if r.traced else "(not traced)") + ("" if r.alive else " (exited)"),
        mib(r.charged),
        ("found " if r.found else "") + mib(r.created) if r.created else "-",
        mib(r.imported) if r.held else "-",
        mib(r.pinned_for_others) if r.pinned_for_others else "-",
        mib(r.orphaned) if r.orphaned else "-",
    )


def short_head(t: GpuTable, g: GpuReading) -> str:
    """``GPU 0 · 696 MiB charged to 2 · nothing orphaned`` (the panel's head)."""
    n = len([r for r in t.rows if r.gpu == g.index and r.charged is not None])
    orphaned = t.orphaned.get(g.index, 0)
    said = f"{mib(orphaned)} orphaned" if orphaned else "nothing orphaned"
    return f"{gpu_name(g.index)} · {mib(t.charged.get(g.index, 0))} charged to {n} · {said}"


def table_lines(t: GpuTable, sentences: bool = True, short: bool = False) -> list[str]:
    """The GPU ledger as plain lines: per GPU a head and the table, then (``sentences``) one
    sentence a process where the world has something to say of it or disagrees with NVML;
    ``short``: the panel's head and column names."""
    if t.error:
        return [f"GPU memory: {shown(t.error)}"]
    out: list[str] = []
    readings = {g.index: g for g in t.gpus}
    for index in sorted({*readings, *(r.gpu for r in t.rows)}):
        rows = [r for r in t.rows if r.gpu == index]
        reading = readings.get(index, GpuReading(index))
        out.append(short_head(t, reading) if short else gpu_head(t, reading))
        cells = [SHORT if short else COLUMNS, *(table_cells(r) for r in rows)]
        widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
        out += [
            "  " + "  ".join(c[i].ljust(widths[i]) for i in range(len(COLUMNS))).rstrip()
            for c in cells
        ]
        for r in rows if sentences else []:
            if r.traced and (r.created or r.held or r.difference):
                out.append("  " + row_sentence(r, t.clock))
    return out


@dataclass
class GpuLines:
    """The GPU tables of a printed stream (text): a table where who holds what changed since
    the last one said (not each byte of a charge that moves at every reading)."""

    said: tuple | None = None

    def see(self, e: object) -> list[str]:
        if not isinstance(e, GpuTable):
            return []
        now = shape(e)
        if now == self.said:
            return []
        self.said = now
        return table_lines(e)
