"""What ``vmmtui bench`` shows: a rich table, the targets, and one log-log SVG plot (time against size)."""

from __future__ import annotations

import math
from html import escape

from rich.markup import escape as escape_markup
from rich.table import Table

from vmmtui.bench.result import BenchResult, median
from vmmtui.stream.sizes import format_size

PATHS = {  # path -> (label, colour)
    "vmm": ("VMM, fd over SCM_RIGHTS", "#1f77b4"),
    "legacy": ("legacy IPC handle", "#ff7f0e"),
    "staged": ("host-staged copy (no IPC)", "#d62728"),
    "memfd": ("memfd (CPU, not GPU)", "#2ca02c"),
    "pool": ("memory pool, fd + 64 bytes", "#9467bd"),
    "pidfd": ("VMM, fd taken by pidfd_getfd", "#17becf"),
    "c_floor": ("C floor (vmm_pair.cu)", "#7f7f7f"),
    "torch": ("torch.multiprocessing IPC", "#bcbd22"),
}


def _fmt(v: float | None, unit: str = "", digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}{unit}"


def sizes_of(result: BenchResult) -> list[int]:
    """Every size asked for or measured (a size where everything was skipped keeps its row of dashes)."""
    return sorted(
        {s for p in result.paths.values() for s in p}
        | set(result.ceiling_gbps)
        | {s for p in result.skipped.values() for s in p}
        | set(result.config.sizes)
    )


#: the two tables: (title, [(header, column key)]); each shows only the columns that have a figure
TIME_TABLE = (
    "time to share, create → verified ACK: median ms (driver init excluded)",
    [
        ("vmm", "vmm"),
        ("legacy", "legacy"),
        ("staged", "staged"),
        ("memfd", "memfd"),
        ("pool", "pool"),
        ("pidfd", "pidfd"),
        ("staged/vmm", "staged/vmm"),
    ],
)
SPEED_TABLE = (
    "fill, verify and device copy in GB/s (median); inspector overhead in ms per step",
    [
        ("fill", "fill"),
        ("verify", "verify"),
        ("copy", "copy"),
        ("verify/copy", "verify/copy"),
        ("overhead", "overhead"),
    ],
)
PEER_TABLE = (
    "the floor and the peer, create → ACK median ms; vmm as a ratio of each",
    [
        ("vmm", "vmm"),
        ("C floor", "c_floor"),
        ("vmm/C", "vmm/C"),
        ("torch", "torch"),
        ("vmm/torch", "vmm/torch"),
    ],
)
#: columns whose figure comes from another path's runs (empty for that path's reason)
SOURCE = {
    "vmm": "vmm",
    "legacy": "legacy",
    "staged": "staged",
    "memfd": "memfd",
    "pool": "pool",
    "pidfd": "pidfd",
    "fill": "vmm",
    "verify": "vmm",
    "copy": "ceiling",
    "overhead": "vmm",
    "c_floor": "c_floor",
    "torch": "torch",
}
RATIOS = ("staged/vmm", "verify/copy", "vmm/C", "vmm/torch")


def cells(result: BenchResult, size: int) -> dict[str, str | None]:
    """Every column's text at ``size``; None where nothing was measured."""

    def at(path: str) -> float | None:
        return median(result.path(path).get(size))

    vmm = result.path("vmm").get(size)
    verify, copy = median(vmm, lambda p: p.verify_gbps), result.ceiling_gbps.get(size)
    staged, e2e = at("staged"), median(vmm)
    over = median(vmm, lambda p: p.overhead_ms) or median(
        result.path("memfd").get(size), lambda p: p.overhead_ms
    )
    floor, torch = at("c_floor"), at("torch")

    def f(v: float | None, digits: int) -> str | None:
        return None if v is None else f"{v:.{digits}f}"

    return {
        "vmm": f(e2e, 3),
        "legacy": f(at("legacy"), 3),
        "staged": f(staged, 1),
        "memfd": f(at("memfd"), 2),
        "pool": f(at("pool"), 3),
        "pidfd": f(at("pidfd"), 3),
        "staged/vmm": f"{staged / e2e:.0f}x" if staged and e2e else None,
        "fill": f(median(vmm, lambda p: p.fill_gbps), 0),
        "verify": f(verify, 0),
        "copy": f(copy, 0),
        "verify/copy": f"{verify / copy:.0%}" if verify and copy else None,
        "overhead": f(over, 3),
        "c_floor": f(floor, 3),
        "torch": f(torch, 3),
        "vmm/C": f"{e2e / floor:.2f}x" if e2e and floor else None,
        "vmm/torch": f"{e2e / torch:.2f}x" if e2e and torch else None,
    }


