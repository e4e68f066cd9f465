"""The wire and the verdicts panels, one of each for every source.

The wire says what went between processes: the demo's socket (peer, metadata, the fd in flight,
kcmp's verdict on the fd pair, the ACK) or, for programs vmmtui did not start, every transfer
seen (newest last, as many as fit) and what is still in flight. The verdicts say what was
checked: the demo's verification of the data, or the ledger's findings (problems first, each with
its cause and fix, then how many shares and imports were proven). Each draws one view
(``view.panels``) and repaints only when it, or its size, changed.
"""

from __future__ import annotations

from bisect import bisect_left
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from vmmtui.stream.sizes import format_size
from vmmtui.view import Display, ScreenState
from vmmtui.view.model import kcmp_tense
from vmmtui.view.panels import VerdictsView, WirePanelView, verdicts_view, wire_view
from vmmtui.words import narration as say

if TYPE_CHECKING:
    from vmmtui.stream.values import Verification
    from vmmtui.view.programs import FindingView, ProgramsView

#: each panel's border title, by source
WIRE_TITLES = {"session": "the wire", "programs": "wire: transfers between processes"}
VERDICT_TITLES = {"session": "verification", "programs": "verdicts"}


class _Sized(Static):
    """A panel whose rows may depend on its height: drawn again when it is resized."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self._key: tuple = ()
        self._last: ScreenState | None = None

    def on_resize(self) -> None:
        if self._last is not None and self._last.programs is not None:
            self._key = ()
            self.show(self._last)

    def show(self, state: ScreenState) -> None:
        raise NotImplementedError


class WirePanel(_Sized):
    """The wire of the state shown."""

    def __init__(self, display: Display, **kw):
        super().__init__(**kw)
        self.fmt = display
        self.border_title = WIRE_TITLES["session"]

    def show(self, state: ScreenState) -> None:
        self._last = state
        view = wire_view(state)
        key = (view.key, self.size if view.programs is not None else None)
        if key == self._key:
            return
        self._key = key
        self.border_title = WIRE_TITLES[view.key[0]]
        if view.programs is not None:
            self.update(self._transfers(view.programs))
        elif view.session is not None:
            self.update(self._session(view))

    def _session(self, view: WirePanelView) -> Table:
        d, w = self.fmt, view.session
        assert w is not None
        t = Table.grid(padding=(0, 1))
        t.add_column(style="dim", no_wrap=True)
        t.add_column()
        value = d.text(w.socket_path) + (" (listening)" if w.listening else "")
        t.add_row("socket", SlashBroken(value))
        t.add_row("peer", d.text(say.wire_peer(w.peer, d)))
        t.add_row("metadata", w.metadata or "-")
        if w.handle:
            # 12 bytes a line: the widest that fits the panel's value column, so no byte is cut
            lines = [w.handle[i : i + 24] for i in range(0, len(w.handle), 24)]
            t.add_row("handle", Text("\n".join(lines), style="bold"))
        t.add_row("fd", say.wire_flight(w.flight, d))
        if w.size_told is not None:
            s = w.size_told
            t.add_row("size", size_line(s.claimed, s.reported, s.source, s.ok))
        if w.kcmps:
            past, step = kcmp_tense(w.kcmps.values())
            verdicts = [s.verdict for s in w.kcmps.values()]
            mechanism = w.finished.mechanism if w.finished is not None else view.mechanism
            consumers = view.consumers if w.finished is not None else None
            t.add_row("kcmp", say.kcmp_summary(verdicts, mechanism, consumers, past, step))
        elif w.finished is not None:  # the session's own list (its end is after every cleanup)
            t.add_row(
                "kcmp",
                say.kcmp_summary(w.finished.kcmp, w.finished.mechanism, view.consumers, past=True),
            )
        t.add_row("ACK", say.wire_ack(w.acks))
        return t

    def _transfers(self, v: ProgramsView) -> Text:
        # a trace's words and colours: imported with the first trace, not a demo's frame
        from vmmtui.tui.widgets.programs import _join, _line, pid_style, via_words

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
        # past the room: the newest that fit under a line that counts every one above them (it
        # once counted one short: its own row was taken from the transfers shown)
        start = 0 if n <= room else max(0, n - (room - 1))
        start = max(start, v.transfers.base)  # a long trace's oldest are no longer kept
        if start > 0:
            rows.insert(0, _line((f"… {start} earlier", "dim")))
        items = v.transfers.between(start, n)
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
        return _join(rows)


def size_line(claimed: int, reported: int | None, source: str, ok: bool) -> Text:
    """``size claimed 64 MiB · size the kernel reports 4 KiB (fstat)``, red when the consumer refused."""
    who = "the kernel" if source.startswith("kernel") else "the driver"
    told = format_size(reported) if reported is not None else "nothing it can tell"
    return Text(
        f"size claimed {format_size(claimed)} · size {who} reports {told} ({source.split(' ', 1)[-1]})",
        style="" if ok else "bold red",
    )


class VerdictsPanel(_Sized):
    """What was checked in the state shown: the verification, or the ledger's findings."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.border_title = VERDICT_TITLES["session"]
        #: the session's verification on show (None: not yet verified)
        self.result: Verification | None = None
        self._bad_of: object = None
        #: where the findings that are not good news are in ``_bad_of``'s entries
        self._bad_at: list[int] = []
        self._bad_seen = 0

    def show(self, state: ScreenState) -> None:
        self._last = state
        view = verdicts_view(state)
        key = (view.key, self.size if view.programs is not None else None)
        if key == self._key:
            return
        self._key = key
        self.border_title = VERDICT_TITLES[view.key[0]]
        if view.programs is not None:
            self.update(self._findings(view.programs))
        else:
            self.update(self._verification(view))

    def _verification(self, view: VerdictsView) -> Text:
        self.result = view.verification
        if self.result is None:
            return Text("not yet verified", style="dim")
        return say.verification(self.result)

    def _newest_bad(self, v: ProgramsView, most: int) -> list[FindingView]:
        """The newest ``most`` findings to look at (not good news, not a quiet fact), oldest first. Where they are in
        the book of findings is noted as it grows (a book only grows; a state off its tip has a
        book of its own), so a repaint looks at the findings that came since, not at all."""
        from vmmtui.model.findings import Weight  # with the first trace: not the demo's frame

        book = v.findings
        if book is not self._bad_of:
            self._bad_of, self._bad_at, self._bad_seen = book, [], 0
        entries, base = book.entries, book.base  # a long trace forgets the oldest (``base``)
        for k in range(max(self._bad_seen, base), base + len(entries)):
            if entries[k - base][1].weight is Weight.PROBLEM:
                self._bad_at.append(k)
        self._bad_seen = base + len(entries)
        upto = bisect_left(self._bad_at, v.findings_len)
        return [entries[k - base][1] for k in self._bad_at[max(0, upto - most) : upto] if k >= base]

    def _findings(self, v: ProgramsView) -> Text:
        from vmmtui.model.findings import RELEASED_LATE, Tally
        from vmmtui.tui.widgets.programs import _join, _line
        from vmmtui.words.findings import quiet_words
        from vmmtui.words.programs import proven_words, roads_words

        bad, nbad = _each_problem_once(self._newest_bad(v, 20)), len(v.problems)
        good = v.findings_len - v.bad_findings - v.quiet_findings
        # polling sees what is there at each poll, not the calls: finding nothing there is not
        # "nothing wrong" (what arrived and went between two polls left no trace)
        polled = v.mode == "polling"
        head: list[Text] = [
            _line(
                ("✓ ", "green") if not polled else ("· ", "dim"),
                proven_words(Tally(good, nbad, v.proven_by)),
                (
                    f" · {nbad} to look at"
                    if nbad
                    else (
                        " · nothing polling can see wrong" if polled else " · nothing wrong found"
                    ),
                    "bold",
                ),
            )
        ]
        # facts, folded into one dim line (the log has each); the end of a hold after its exporter
        # died is the past of a finding listed below, not a line of its own here
        kept = {k: n for k, n in v.quiet_by.items() if k != RELEASED_LATE}
        facts = _line(("  ", ""), (quiet_words(sum(kept.values()), kept), "dim")) if kept else None
        if facts is not None:
            head.append(facts)
        if v.roads:  # a line of its own: the count above keeps its place at 80 columns
            head.append(_line(("  ", ""), (roads_words(v.roads), "cyan")))
        if v.lost:
            head.append(
                _line(("⚠ ", "bold yellow"), f"{v.lost} records lost: the ledger may miss calls")
            )
        if v.mode == "polling" and v.reason:
            head.append(_line(("polling: ", "bold yellow"), v.reason))
        width = max(10, self.size.width)
        blocks: list[list[Text]] = []  # each finding's rows, the newest first
        from vmmtui.words.findings import words_of  # with the first finding

        for f in reversed(bad):  # the newest first; each: what, then the fix, the cause
            mark = "✗" if f.kind == "refused" else "⚠"
            # a hold after its exporter died that the world says is over: said in the past
            w = words_of(v.ended_of(f) or f.of)  # worded here: the fold keeps the facts
            text = Text.assemble(
                (f"{mark} {f.kind}: ", "bold red" if mark == "✗" else "bold yellow"),
                f"pid {f.pid} {w.what}",
                ("\n  fix: " if w.fix else "", "bold green"),
                (w.fix, "green"),
                ("\n  cause: ", "bold"),
                w.detail,
            )
            blocks.append(list(text.wrap(self.app.console, width)))
        if facts is not None and nbad and max(1, self.size.height) - len(head) < 3:
            head.remove(
                facts
            )  # a problem before the facts where both do not fit (the log has them)
        room = max(1, self.size.height) - len(head)
        rows = self._fit(blocks, room, nbad, forgot=len(bad) < min(20, nbad))
        return _join(head + rows)

    @staticmethod
    def _fit(blocks: list[list[Text]], room: int, nbad: int, forgot: bool) -> list[Text]:
        """The newest findings whole that fit ``room`` rows (the newest cut short where even it
        does not), and a last line that counts those left out: it once said "… older findings"
        with no count beside "41 to look at"."""
        from vmmtui.tui.widgets.programs import _line

        rows: list[Text] = []
        shown = 0
        for block in blocks:
            sign = 1 if nbad - shown - 1 > 0 else 0  # a row for the count of those after it
            if len(rows) + len(block) + sign > room:
                break
            rows += block
            shown += 1
        cut = False
        if shown == 0 and blocks and room > 1:  # not even the newest whole: its first rows
            rows, shown, cut = blocks[0][: room - 1], 1, True
        left = nbad - shown
        if not left and not cut:
            return rows
        where = "see the recording" if forgot else "/ searches the log"
        said = f"… +{left} more to look at: {where}" if left else f"… the rest: {where}"
        return rows[: max(0, room - 1)] + [_line((said, "dim"))]


