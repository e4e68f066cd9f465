"""What ``vmmtui bench`` shows: a rich table, the targets, and one log-log SVG plot (time against size)."""

from __future__ import annotations

import math
from html import escape
from typing import Any

from rich.table import Table

from vmmtui.sizes import format_size

PATHS = {  # path -> (label, colour)
    "vmm": ("VMM, fd over SCM_RIGHTS", "#1f77b4"),
    "legacy": ("legacy IPC handle", "#ff7f0e"),
    "staged": ("host-staged copy (no IPC)", "#d62728"),
    "memfd": ("memfd (CPU, not GPU)", "#2ca02c"),
}


def _m(entry: dict | None, key: str = "e2e_ms") -> float | None:
    return (entry or {}).get(key, {}).get("median")


def _fmt(v: float | None, unit: str = "", digits: int = 3) -> str:
    return "-" if v is None else f"{v:.{digits}f}{unit}"


def sizes_of(result: dict[str, Any]) -> list[int]:
    return sorted({int(s) for p in result["paths"].values() for s in p} | {int(s) for s in result["ceiling_gbps"]})


def table(result: dict[str, Any]) -> Table:
    t = Table(title="create → verified ACK, median ms (driver init excluded); bandwidths in GB/s", title_justify="left")
    for col in ("size", "vmm", "legacy", "staged", "memfd", "fill", "verify", "copy (ceiling)", "verify/copy",
                "staged/vmm", "overhead/step"):
        t.add_column(col, justify="right")
    paths, ceiling = result["paths"], result["ceiling_gbps"]
    for size in sizes_of(result):
        k = str(size)
        vmm = paths["vmm"].get(k)
        verify, copy = _m(vmm, "verify_gbps"), ceiling.get(k)
        staged, e2e = _m(paths["staged"].get(k)), _m(vmm)
        over = _m(vmm, "overhead_ms") or _m(paths["memfd"].get(k), "overhead_ms")
        t.add_row(format_size(size), _fmt(e2e), _fmt(_m(paths["legacy"].get(k))), _fmt(staged, digits=1),
                  _fmt(_m(paths["memfd"].get(k)), digits=2), _fmt(_m(vmm, "fill_gbps"), digits=0),
                  _fmt(verify, digits=0), _fmt(copy, digits=0),
                  "-" if not (verify and copy) else f"{verify / copy:.0%}",
                  "-" if not (staged and e2e) else f"{staged / e2e:.0f}x", _fmt(over))
    return t


def init_line(result: dict[str, Any]) -> str:
    """Driver init (cuInit, context, kernel load), reported apart from the span: median over all sizes."""
    parts = []
    for path in ("vmm", "legacy", "memfd"):
        for role in ("producer", "consumer"):
            values = [e["init_ms"][role]["median"] for e in result["paths"][path].values()
                      if e.get("init_ms", {}).get(role, {}).get("median") is not None]
            if values:
                parts.append(f"{path} {role} {sorted(values)[len(values) // 2]:.1f} ms")
    return "driver init, reported apart (median): " + (", ".join(parts) if parts else "-")


def targets_table(result: dict[str, Any]) -> Table:
    t = Table(title="targets (issue 5)", title_justify="left")
    for col in ("target", "wanted", "measured", ""):
        t.add_column(col)
    for row in result["targets"]:
        mark = {True: "[green]met[/]", False: "[red]missed[/]", None: "[yellow]not measured[/]"}[row["met"]]
        t.add_row(row["name"], row["target"], row["measured"] or "-", mark)
    return t


def svg(result: dict[str, Any], width: int = 760, height: int = 460) -> str:
    """Time against size, log-log, one line a path; plain SVG so that it needs no plotting library."""
    left, right, top, bottom = 70, 200, 40, 50
    pw, ph = width - left - right, height - top - bottom
    series = {}
    for path in PATHS:
        pts = [(int(s), _m(e)) for s, e in result["paths"].get(path, {}).items() if _m(e)]
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

    m = result.get("machine", {})
    title = f"vmmtui bench · {m.get('gpu', 'CPU only')} · {result.get('date', '')[:10]}"
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<rect width="{width}" height="{height}" fill="white"/>',
           f'<text x="{left}" y="22" font-size="14" font-weight="bold">{escape(title)}</text>',
           f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#888"/>']
    for e in range(int(y0), int(math.floor(y1)) + 1):
        y = py(10.0 ** e)
        out.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{10.0 ** e:g} ms</text>')
    last_label = -1e9
    for size in sorted(set(xs)):
        x = px(size)
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{top + ph}" stroke="#eee"/>')
        if x - last_label >= 48:  # labels closer than that would overlap
            out.append(f'<text x="{x:.1f}" y="{top + ph + 16}" text-anchor="middle">{escape(format_size(size))}</text>')
            last_label = x
    out.append(f'<text x="{left + pw / 2}" y="{height - 10}" text-anchor="middle">size shared (log scale)</text>')
    out.append(f'<text x="16" y="{top + ph / 2}" transform="rotate(-90 16 {top + ph / 2})" text-anchor="middle">'
               'create → verified ACK, median (log scale)</text>')
    for i, (path, pts) in enumerate(series.items()):
        label, colour = PATHS[path]
        coords = " ".join(f"{px(s):.1f},{py(v):.1f}" for s, v in pts)
        out.append(f'<polyline data-path="{path}" points="{coords}" fill="none" stroke="{colour}" stroke-width="2"/>')
        for s, v in pts:
            out.append(f'<circle cx="{px(s):.1f}" cy="{py(v):.1f}" r="3" fill="{colour}"/>')
        ly = top + 10 + i * 20
        out.append(f'<line x1="{left + pw + 12}" x2="{left + pw + 32}" y1="{ly}" y2="{ly}" stroke="{colour}" stroke-width="2"/>')
        out.append(f'<text x="{left + pw + 38}" y="{ly + 4}">{escape(label)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
