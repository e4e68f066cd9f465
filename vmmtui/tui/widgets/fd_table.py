"""A process's fd table as /proc shows it, each declared fd marked ✓ or ✗, new ones highlighted,
closed ones struck through for a moment; fds that are not ours (driver, stdio, pipes) fold away."""

from __future__ import annotations

import time

from rich.console import Group
from rich.padding import Padding
from rich.table import Table
from rich.text import Text
from textual import on
from textual.widgets import Static

from vmmtui import narration as say
from vmmtui.events import FdRow, FdSnapshot, KcmpVerdict
from vmmtui.steps import PRODUCER
from vmmtui.tui.messages import EventView, SessionEvent
from vmmtui.tui.widgets.display import Display

HIGHLIGHT_S = 2.0
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


class FdTableView(EventView, Static):
    """Renders its role's FdSnapshots and the kcmp verdicts on its fds; remembers when each fd
    appeared or vanished to highlight changes."""

    def __init__(self, role: str, display: Display, **kw):
        super().__init__(**kw)
        self.role = role
        self.fmt = display
        self.fold_driver = True
        self.snapshot: FdSnapshot | None = None
        self.kcmp: KcmpVerdict | None = None
        self.first_seen: dict[int, float] = {}
        self.gone: dict[int, tuple[float, FdRow]] = {}
        self._known: set[int] | None = None

    @on(SessionEvent)
    def render_event(self, message: SessionEvent) -> None:
        e = message.event
        if isinstance(e, FdSnapshot) and e.role == self.role:
            self.update_snapshot(e)
        elif isinstance(e, KcmpVerdict) and self.role in (PRODUCER, e.consumer):
            self.set_kcmp(e)

    def update_snapshot(self, snap: FdSnapshot) -> None:
        now = time.monotonic()
        current = {r.fd: r for r in snap.rows}
        if self._known is not None:
            for fd in current.keys() - self._known:
                self.first_seen[fd] = now
                self.gone.pop(fd, None)
            if self.snapshot is not None:
                for r in self.snapshot.rows:
                    if r.fd not in current:
                        self.gone[r.fd] = (now, r)
        self._known = set(current)
        self.snapshot = snap
        self.render_table()

    def set_kcmp(self, verdict: KcmpVerdict | None) -> None:
        self.kcmp = verdict
        self.render_table()

    def on_resize(self) -> None:
        self.render_table()

    def toggle_fold(self) -> None:
        self.fold_driver = not self.fold_driver
        self.render_table()

    def reset(self) -> None:
        self.snapshot, self.kcmp, self._known = None, None, None
        self.first_seen.clear()
        self.gone.clear()
        self.render_table()

    def _pair_note(self, fd: int) -> str:
        """`` ≡ consumer-2 5`` beside the producer's exported fd, `` ≡ producer 5`` beside the received one."""
        k = self.kcmp
        if k is None or fd != (k.producer_fd if self.role == PRODUCER else k.consumer_fd):
            return ""
        return say.kcmp_pair_note(k, self.role)

    def render_table(self) -> None:
        snap, d = self.snapshot, self.fmt
        if snap is None:
            self.update(Text("fd table: waiting for the worker", style="dim"))
            return
        if snap.error:
            self.update(Text(f"fd table unavailable: {d.text(snap.error)}", style="yellow"))
            return
        now = time.monotonic() if not self.fmt.stable else 1e12  # stable: no time-based highlights
        t = Table(box=None, padding=(0, 1), expand=True, show_edge=False, header_style="bold dim")
        t.add_column("fd", justify="right", no_wrap=True, width=4)
        # nothing is cut where there is room (a long target or note takes a second line); in a
        # narrow panel (the compact layout) one line a fd, cut, so that the table still shows fds
        narrow = 0 < self.size.width < NARROW
        rows = list(snap.rows)
        folded = [r for r in rows if r.check is None] if self.fold_driver else []
        if folded:
            rows = [r for r in rows if r.check is not None]
        targets = [len(shown_target(d.text(r.target))) for r in rows]
        wide = (
            None if narrow else min(max(targets, default=6), TARGET_MAX)
        )  # room for the whole target
        t.add_column(
            "target",
            overflow="ellipsis" if narrow else "fold",
            no_wrap=narrow,
            width=wide,
            ratio=4 if narrow else None,
        )
        t.add_column("what", overflow="ellipsis" if narrow else "fold", no_wrap=narrow, ratio=5)
        t.add_column("", no_wrap=True, width=1)
        for r in rows:
            fresh = now - self.first_seen.get(r.fd, -1e9) < HIGHLIGHT_S
            mark = {
                "ok": ("✓", "green"),
                "missing": ("✗", "bold red"),
                "mismatch": ("✗", "bold red"),
            }.get(r.check or "", ("", ""))
            note = self._pair_note(r.fd)
            label = KIND_LABEL.get(r.kind, r.kind)
            if r.kind == "received" and r.note.startswith("taken with pidfd_getfd"):
                label = "received (pidfd_getfd: no message carried it)"
            what = (note.strip() if narrow else label.split(" (")[0] + note) if note else label
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
        for fd, (when, r) in sorted(self.gone.items()):
            if now - when < HIGHLIGHT_S:
                t.add_row(
                    Text(str(fd), style="strike red"),
                    Text(d.text(r.target), style="strike red"),
                    Text("closed", style="red"),
                    "",
                )
        if folded:
            kinds: dict[str, int] = {}
            for r in folded:
                kinds[r.kind] = kinds.get(r.kind, 0) + 1
            summary = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items(), key=lambda kv: -kv[1]))
            more = Text(
                f"+ {len(folded)} more not ours"
                + (" (f)" if narrow else f": {summary} (f: show all)"),
                style="dim italic",
            )
            self.update(Group(t, Padding(more, (0, 0, 0, 6))))
            return
        self.update(t)
