"""A process's fd table as /proc shows it, each declared fd marked ✓ or ✗, new ones highlighted,
closed ones struck through; fds that are not ours (driver, stdio, pipes) fold away."""

from __future__ import annotations

from rich.console import Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual.widgets import Static

from vmmtui.plan.steps import PRODUCER
from vmmtui.stream.events import FdRow, FdSnapshot
from vmmtui.view import Display, PanelView
from vmmtui.view.budget import fd_order, folded_line
from vmmtui.words import narration as say

#: a table narrower than this cuts long cells instead of wrapping them
NARROW = 50
#: the widest the target column gets (a longer target folds onto the next line)
TARGET_MAX = 24
#: what /proc says of every memfd (it has no name in any file system): true and no news, so not shown
MEMFD_SUFFIX = " (deleted)"


def shown_target(target: str) -> str:
    return target.removesuffix(MEMFD_SUFFIX) if target.startswith("/memfd:") else target


KIND_LABEL = {
    "exported": "exported allocation",
    "received": "received (SCM_RIGHTS)",
    "pidfd": "pidfd of the producer",
    "allocation": "allocation (memfd)",
    "imported": "imported handle",
    "listener": "listening socket",
    "connection": "the socket (peer)",
    "control": "control channel",
    "driver": "driver",
    "socket": "socket",
    "pipe": "pipe",
    "anon": "anon inode",
    "other": "other",
}