def tables(result: BenchResult) -> list[tuple[str, Table]]:
    """The figures in two narrow tables, each with its heading (readable at 80 columns and in a pipe); a
    column with no figure at any size is left out, and ``gaps()`` says why."""
    sizes = sizes_of(result)
    rows = {size: cells(result, size) for size in sizes}
    out = []
    for title, columns in (TIME_TABLE, SPEED_TABLE, PEER_TABLE):
        shown = [(h, key) for h, key in columns if any(rows[s][key] is not None for s in sizes)]
        if not shown or (columns is PEER_TABLE[1] and len(shown) < 2):
            continue  # the peer table says nothing with the vmm column alone
        t = Table()
        for header in ["size", *(h for h, _ in shown)]:
            t.add_column(header, justify="right", min_width=len(header), overflow="fold")
        for size in sizes:
            t.add_row(format_size(size), *(rows[size][key] or "-" for _, key in shown))
        out.append((title, t))
    return out


def _why_empty(result: BenchResult, key: str, size: int) -> str:
    if key == "overhead":
        return "no session ran at this size"
    source = SOURCE.get(key, "vmm")
    why = result.skipped.get(source, {}).get(size)
    if why:
        return why
    entry = result.path(source).get(size)
    if entry and entry.failures:
        return f"no run verified: {entry.failures[0]}"
    if key in ("fill", "verify"):
        return "the kernels did not run (checked on the host)"
    return "not measured"


def gaps(result: BenchResult) -> list[str]:
    """One line per reason, naming the columns and sizes it left empty (the JSON's ``skipped``, in words)."""
    sizes = sizes_of(result)
    by_reason: dict[str, dict[str, list[int]]] = {}
    for size in sizes:
        row = cells(result, size)
        for key in SOURCE:
            if row[key] is None:
                by_reason.setdefault(_why_empty(result, key, size), {}).setdefault(key, []).append(
                    size
                )
    lines = []
    for reason, columns in by_reason.items():
        groups: dict[tuple[int, ...], list[str]] = {}
        for key, where_empty in columns.items():
            groups.setdefault(tuple(where_empty), []).append(key)
        for at, keys in groups.items():
            where = (
                "at every size"
                if len(at) == len(sizes)
                else "at " + ", ".join(format_size(s) for s in at)
            )
            lines.append(f"- {', '.join(keys)} {where}: {reason}")
    rows = [cells(result, size) for size in sizes]
    if any(any(r[k] for r in rows) and not all(r[k] for r in rows) for k in RATIOS):
        lines.append(
            "- a ratio (staged/vmm, verify/copy, vmm/C, vmm/torch) is empty where either of its figures is"
        )
    return lines


def measured_anything(result: BenchResult) -> bool:
    return bool(result.ceiling_gbps) or any(
        median(e) is not None for p in result.paths.values() for e in p.values()
    )


def init_line(result: BenchResult) -> str:
    """Driver init (cuInit, context, kernel load), reported apart from the span: median over all sizes."""
    parts = []
    for path in ("vmm", "legacy", "memfd"):
        for role in ("producer", "consumer"):
            medians = (
                e.init_ms[role].median for e in result.path(path).values() if role in e.init_ms
            )
            values = [m for m in medians if m is not None]
            if values:
                parts.append(f"{path} {role} {sorted(values)[len(values) // 2]:.1f} ms")
    return "driver init, reported apart (median): " + (", ".join(parts) if parts else "-")


