"""Which processes of a trace get a panel, and in what order: a process with a problem comes
first (a leak, a refused call, memory held after its exporter died: the screen is for it), then
the ones that share.

A traced command is often a wrapper (``bash -c``, ``python -m``, a launcher) around a tree of
helpers, and only a few of its processes export, send, receive, take or import anything. Those
are what the inspector is for, so they get the panels that fit; the rest are counted in one
line ("+N more processes") that opens on a key. Pure: a ``ProgramsView`` and a number of panels
in, pids out; no Textual, no words.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from enum import IntEnum

from vmmtui.model.findings import Weight
from vmmtui.view.programs import ProcView, ProgramsView

#: fds that say the process took part in a share (``sent``: the sender's side of SCM_RIGHTS)
SHARING_FDS = frozenset({"exported", "sent", "received", "taken", "arrived"})
#: memory that came from, or went to, another process
SHARING_MEMS = frozenset({"import", "pool import", "ipc open", "pool pointer import"})
EXPORTED_MEMS = frozenset({"ipc export", "pool pointer export"})


class Rank(IntEnum):
    """Why a process has (or would have) a panel; the lower, the sooner it is shown."""

    #: a finding to look at names it (a refused pidfd_getfd, a leak), whether it shares or not:
    #: with 30 workers of which one leaks, its panel comes before the healthy sharers'
    FINDING = 0
    #: exported, sent, received, took or imported
    SHARES = 1
    #: holds fds of interest or GPU memory, but nothing went between it and another process
    HOLDS = 2
    #: the command's own process or a target with nothing of interest: a wrapper, a launcher
    WRAPPER = 3
    #: any other process of the tree (a helper)
    HELPER = 4


@dataclass(frozen=True)
class Lineup:
    """The processes with a panel (in order), and the ones folded into the "+N more" line."""

    panels: tuple[int, ...]
    folded: tuple[int, ...]
    #: how many of the folded ones share (more sharers than panels: said on the line)
    folded_sharing: int = 0
    #: how many of the folded ones are of each rank, in rank order (the line says each)
    folded_by: tuple[tuple[Rank, int], ...] = ()


@dataclass(frozen=True)
class Parties:
    """The pids at either end of a transfer, and those a finding to look at names (the refused
    caller and the process it asked for; not a quiet fact's)."""

    moved: frozenset[int]
    found: frozenset[int]

    @classmethod
    def of(cls, v: ProgramsView) -> Parties:
        moved = {pid for t in v.transfer_list() for pid in (t.from_pid, t.to_pid)}
        found = {
            pid
            for f in v.finding_list()
            if f.weight is Weight.PROBLEM
            for pid in (f.pid, f.peer)
            if pid
        }
        return cls(frozenset(moved), frozenset(found))


def rank(v: ProgramsView, p: ProcView, parties: Parties) -> Rank:
    """Why ``p`` matters."""
    if p.pid in parties.found:
        return Rank.FINDING
    if p.pid in parties.moved or _shares(p):
        return Rank.SHARES
    if p.findings:
        return Rank.FINDING
    if p.interesting:
        return Rank.HOLDS
    if p.pid in v.targets:
        return Rank.WRAPPER
    return Rank.HELPER


def _shares(p: ProcView) -> bool:
    if any(f.how in SHARING_FDS for f in (*p.fds.values(), *p.closed)):
        return True
    for m in p.mems.values():
        if m.kind in SHARING_MEMS or m.kind in EXPORTED_MEMS or m.exported:
            return True
    return False


def lineup(v: ProgramsView, room: int) -> Lineup:
    """At most ``room`` panels (at least one where any process is known): the processes that
    share first, then those with a finding, those that hold something, the command's own
    process; each rank in the order the processes appeared, so a panel does not jump about as
    calls come. Every other process of the view is folded, none is dropped."""
    parties = Parties.of(v)
    ranked = sorted(
        ((rank(v, p, parties), p.first, p.pid) for p in v.procs.values()),
        key=lambda r: (r[0], r[1], r[2]),
    )
    room = max(1, room)
    # a helper with nothing of interest gets a panel only when the view has nothing better: an
    # empty screen says less than a wrapper's calls
    wanted = [r for r in ranked if r[0] < Rank.HELPER] or ranked[:1]
    panels = wanted[:room]
    shown = {r[2] for r in panels}
    folded = tuple(r[2] for r in ranked if r[2] not in shown)
    sharing = sum(1 for r in ranked if r[2] not in shown and r[0] == Rank.SHARES)
    by = Counter(r[0] for r in ranked if r[2] not in shown)
    return Lineup(tuple(r[2] for r in panels), folded, sharing, tuple(sorted(by.items())))
