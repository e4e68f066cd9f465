"""The rows of a process vmmtui did not start (a trace, a polling, their replays), drawn in its
process panel (``process_panel.py``): its fds of interest, its memory, its last calls; and the
colours of processes that every part of a trace's screen shares.

Rows that must stay on screen come first (fds, then memory); the
calls fill what is left, each worded here from its event (``words/trace.py``), as the text
words it. Names from the traced processes go through the sanitiser.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text

from vmmtui.stream.sizes import format_size
from vmmtui.words.narration import identity_words

if TYPE_CHECKING:
    from vmmtui.view.programs import FdView, MemView, ProcView, ProgramsView, Via

#: the colours of processes, in the order they appear (the step bar uses the same)
PALETTE = (
    "cyan",
    "magenta",
    "green",
    "yellow",
    "blue",
    "bright_red",
    "bright_cyan",
    "bright_magenta",
)
#: how the allocation table can be sorted (``o`` cycles)
SORTS = ("time", "size", "pins")
FD_STYLES = {
    "created": "bold",
    "exported": "bold",
    "received": "bold green",
    "taken": "bold green",
    "arrived": "bold green",
}


def pid_style(v: ProgramsView | None, pid: int) -> str:
    if v is None or pid not in v.procs:
        return "grey50"
    order = list(v.procs)
    return PALETTE[order.index(pid) % len(PALETTE)]


def _line(*parts: tuple[str, str] | str) -> Text:
    text = Text.assemble(*parts)
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text


def _join(rows: list[Text]) -> Text:
    """Rows, one line each (cut with … where too long: a wrapped row would push the next off)."""
    text = Text("\n").join(rows)
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text


def fd_row(f: FdView, closed: bool = False) -> Text:
    # an arrow only where the way it went was seen; "unknown" and "present" share a file, no more
    sign = " ≡ " if f.how in ("unknown", "present") else " ← "
    source = f"{sign}{f.source[0]} fd {f.source[1]}" if f.source[0] else ""
    via = ""
    if f.how in ("received", "taken"):
        via = " (SCM_RIGHTS)" if f.how == "received" else " (pidfd_getfd)"
    proof = f" · {f.proof} {f.file}" if f.file and f.proof == "struct file" else ""
    if f.proof in ("kcmp", "same inode"):
        proof = f" · {f.proof}"
    style = "strike dim" if closed else FD_STYLES.get(f.how, "")
    return _line(
        (f"fd {f.fd:<3}", style or "bold"),
        (f" {f.how}", style),
        (" (closed)" if closed else "", "dim"),
        (f" {f.target}" if f.target else "", "" if closed else "cyan"),
        (source + via, style),
        (proof, "dim"),
    )


def mem_row(v: ProgramsView, pid: int, m: MemView) -> Text:
    size = f" {format_size(m.size)}" if m.size else ""
    dev = f" dev {m.device}" if m.device >= 0 else ""
    addr = f" @{m.address:#x}" if m.address else ""
    handle = f" h {m.handle:#x}" if m.handle and not m.address else ""
    of = f" ← {m.of[0]}'s {m.of[1]:#x}" if m.of and m.of[0] != pid else ""
    gone = m.released_at is not None
    pins = ""
    if m.kind in ("allocation", "pool") and not gone:
        who = v.pins(pid, m)
        pins = f" · pinned by {', '.join(who)}" if who else " · nothing pins it"
    elif m.kind in ("allocation", "pool"):
        who = v.pins(pid, m)
        pins = f" · released; still pinned by {', '.join(who)}" if who else " · released"
    elif gone:
        pins = " · released"
    style = "dim strike" if gone and not pins.startswith(" · released; still") else ""
    return _line(
        (m.kind, style or "bold"),
        (size + dev + addr + handle, style),
        (of, style or "green"),
        (pins, "yellow" if "still pinned" in pins else "dim"),
    )


def _sort(v: ProgramsView, pid: int, mems: list[MemView], order: str) -> list[MemView]:
    if order == "size":
        return sorted(mems, key=lambda m: -m.size)
    if order == "pins":
        return sorted(mems, key=lambda m: -len(v.pins(pid, m)))
    return mems


def program_rows(v: ProgramsView, p: ProcView, sort: str, height: int) -> Text:
    """A traced process's rows, ``height`` at most: its fds of interest, its memory (sorted by
    ``sort``), who it is, then what no longer exists, then the last calls that fit. A cut says
    what it left out: rows past the height on a "+N more" line counted by kind, calls not shown
    in the calls' heading ("last 6 of 21 calls")."""
    rows: list[tuple[str, Text]] = []  # (its kind, for the count of a cut; the row)
    if p.pinned:
        rows.append(("pinned", pinned_row(p.pinned)))
    for f in sorted(p.fds.values(), key=lambda f: f.fd):
        rows.append(("fd", fd_row(f)))
    mems = _sort(v, p.pid, list(p.mems.values()), sort)
    live = [m for m in mems if m.released_at is None]
    gone = [m for m in mems if m.released_at is not None]
    rows += [("memory", mem_row(v, p.pid, m)) for m in live]
    if p.container or p.pod or p.inner_pid is not None:
        who = identity_words(p.container, p.pod, p.inner_pid)
        rows.append(("identity", _line(("in ", "bold"), (who, ""))))
    if p.gpu_used:
        used = ", ".join(
            f"GPU {d}{' ' + p.gpu_uuids[d] if d in p.gpu_uuids else ''}: {format_size(b)}"
            for d, b in sorted(p.gpu_used.items())
        )
        rows.append(("NVML", _line(("NVML ", "bold"), used)))
    # what no longer exists comes after what does (the first to go when room is short)
    rows += [("released memory", mem_row(v, p.pid, m)) for m in gone]
    rows += [("closed fd", fd_row(f, closed=True)) for f in reversed(p.closed)]
    if p.closed_dropped:  # the older closed fds the view did not keep: counted, not silent
        n = p.closed_dropped
        rows.append(
            ("closed fd", _line((f"… {n} earlier closed fd{'s' if n != 1 else ''}", "dim")))
        )
    if not rows:
        rows.append(("", _line(("no fd of interest, no GPU memory yet", "dim"))))
    height = max(height, 1)
    if len(rows) > height:  # the last line counts what did not fit, by kind
        from vmmtui.view.budget import folded_line

        keep = height - 1
        return _join(
            [r for _, r in rows[:keep]] + [_line((folded_line([k for k, _ in rows[keep:]]), "dim"))]
        )
    shown = [r for _, r in rows]
    room = height - len(rows) - 1
    if room > 0:
        calls = v.calls_of(p.pid, room)
        if calls:
            from vmmtui.words.trace import call_words  # the text's words for a call

            n = max(p.ncalls, len(calls))
            head = "── last calls" if len(calls) == n else f"── last {len(calls)} of {n} calls"
            shown.append(_line((head, "dim")))
            for c in calls:
                said = call_words(c.event) or c.name
                shown.append(_line((f"{c.t:8.4f} ", "dim"), (said, "red" if c.failed else "")))
    elif p.ncalls and len(rows) < height:  # a row for the heading alone: the calls are counted
        shown.append(
            _line((f"── {p.ncalls} calls, not shown here (the event log has them)", "dim"))
        )
    return _join(shown)


#: the eight heights of a sparkline's cell
BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[int], width: int = 24) -> str:
    """The last ``width`` values as one row of bars, scaled to the largest (0 is the lowest)."""
    values = values[-width:]
    top = max(values, default=0)
    if top <= 0:
        return BARS[0] * len(values)
    return "".join(BARS[min(7, (n * 7 + top - 1) // top)] for n in values)


def pinned_row(series: tuple[tuple[int, int], ...]) -> Text:
    """The exporter's pinned bytes over the trace's seconds: a leak of one buffer per step is a
    staircase, seen at step 2."""
    now = series[-1][1]
    return _line(
        ("pinned ", "bold"),
        (sparkline([b for _, b in series]), "magenta"),
        f" {format_size(now)} now",
        (f" · {len(series)} changes in {(series[-1][0] - series[0][0]) / 1e9:.3f} s", "dim"),
    )


def via_words(via: Via) -> str:
    """How something travelled, as the wire says it (``words.programs.via_words``)."""
    from vmmtui.words.programs import via_words as said

    return said(via)