TARGETS_HEADING = "performance targets on a GPU (docs/performance.md):"


def target_lines(result: BenchResult) -> list[str]:
    """One line a target (rich markup, the texts escaped): wanted, measured, met or missed, or why not measured."""
    lines = []
    for row in result.targets:
        if row.met is None:
            verdict = f"[yellow]not measured[/]: {escape_markup(row.why)}".rstrip(": ")
        else:
            verdict = f"{escape_markup(row.measured or '')}: " + (
                "[green]met[/]" if row.met else "[red]missed[/]"
            )
        lines.append(f"- {escape_markup(row.name)}: wanted {escape_markup(row.target)}; {verdict}")
    return lines


def svg(result: BenchResult, width: int = 760, height: int = 460) -> str:
    """Time against size, log-log, one line a path; plain SVG so that it needs no plotting library."""
    left, right, top, bottom = 92, 200, 40, 50  # room for "10000 ms" and the rotated axis title
    pw, ph = width - left - right, height - top - bottom
    series = {}
    for path in PATHS:
        pts = [(s, v) for s, e in result.path(path).items() if (v := median(e))]
        if pts:
            series[path] = sorted(pts)
    xs = [s for pts in series.values() for s, _ in pts] or [1 << 20, 1 << 30]
    ys = [v for pts in series.values() for _, v in pts] or [0.1, 100.0]
    x0, x1 = math.log2(min(xs)), math.log2(max(xs)) + 1e-9
    y0, y1 = math.floor(math.log10(min(ys))), math.ceil(math.log10(max(ys))) + 1e-9
    if x1 - x0 < 1:
        x0, x1 = x0 - 1, x1 + 1

    def px(size: float) -> float:
        return left + (math.log2(size) - x0) / (x1 - x0) * pw

    def py(ms: float) -> float:
        return top + ph - (math.log10(ms) - y0) / (y1 - y0) * ph

    title = f"vmmtui bench · {result.machine.gpu or 'CPU only'} · {result.date[:10]}"
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="22" font-size="14" font-weight="bold">{escape(title)}</text>',
        f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>',
    ]
    for e in range(int(y0), int(math.floor(y1)) + 1):
        y = py(10.0**e)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{10.0**e:g} ms</text>')
    last_label = -1e9
    for size in sorted(set(xs)):
        x = px(size)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" stroke="#eee"/>')
        if x - last_label >= 48:  # labels closer than that would overlap
            out.append(
                f'<text x="{x:.1f}" y="{top + ph + 16}" text-anchor="middle">{escape(format_size(size))}</text>'
            )
            last_label = x
    out.append(
        f'<text x="{left + pw / 2}" y="{height - 10}" text-anchor="middle">size shared (log scale)</text>'
    )
    out.append(
        f'<text x="16" y="{top + ph / 2}" transform="rotate(-90 16 {top + ph / 2})" text-anchor="middle">'
        "create → verified ACK, median (log scale)</text>"
    )
    for i, (path, pts) in enumerate(series.items()):
        label, colour = PATHS[path]
        coords = " ".join(f"{px(s):.1f},{py(v):.1f}" for s, v in pts)
        out.append(
            f'<polyline data-path="{path}" points="{coords}" fill="none" stroke="{colour}" stroke-width="2"/>'
        )
        for s, v in pts:
            out.append(f'<circle cx="{px(s):.1f}" cy="{py(v):.1f}" r="3" fill="{colour}"/>')
        ly = top + 10 + i * 20
        out.append(
            f'<line x1="{left + pw + 12}" x2="{left + pw + 32}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2"/>'
        )
        out.append(f'<text x="{left + pw + 38}" y="{ly + 4}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
