"""What the attach view shows after a poll, as one immutable value (``Board``): built by whoever
polls (the view's collector thread) from the follower's state and handed over whole, so a renderer
never reads the follower, whose state the next poll changes under it. No Textual here.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from vmmtui.attach.follow import Follower
from vmmtui.events import AttachKind, Event, GpuMemory, SharedFile, SocketPair

#: how many fds of the selected process a board carries (the view's table shows these)
FD_ROWS = 500


@dataclass(frozen=True)
class ProcessRow:
    pid: int
    name: str  # raw, from /proc: a renderer shows it through names.shown
    gpu: int
    memfd: int
    shm: int
    sockets: int
    mapped: int
    gpu_memory: GpuMemory | None


@dataclass(frozen=True)
class FdLine:
    fd: int
    kind: str
    target: str  # raw, from /proc
    how: str
    same_as: tuple[tuple[int, int], ...]  # (pid, fd) of other processes: one open file description


@dataclass(frozen=True)
class Board:
    polls: int
    processes: tuple[ProcessRow, ...]
    selected: int | None
    fds: tuple[FdLine, ...]
    shares: tuple[SharedFile | SocketPair, ...]
    earlier: tuple[SharedFile, ...]  # shared before, no longer
    unseen: tuple[str, ...]
    #: the selected process's whole timeline when the selection changed, else its new events
    timeline: tuple[Event, ...] = ()
    timeline_restart: bool = False
    events: tuple[Event, ...] = field(default=())  # everything this poll said


def board(
    f: Follower,
    selected: int | None,
    events: list[Event],
    gpu: dict[int, GpuMemory],
    reselected: bool = False,
) -> Board:
    """The board after a poll of ``f`` that said ``events``; ``selected`` (None: the lowest pid)
    is the process whose fds and timeline it carries."""
    t = f.tracker
    if (selected is None or selected not in t.alive) and t.alive:
        new = min(t.alive)  # none chosen yet, or the chosen one exited: the lowest pid
        reselected = reselected or new != selected
        selected = new
    rows = []
    for pid, p in sorted(t.alive.items()):
        kinds = Counter(x.kind for x in p.fds.values())
        rows.append(
            ProcessRow(
                pid,
                p.name,
                kinds[AttachKind.GPU],
                kinds[AttachKind.MEMFD],
                kinds[AttachKind.SHM],
                kinds[AttachKind.SOCKET],
                len(p.maps),
                gpu.get(pid),
            )
        )
    fds: list[FdLine] = []
    chosen = t.alive.get(selected) if selected is not None else None
    if chosen is not None:
        for fd, x in sorted(chosen.fds.items())[:FD_ROWS]:
            e = t.open_fds.get((chosen.pid, fd))
            same = tuple(t.shares.same_as(chosen.pid, fd, 4)) if t.shares else ()
            fds.append(FdLine(fd, x.kind, x.target, e.how if e else "", same))
    shares: list[SharedFile | SocketPair] = []
    if t.shares:
        shares = [*t.shares.files, *t.shares.pairs]
    now = {(s.dev, s.ino) for s in shares if isinstance(s, SharedFile)}
    earlier = tuple(s for s in f.shared_history[-6:] if (s.dev, s.ino) not in now)
    if reselected:
        timeline = tuple(t.timeline.get(selected, [])) if selected is not None else ()
    else:
        timeline = tuple(e for e in events if getattr(e, "pid", None) in (None, selected))
    return Board(
        f.polls,
        tuple(rows),
        selected,
        tuple(fds),
        tuple(shares),
        earlier,
        tuple(f.unseen),
        timeline,
        reselected,
        tuple(events),
    )
