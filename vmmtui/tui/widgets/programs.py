"""The inspector's panels for programs vmmtui did not start (a trace, a polling, their replays):
one panel per process (its fds of interest, its memory, its last calls), the wire (every transfer
between processes) and the verdicts (the ledger's findings, with cause and fix).

Each panel renders one ``ProcView`` of the state shown and repaints only when that view (or its
size, sort or focus) changed. Rows that must stay on screen come first (fds, then memory); the
calls fill what is left, each worded here from its event (``trace/narration.py``), as the text
words it. Names from the traced processes go through the sanitiser.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from vmmtui.words.findings import words_of
from vmmtui.words.narration import identity_words
from vmmtui.words.sizes import format_size

if TYPE_CHECKING:
    from vmmtui.view.programs import FdView, FindingView, MemView, ProcView, ProgramsView, Via

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


class ProgramPanel(Static, can_focus=True):
    """One process: its fds of interest, its allocations/pools/mappings/imports, its last calls."""

    def __init__(self, pid: int, **kw):
        super().__init__(id=f"pid-{pid}", classes="program", **kw)
        self.pid = pid
        self.sort = "time"
        self._key: tuple = ()
        self._last: tuple[ProgramsView, str] | None = None

    def _again(self) -> None:
        if self._last is not None:
            self.show(*self._last)

    def on_focus(self) -> None:
        self._again()

    def on_blur(self) -> None:
        self._again()

    def on_resize(self) -> None:
        self._again()

    def cycle_sort(self) -> str:
        self.sort = SORTS[(SORTS.index(self.sort) + 1) % len(SORTS)]
        self._again()
        return self.sort

    def show(self, v: ProgramsView, mark: str = "") -> None:
        self._last = (v, mark)
        p = v.proc(self.pid)
        key = (p, v.transfers_len, self.size, self.sort, mark, self.has_focus)
        if key == self._key:
            return
        self._key = key
        self.border_title = Text(p.name, pid_style(v, p.pid))
        state = "running"
        if not p.alive:
            from vmmtui.trace.words import end_words  # with the first trace (not a demo's frame)

            state = end_words(p.end)
        sort = f" · sorted by {self.sort}" if self.sort != "time" else ""
        self.border_subtitle = mark or f"{state} · {p.ncalls} calls{sort}"
        self.set_class(not p.alive, "-gone")
        self.update(self.render_view(v, p, max(1, self.size.height)))

    def render_view(self, v: ProgramsView, p: ProcView, height: int) -> Text:
        rows: list[Text] = []
        if p.pinned:
            rows.append(pinned_row(p.pinned))
        for f in sorted(p.fds.values(), key=lambda f: f.fd):
            rows.append(fd_row(f))
        mems = _sort(v, p.pid, list(p.mems.values()), self.sort)
        live = [m for m in mems if m.released_at is None]
        gone = [m for m in mems if m.released_at is not None]
        rows += [mem_row(v, p.pid, m) for m in live]
        if p.container or p.pod or p.inner_pid is not None:
            who = identity_words(p.container, p.pod, p.inner_pid)
            rows.append(_line(("in ", "bold"), (who, "")))
        if p.gpu_used:
            used = ", ".join(
                f"GPU {d}{' ' + p.gpu_uuids[d] if d in p.gpu_uuids else ''}: {format_size(b)}"
                for d, b in sorted(p.gpu_used.items())
            )
            rows.append(_line(("NVML ", "bold"), used))
        # what no longer exists comes after what does (the first to go when room is short)
        rows += [mem_row(v, p.pid, m) for m in gone]
        rows += [fd_row(f, closed=True) for f in reversed(p.closed)]
        if not rows:
            rows.append(_line(("no fd of interest, no GPU memory yet", "dim")))
        room = height - len(rows) - 1
        if room > 0:
            calls = v.calls_of(p.pid, room)
            if calls:
                from vmmtui.trace.narration import call_words  # the text's words for a call

                rows.append(_line(("── last calls", "dim")))
                for c in calls:
                    said = call_words(c.event) or c.name
                    rows.append(_line((f"{c.t:8.4f} ", "dim"), (said, "red" if c.failed else "")))
        return _join(rows[: max(height, 1)])


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
    """How something travelled, as the wire says it (``trace.words.via_words``)."""
    from vmmtui.trace.words import via_words as said

    return said(via)


class _Sized(Static):
    """A panel whose rows depend on its height: drawn again when it is resized."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self._key: tuple = ()
        self._last: ProgramsView | None = None

    def on_resize(self) -> None:
        if self._last is not None:
            self.show(self._last)

    def show(self, v: ProgramsView) -> None:
        raise NotImplementedError


