"""Who gets a panel's rows when there are fewer than it could fill: one budget for every size.

A worker's panel spends its rows in this order: its header line; its declared fds (the exported or
received fd and the connections first, never dropped while a row is left); the step list, folded
around the step on show; the mapping card last. Whatever is left out is counted on a line that says
so ("+N more"): nothing vanishes without a sign. No Textual here: the widgets measure, this decides.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from vmmtui.stream.events import FdRow


@dataclass(frozen=True)
class Window:
    """Rows ``[start, stop)`` of ``total`` are shown; ``before`` and ``after`` are folded, each
    into one line that counts them."""

    start: int
    stop: int
    total: int

    @property
    def before(self) -> int:
        return self.start

    @property
    def after(self) -> int:
        return self.total - self.stop

    @property
    def folded(self) -> int:
        return self.total - (self.stop - self.start)

    @property
    def rows(self) -> int:
        """Rows drawn: the shown ones and a line for each folded end."""
        return self.stop - self.start + (self.before > 0) + (self.after > 0)


def window(total: int, room: int, focus: int, context: int = 2) -> Window:
    """The run of ``total`` rows around row ``focus`` (with up to ``context`` rows before it) that
    fits ``room`` rows, a line for each folded end counted in ``room``. Under 3 rows only the
    fold lines would fit: nothing is shown, one line counts all (``rows`` is 1)."""
    if total <= room:
        return Window(0, total, total)
    if room < 3:
        return Window(0, 0, total)
    focus = max(0, min(focus, total - 1))
    ctx = max(0, min(context, room - 3))
    start = max(0, focus - ctx)
    if start + room - (start > 0) >= total:  # the end is in reach: no fold below
        start = max(0, total - (room - 1))
        return Window(start, total, total)
    return Window(start, start + room - (start > 0) - 1, total)


@dataclass(frozen=True)
class PanelRows:
    """How a panel's rows are shared: ``steps`` rows for the step list (0: none), the card or not."""

    steps: int
    card: bool


def share(height: int, fixed: int, steps: int, card: int) -> PanelRows:
    """``height`` rows, ``fixed`` of them taken by the header and the whole fd table (with their
    gaps): the step list gets what it needs if the card still fits beside it, else the card goes;
    a step list still too long gets what is left (``window`` folds it)."""
    left = height - fixed
    if left <= 0:
        return PanelRows(0, False)
    if steps + card <= left:
        return PanelRows(steps, True)
    return PanelRows(min(steps, left), False)


def fd_order(rows: Sequence[FdRow], front: str | None = None) -> list[FdRow]:
    """A panel's declared fds, the most telling first: the exported and received fds, the
    connection to the consumer on show (``front``), the other connections, then the rest."""

    def rank(r: FdRow) -> tuple[int, int, int]:
        kind = str(r.kind)
        first = {"exported": 0, "received": 0, "connection": 1}.get(kind, 2)
        shown = bool(front) and kind == "connection" and f"connection to {front} " in r.note
        return (first, 0 if shown else 1, r.fd)

    return sorted(rows, key=rank)


def folded_line(kinds: Sequence[str]) -> str:
    """``+3 more: 2 connection, 1 listener``: what a fold hid, by kind, the commonest first."""
    count: dict[str, int] = {}
    for kind in kinds:
        count[kind] = count.get(kind, 0) + 1
    parts = ", ".join(f"{n} {k}" for k, n in sorted(count.items(), key=lambda kv: -kv[1]))
    return f"+{len(kinds)} more: {parts}"