class FdTableView(Static):
    """Renders its role's fd table of the state shown: the declared fds first (✓/✗, the kcmp pair
    note), new ones highlighted, closed ones struck through; the rest folded into one line."""

    def __init__(self, role: str, display: Display, **kw):
        super().__init__(**kw)
        self.role = role
        self.fmt = display
        self.panel = PanelView(role)
        self.show_all = False
        #: the consumer on show (several consumers): its connection comes first in the producer's
        self.front: str | None = None
        self._key: tuple = ()

    def show(self, panel: PanelView, show_all: bool, front: str | None = None) -> None:
        self.panel, self.show_all, self.front = panel, show_all, front
        self.render_table()

    @property
    def snapshot(self) -> FdSnapshot | None:
        return self.panel.fds

    def on_resize(self) -> None:
        self.render_table()

    def _pair_note(self, fd: int) -> str:
        """`` ≡ consumer-2 5`` beside the producer's exported fd, `` ≡ producer 5`` beside the received one."""
        k = self.panel.kcmp
        if k is None or fd != (k.producer_fd if self.role == PRODUCER else k.consumer_fd):
            return ""
        return say.kcmp_pair_note(k, self.role)

    def render_table(self) -> None:
        p = self.panel
        key = (p.fds, p.fresh, p.closed, p.kcmp, self.show_all, self.front, self.size)
        if key == self._key:
            return  # nothing it shows changed: no repaint
        self._key = key
        self.update(self._fitted(self.size.height))

    def lines_needed(self, width: int) -> int:
        """Rows the whole table takes at ``width`` (nothing folded): what the panel budgets for."""
        return self._lines(self._table(None), width)

    def _lines(self, renderable, width: int) -> int:
        if width <= 0:
            return 0
        console = self.app.console
        return len(console.render_lines(renderable, console.options.update_width(width), pad=False))

    def _fitted(self, height: int):
        """The table with as many rows as ``height`` holds, the most telling first; the rest
        counted on the last line (``budget.fd_order``)."""
        whole = self._table(None)
        width = self.size.width
        if height <= 0 or width <= 0 or self._lines(whole, width) <= height:
            return whole
        low, high = 0, self._entries() - 1  # the most rows that fit with the fold line
        while low < high:
            mid = (low + high + 1) // 2
            if self._lines(self._table(mid), width) <= height:
                low = mid
            else:
                high = mid - 1
        return self._table(low)

    def _entries(self) -> int:
        snap = self.panel.fds
        if snap is None or snap.error:
            return 0
        declared = sum(1 for r in snap.rows if r.check is not None)
        others = len(snap.rows) - declared if self.show_all else 0
        closed = sum(1 for r in self.panel.closed if r.check is not None or self.show_all)
        return declared + closed + others

    def _table(self, keep: int | None):
        """The table; ``keep``: only its first ``keep`` rows, the others counted on one line."""
        snap, d = self.panel.fds, self.fmt
        if snap is None:
            return Text("fd table: waiting for the worker", style="dim")
        if snap.error:
            return Text(f"fd table unavailable: {d.text(snap.error)}", style="yellow")
        t = Table(box=None, padding=(0, 1), expand=True, show_edge=False, header_style="bold dim")
        t.add_column("fd", justify="right", no_wrap=True, width=4)
        # nothing is cut where there is room (a long target or note takes a second line); in a
        # narrow panel (the compact layout) one line a fd, cut, so that the table still shows fds
        narrow = 0 < self.size.width < NARROW
        # the exported and received fds first, then the connections: what a small screen must
        # show above all (one order: budget.fd_order)
        ours = fd_order([r for r in snap.rows if r.check is not None], self.front)
        others = [r for r in snap.rows if r.check is None]
        closed = [r for r in self.panel.closed if r.check is not None or self.show_all]
        # the worker's own fds first: unfolding the others must not push them out of sight
        rows = ours + others if self.show_all else ours
        entries: list[tuple[FdRow, bool]] = [(r, False) for r in ours]
        entries += [(r, True) for r in closed]
        entries += [(r, False) for r in rows[len(ours) :]]
        cut = entries[keep:] if keep is not None else []
        entries = entries[:keep] if keep is not None else entries
        targets = [len(shown_target(d.text(r.target))) for r in rows]
        wide = None if narrow else min(max(targets, default=6), TARGET_MAX)
        t.add_column(
            "target",
            overflow="ellipsis" if narrow else "fold",
            no_wrap=narrow,
            width=wide,
            ratio=4 if narrow else None,
        )
        t.add_column("what", overflow="ellipsis" if narrow else "fold", no_wrap=narrow, ratio=5)
        t.add_column("", no_wrap=True, width=1)
        for r, gone in entries:
            if gone:
                t.add_row(
                    Text(str(r.fd), style="strike red"),
                    Text(shown_target(d.text(r.target)), style="strike red"),
                    Text("closed", style="red"),
                    "",
                )
                continue
            fresh = r.fd in self.panel.fresh
            mark = {
                "ok": ("✓", "green"),
                "missing": ("✗", "bold red"),
                "mismatch": ("✗", "bold red"),
                "leaked": ("✗", "bold red"),
            }.get(r.check or "", ("", ""))
            note = self._pair_note(r.fd)
            label = KIND_LABEL.get(r.kind, r.kind)
            if r.kind == "received" and r.note.startswith("taken with pidfd_getfd"):
                label = "received (pidfd_getfd: no message carried it)"
            what = (note.strip() if narrow else label.split(" (")[0] + note) if note else label
            if r.check == "leaked":  # the failure named it: open after the worker's cleanup
                what = "LEAKED: open after cleanup" if not narrow else "LEAKED"
            style = (
                "bold green" if fresh else ("bold" if r.kind in ("exported", "received") else "")
            )
            t.add_row(
                str(r.fd),
                Text(
                    shown_target(d.text(r.target)),
                    style=style or ("dim" if r.check is None else ""),
                ),
                Text(what, style="bold cyan" if note else ""),
                Text(mark[0], style=mark[1]),
            )
        lines: list[Text] = []
        hidden = others if not self.show_all else []
        # the key that unfolds them, except on the student page (replay --html), which has no f
        page = self.is_mounted and self.screen.has_class("-page")
        key, keyed = ("", "") if page else (" (f)", " (f: show all)")
        if cut:  # one line says what the fold hid: declared rows by kind, and the rest
            kinds = ["closed" if gone else str(r.kind) for r, gone in cut]
            rest = f" · {len(hidden)} not ours{key}" if hidden else ""
            said = f"+{len(cut)} more" if narrow else folded_line(kinds)
            lines.append(Text(said + rest, style="bold yellow", no_wrap=True, overflow="ellipsis"))
        elif hidden:
            kinds_n: dict[str, int] = {}
            for r in hidden:
                kinds_n[r.kind] = kinds_n.get(r.kind, 0) + 1
            summary = ", ".join(
                f"{n} {k}" for k, n in sorted(kinds_n.items(), key=lambda kv: -kv[1])
            )
            lines.append(
                Text(
                    f"+ {len(hidden)} more not ours" + (key if narrow else f": {summary}{keyed}"),
                    style="dim italic",
                )
            )
        if lines:
            return Group(t, *(Padding(line, (0, 0, 0, 6)) for line in lines))
        return t