class TransfersPanel(_Sized):
    """The wire: every transfer between processes, newest last (as many as fit)."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.border_title = "wire: transfers between processes"

    def show(self, v: ProgramsView) -> None:
        self._last = v
        key = (v.transfers_len, v.in_flight, self.size, tuple(v.procs))
        if key == self._key:
            return
        self._key = key
        rows: list[Text] = []
        for file, queue in v.in_flight.items():
            for pend in queue:
                rows.append(
                    _line(
                        ("in flight ", "bold yellow"),
                        (f"{pend.pid}", pid_style(v, pend.pid)),
                        f" fd {pend.fd} over {via_words(pend.via)} (file {file}) …",
                    )
                )
        from vmmtui.view.roads import transfer_road  # with the first trace (not a demo's frame)

        n = v.transfers_len  # only the newest that fit are read: a long trace has thousands
        room = max(1, self.size.height - len(rows))
        more = n - room
        start = 0
        if more > 0:
            start = n - (room - 1) if room > 1 else n
            rows.insert(0, _line((f"… {more} earlier", "dim")))
        items = [t for _, t in v.transfers.entries[start:n]]
        for t in items:
            lat = f" {t.latency_ms:.3f} ms" if t.latency_ms is not None else ""
            _, at_export, at_import = transfer_road(v, t)
            types = f" · {at_export} → {at_import}" if at_export else ""
            fds = f" fd {t.from_fd} → {t.to_pid} fd {t.to_fd}" if t.to_fd >= 0 else f" → {t.to_pid}"
            rows.append(
                _line(
                    (f"{t.t:8.4f} ", "dim"),
                    (f"{t.how} ", "bold"),
                    (f"{t.from_pid}", pid_style(v, t.from_pid)),
                    fds,
                    (types, "cyan"),
                    (f" · {via_words(t.via)}" if t.via else "", "dim"),
                    (f" · file {t.file}" if t.file else "", "dim"),
                    (lat, "dim"),
                )
            )
        if not rows:
            rows.append(_line(("nothing has gone between processes yet", "dim")))
        self.update(_join(rows))


class VerdictsPanel(_Sized):
    """The ledger's findings: problems (and unknowns) first, each with its cause and fix, then
    how many shares and imports were proven."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.border_title = "verdicts"
        self._bad_of: object = None
        #: where the findings that are not good news are in ``_bad_of``'s entries
        self._bad_at: list[int] = []
        self._bad_seen = 0

    def _newest_bad(self, v: ProgramsView, most: int) -> list[FindingView]:
        """The newest ``most`` findings that are not good news, oldest first. Where they are in
        the book of findings is noted as it grows (a book only grows; a state off its tip has a
        book of its own), so a repaint looks at the findings that came since, not at all."""
        book = v.findings
        if book is not self._bad_of:
            self._bad_of, self._bad_at, self._bad_seen = book, [], 0
        entries = book.entries
        for k in range(self._bad_seen, len(entries)):
            if not entries[k][1].good:
                self._bad_at.append(k)
        self._bad_seen = len(entries)
        upto = bisect_left(self._bad_at, v.findings_len)
        return [entries[k][1] for k in self._bad_at[max(0, upto - most) : upto]]

    def show(self, v: ProgramsView) -> None:
        self._last = v
        key = (v.findings_len, v.lost, v.finished, self.size, v.mode)
        if key == self._key:
            return
        self._key = key
        from vmmtui.model.findings import Tally
        from vmmtui.trace.words import proven_words, roads_words

        bad, nbad = self._newest_bad(v, 20), v.bad_findings
        good = v.findings_len - nbad
        head: list[Text] = [
            _line(
                ("✓ ", "green"),
                proven_words(Tally(good, nbad, v.proven_by)),
                (f" · {nbad} to look at" if nbad else " · nothing wrong found", "bold"),
            )
        ]
        if v.roads:  # a line of its own: the count above keeps its place at 80 columns
            head.append(_line(("  ", ""), (roads_words(v.roads), "cyan")))
        if v.lost:
            head.append(
                _line(("⚠ ", "bold yellow"), f"{v.lost} records lost: the ledger may miss calls")
            )
        if v.mode == "polling" and v.reason:
            head.append(_line(("polling: ", "bold yellow"), v.reason))
        width = max(10, self.size.width)
        rows: list[Text] = []
        for f in reversed(bad):  # the newest first; each: what, then the fix, the cause
            mark = "✗" if f.kind == "refused" else "⚠"
            w = words_of(f.of)
            text = Text.assemble(
                (f"{mark} {f.kind}: ", "bold red" if mark == "✗" else "bold yellow"),
                f"pid {f.pid} {w.what}",
                ("\n  fix: " if w.fix else "", "bold green"),
                (w.fix, "green"),
                ("\n  cause: ", "bold"),
                w.detail,
            )
            rows += list(text.wrap(self.app.console, width))
        room = max(1, self.size.height) - len(head)
        if len(rows) > room and nbad > 1:  # the cut is said
            rows = rows[: max(0, room - 1)] + [
                _line(("… older findings: / searches the log", "dim"))
            ]
        self.update(_join(head + rows))