def _each_problem_once(bad: list[FindingView]) -> list[FindingView]:
    """The newest finding of each problem (``model.policy.relation_of``), oldest first: 205 pins
    of one orphaned pool are one problem, drawn once."""
    from vmmtui.model.policy import relation_of

    seen: set[object] = set()
    out: list[FindingView] = []
    for f in reversed(bad):
        key = relation_of(f.of) if hasattr(f.of, "kind") else None
        if key is None or key not in seen:
            seen.add(key)
            out.append(f)
    return out[::-1]


class SlashBroken:
    """A path broken after a ``/`` to the width it is drawn at (the table's value column, asked
    at render time): the same frame draws the same lines at the same size, whenever it is drawn."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield Text(at_slashes(self.path, max(1, options.max_width)), overflow="fold")

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        pieces = self.path.replace("/", "/\0").split("\0")
        return Measurement(min(max(map(len, pieces)), options.max_width), len(self.path))


def at_slashes(path: str, width: int) -> str:
    """``path`` broken into lines of at most ``width`` after a ``/`` (a directory's end), never
    in the middle of a name; a name longer than a line is left to fold."""
    lines: list[str] = []
    line = ""
    for piece in path.replace("/", "/\0").split("\0"):
        if line and len(line) + len(piece) > width:
            lines.append(line)
            line = ""
        line += piece
    if line:
        lines.append(line)
    return "\n".join(lines)
