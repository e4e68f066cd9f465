"""The "+N more processes" line under a trace's panels: every process without a panel (wrappers,
helpers, sharers beyond the panels that fit) counted in one line, listed when it has the focus
(Tab) or is opened (``m``). The order and the split are ``view/lineup.py``'s; this words them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import Static

from vmmtui.view.lineup import Lineup, Parties, Rank, rank

if TYPE_CHECKING:
    from vmmtui.view.programs import ProgramsView

#: the most processes the opened list names (the rest counted on its last line)
LISTED = 8
#: below this many rows the opened list names fewer (the panels keep their rows)
TALL, LISTED_SHORT = 30, 3
#: what each rank is called in the list
RANK_WORDS = {
    Rank.SHARES: "shares (no room for its panel)",
    Rank.FINDING: "has a finding",
    Rank.HOLDS: "holds fds or memory",
    Rank.WRAPPER: "the command's process",
    Rank.HELPER: "helper",
}


#: each rank on the folded line, by how many (one, many)
FOLDED_WORDS = {
    Rank.FINDING: ("with a finding to look at", "with a finding to look at"),
    Rank.SHARES: ("that shares", "that share"),
    Rank.HOLDS: ("that holds fds or memory", "that hold fds or memory"),
    Rank.WRAPPER: ("wrapper", "wrappers"),
    Rank.HELPER: ("helper", "helpers"),
}


def folded_words(line: Lineup) -> str:
    """The one line: how many processes have no panel, and what each of them is, by rank
    (never a process with a finding or a sharer called a wrapper or a helper)."""
    n = len(line.folded)
    parts = [
        f"{k} {FOLDED_WORDS[r][k != 1]}" + (", without room" if r <= Rank.SHARES else "")
        for r, k in line.folded_by
    ] or ["wrappers, helpers"]
    return f"+{n} more process{'es' if n != 1 else ''} ({'; '.join(parts)})"


class MoreProcesses(Static, can_focus=True):
    """The processes folded out of the panels: one line, or their list while focused or open."""

    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        #: ``m`` opened it (it stays open without the focus)
        self.opened = False
        #: it has the focus (set by its own focus and blur: ``has_focus`` may lag them)
        self.focused = False
        self._last: tuple[ProgramsView, Lineup] | None = None
        self._key: tuple = ()

    @property
    def open(self) -> bool:
        return self.opened or self.focused

    def toggle(self) -> bool:
        self.opened = not self.opened
        self._again()
        return self.opened

    def on_focus(self) -> None:
        self.focused = True
        self._again()

    def on_blur(self) -> None:
        self.focused = False
        self._again()

    def _again(self) -> None:
        if self._last is not None:
            self._key = ()
            self.show(*self._last)

    def show(self, v: ProgramsView, line: Lineup) -> None:
        self._last = (v, line)
        self.display = bool(line.folded)  # nothing folded: no line, and Tab never lands here
        key = (line, v.seq if self.open else 0, self.open)
        if key == self._key or not line.folded:
            return
        self._key = key
        self.set_class(self.open, "-open")
        head = Text.assemble(
            (folded_words(line), "bold"),
            (" · m closes" if self.open else " · m or tab lists them", "dim"),
        )
        head.no_wrap, head.overflow = True, "ellipsis"
        if not self.open:
            names = ", ".join(v.proc(pid).name for pid in line.folded[:LISTED])
            head.append(f" · {names}", "dim")
            self.update(head)
            return
        from vmmtui.tui.widgets.programs import pid_style

        parties = Parties.of(v)
        rows = [head]
        listed = LISTED if self.screen.size.height >= TALL else LISTED_SHORT
        for pid in line.folded[:listed]:
            p = v.proc(pid)
            state = "running" if p.alive else "ended"
            if not p.alive and p.end is not None:
                from vmmtui.words.programs import end_words

                state = end_words(p.end)
            said = RANK_WORDS[rank(v, p, parties)]
            if rank(v, p, parties) is Rank.FINDING:  # which one: the list names it
                from vmmtui.model.findings import Weight
                from vmmtui.words.findings import words_of

                found = [
                    f
                    for f in v.finding_list()
                    if f.weight is Weight.PROBLEM and pid in (f.pid, f.peer)
                ]
                if found:
                    said = f"{said}: {words_of(found[-1].of).what}"
            row = Text.assemble(
                ("  ", ""),
                (p.name, pid_style(v, pid)),
                f" · {said} · {state} · {p.ncalls} calls",
                (f" · parent {p.ppid}" if p.ppid else "", "dim"),
            )
            row.no_wrap, row.overflow = True, "ellipsis"
            rows.append(row)
        if len(line.folded) > listed:
            rows.append(Text(f"  … {len(line.folded) - listed} more not listed", "dim"))
        self.update(Text("\n").join(rows))
