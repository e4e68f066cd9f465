"""Memory kept as a mapping, as polling sees it: ``/proc/PID/maps`` read at each poll.

A memfd or a /dev/shm file lives until its last fd *and* its last mapping go: mmap(2) says
"closing the file descriptor does not unmap the region", and memfd_create(2) that the memory is
released once "all references to the file are dropped". A program that maps what it receives and
closes the fd at once (PyTorch's ``rebuild_storage_fd``, an engine keeping every bucket as a
mapping) holds the memory with no fd at all, so an fd table alone misses it. Here each poll's
mappings are compared with the last (``MappingSeen``, ``MappingGone``), where each came from is
told from what the polls saw (the same memory held by another process before this one had it:
arrived; its parent's at its first sight: inherited; found at attach; otherwise its own), and
the pins of one process on another's memory (its fds and mappings of pieces that arrived) give
three claims, every one ``possible-…``: polling reads what is there at each poll, never the
calls between two polls, so a pin made and dropped between two of them, or an munmap after the
last read before an exit, is not seen.

- ``possible-growth``: the pins on one peer's memory rose at ``GROWTH_RISES`` polls with none
  released (a loop that keeps what it is sent), said again as the pile doubles and, at the
  holder's exit, with its peak; a start-up that maps a few bursts and stays flat never reaches it.
- ``possible-held-after-exporter-died``: still mapped at a poll after that peer was seen gone.
- ``possible-held-until-exit``: still mapped when the holder was last read before its exit.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vmmtui.stream.events import (
    Arrival,
    AttachKind,
    Event,
    Leak,
    LeakKind,
    MappingGone,
    MappingSeen,
    ProcessGone,
)
from vmmtui.stream.events import (
    MappingVia as Via,
)
from vmmtui.trace.procfs.lifecycle import Tracker
from vmmtui.trace.procfs.scan import Mapping, ProcessScan, Scan
from vmmtui.trace.procfs.shares import Shares

Key = tuple[int, int]
#: polls at which one holder's pins on one peer's memory rose, none released between, before it
#: is said as a possible growth: a start-up of three bursts that then stays flat (a browser's
#: renderer handed its regions at start) stays under it; a loop that keeps every bucket passes
#: it by its fifth round
GROWTH_RISES = 4
#: how a piece counts as another process's memory (not inherited, not found at attach)
CROSSED = (Arrival.ARRIVED, Arrival.UNKNOWN)
#: and as a pin on the other holder's (found at attach with another holder: which made it was
#: not seen, so it weighs only when that other is gone, said as possible like every claim here)
ATTACHED = (*CROSSED, Arrival.PRESENT)
#: the peer of pieces whose origin polling did not see
UNSEEN = 0
#: model/policy.py's TEARDOWN_WINDOW_S (a source may not import the model: tests check they
#: agree): a hold after a peer was gone is said again once it has lasted this long
TEARDOWN_WINDOW_S = 2.0


@dataclass
class Mapped:
    """One file as one process maps it, as last read, with where it came from."""

    path: str
    kind: AttachKind
    size: int
    how: Arrival
    source: int | None
    at: float


@dataclass
class Pile:
    """One holder's pins on one peer's memory, poll after poll."""

    keys: frozenset[Key] = frozenset()
    #: polls at which it rose with nothing released since the last release
    rises: int = 0
    #: its count at each of those polls, the first the count it rose from
    trail: list[int] = field(default_factory=list)
    #: the count at the last ``possible-growth`` said (0: none yet)
    said: int = 0
    first_at: float = 0.0


@dataclass
class Mappings:
    """What each followed process maps, and the claims polling makes from it."""

    maps: dict[int, dict[Key, Mapped]] = field(default_factory=dict)
    #: holder -> peer -> its pile
    piles: dict[int, dict[int, Pile]] = field(default_factory=dict)
    #: holder -> its fd table, mappings and (roads, processes gone) when its piles were last
    #: looked at
    _looked: dict[int, tuple] = field(default_factory=dict)
    #: pid -> when a poll first found it gone
    gone_at: dict[int, float] = field(default_factory=dict)
    said: set[tuple] = field(default_factory=set)
    #: (holder, peer) -> when a hold after the peer was gone was first said (said again once it
    #: lasts the teardown window)
    orphans: dict[tuple[int, int], float] = field(default_factory=dict)
    #: sizes of the pieces last seen, by holder and file (the bytes of a pile)
    sizes: dict[int, dict[Key, int]] = field(default_factory=dict)

    def update(
        self, scan: Scan, t: Tracker, before: Shares | None, prev: Scan | None, events: list[Event]
    ) -> list[Event]:
        """This poll's mappings against the last: what was mapped or unmapped, then the claims."""
        out: list[Event] = []
        for e in events:
            if isinstance(e, ProcessGone):
                self.gone_at.setdefault(e.pid, e.at)
                out += self._exit(t, e.pid, e.at)
        held_before = before.memory_holders if before is not None else {}
        held_now = t.shares.memory_holders if t.shares is not None else {}
        old_procs = prev.processes if prev is not None else {}
        for pid, p in scan.alive().items():
            last = self.maps.get(pid)
            if (
                last is not None
                and old_procs.get(pid) is not None
                and old_procs[pid].maps is p.maps
            ):
                continue  # the very list of the last read: nothing mapped or unmapped
            now: dict[Key, Mapped] = {}
            for m in p.maps:
                was = (last or {}).get(m.key)
                if was is not None:
                    now[m.key] = was
                    if was.size != m.size:
                        was.size = m.size
                        out.append(self._seen(pid, m, was, scan.at))
                    continue
                how, source, via = self._came(p, m, t, held_before, held_now, old_procs, prev)
                now[m.key] = Mapped(m.path, m.kind, m.size, how, source, scan.at)
                out.append(MappingSeen(pid, m.path, m.kind, m.dev, m.ino, m.size, how, scan.at,
                                       source, via))  # fmt: skip
            for key, was in (last or {}).items():
                if key not in now:
                    out.append(MappingGone(pid, was.path, was.kind, key[0], key[1], scan.at))
            self.maps[pid] = now
        out += self._piles(scan, t)
        out += self._lasting(scan.at)
        return out

    @staticmethod
    def _seen(pid: int, m: Mapping, was: Mapped, at: float) -> MappingSeen:
        return MappingSeen(pid, m.path, m.kind, m.dev, m.ino, m.size, was.how, at, was.source)

    def _came(
        self,
        p: ProcessScan,
        m: Mapping,
        t: Tracker,
        held_before: dict[Key, set[int]],
        held_now: dict[Key, set[int]],
        old_procs: dict[int, ProcessScan],
        prev: Scan | None,
    ) -> tuple[Arrival, int | None, str]:
        """Where a mapping first seen came from, from what the polls saw only."""
        for fd, f in p.fds.items():  # mapped through an fd of it that polling followed
            e = t.open_fds.get((p.pid, fd))
            if f.key == m.key and e is not None and e.how != Arrival.OPENED:
                src = e.source.pid if e.source is not None and e.source.pid != p.pid else None
                return e.how, src, f"fd:{fd}"
        others = sorted(held_now.get(m.key, set()) - {p.pid})
        if prev is None:  # the first poll
            if not t.attached:  # a command started here: nothing was there before it
                if others:
                    return Arrival.UNKNOWN, others[0], Via.FIRST_POLL
                return Arrival.OPENED, None, ""
            return Arrival.PRESENT, (others[0] if others else None), ""
        had = sorted(held_before.get(m.key, set()) - {p.pid})
        first = p.pid not in old_procs
        if first and p.ppid in had + others:
            return Arrival.INHERITED, p.ppid, Via.PARENT
        was = [
            q
            for q in had
            if q in old_procs
            and old_procs[q].error is None
            and t._lacked_since(p, old_procs[q].read_end, old_procs)  # noqa: SLF001
        ]
        if was:
            return Arrival.ARRIVED, was[0], Via.HELD_BEFORE
        if had or others:
            return Arrival.UNKNOWN, (had or others)[0], Via.TOGETHER
        return Arrival.OPENED, None, ""

    # -- pins, as piles per holder and peer --------------------------------------------------------
    def _pins(
        self, t: Tracker, pid: int, p: ProcessScan, roads: frozenset[int]
    ) -> dict[int, dict[Key, int]]:
        """peer -> the pieces of its memory ``pid`` pins now (key -> bytes): fds and mappings
        that arrived, by the files' identity (one piece however many fds and maps). Under peer
        ``UNSEEN`` (0): memfds and /dev/shm files whose origin no poll saw (it appeared in this
        process alone: made here, or received and its sender's copy closed between two polls),
        counted only where a Unix socket joins it to another followed process (a road an fd can
        come by); inherited and found-at-attach pieces are not counted."""
        out: dict[int, dict[Key, int]] = {}
        road = pid in roads
        for key, m in self.maps.get(pid, {}).items():
            if m.how in ATTACHED and m.source is not None:
                out.setdefault(m.source, {})[key] = m.size
            elif m.how == Arrival.OPENED and road:
                out.setdefault(UNSEEN, {})[key] = m.size
        for fd, f in p.fds.items():
            if f.kind not in ("memfd", "shm", "dmabuf"):
                continue
            e = t.open_fds.get((pid, fd))
            if e is None:
                continue
            if e.how in CROSSED and e.source is not None and e.source.pid != pid:
                peer = e.source.pid
            elif e.how == Arrival.OPENED and road:
                peer = UNSEEN
            else:
                continue
            if peer == UNSEEN and any(f.key in x for q, x in out.items() if q != UNSEEN):
                continue
            piece = out.setdefault(peer, {})
            piece[f.key] = max(piece.get(f.key, 0), f.size)
        return out

    def _piles(self, scan: Scan, t: Tracker) -> list[Event]:
        """Each holder's piles, poll after poll; a holder whose fds, mappings and roads are as
        at the last poll, with no process gone since, is passed over (nothing can have moved)."""
        out: list[Event] = []
        roads = _roads(t)
        gone = len(t.gone)
        for pid, p in scan.alive().items():
            maps = self.maps.get(pid)
            was = self._looked.get(pid)
            if was is not None and was[0] is p.fds and was[1] is maps and was[2] == (roads, gone):
                continue
            self._looked[pid] = (p.fds, maps, (roads, gone))
            pins = self._pins(t, pid, p, roads)
            self.sizes[pid] = {k: n for piece in pins.values() for k, n in piece.items()}
            piles = self.piles.setdefault(pid, {})
            for peer in set(pins) | set(piles):
                cur = frozenset(pins.get(peer, {}))
                pile = piles.setdefault(peer, Pile(first_at=scan.at))
                if pile.keys - cur:  # one released: no loop that keeps everything (yet)
                    pile.rises, pile.trail = 0, [len(cur)]
                elif len(cur) > len(pile.keys):
                    if not pile.trail:
                        pile.trail = [len(pile.keys)]
                    pile.rises += 1
                    pile.trail.append(len(cur))
                pile.keys = cur
                n = len(cur)
                if (
                    pile.rises >= GROWTH_RISES
                    and n > pile.said
                    and (not pile.said or n >= 2 * pile.said)
                ):
                    pile.said = n
                    out.append(self._growth(t, pid, peer, pins.get(peer, {}), pile, scan.at))
                if peer in t.gone and cur and ("orphan", pid, peer) not in self.said:
                    out += self._orphan(t, pid, peer, pins.get(peer, {}), scan.at)
        return out

    def _growth(
        self, t: Tracker, pid: int, peer: int, pieces: dict[Key, int], pile: Pile, at: float
    ) -> Leak:
        return Leak(
            LeakKind.POSSIBLE_GROWTH, "", pid, "", "", at,
            memory=_kind(self, pid, pieces), peer=peer, pins=len(pieces),
            size=sum(pieces.values()), trail=pile.trail[-8:],
            seconds=round(at - pile.first_at, 3),
        )  # fmt: skip

    def _orphan(
        self, t: Tracker, pid: int, peer: int, pieces: dict[Key, int], at: float
    ) -> list[Event]:
        mapped = {k for k in pieces if k in self.maps.get(pid, {})}
        if not mapped:
            return []  # fds only, unmapped: the fd table's claim (``LeakFinder.during``)
        self.said.add(("orphan", pid, peer))
        self.orphans[(pid, peer)] = at
        return [self._orphaned(pid, peer, pieces, at)]

    def _orphaned(self, pid: int, peer: int, pieces: dict[Key, int], at: float) -> Leak:
        """The hold, with its start (the poll that found ``peer`` gone) and now, in ns of the
        polls' clock: the policy weighs it by how long it has lasted."""
        return Leak(
            LeakKind.POSSIBLE_HELD_AFTER_EXPORTER_DIED, "", pid, "", "", at,
            memory=_kind(self, pid, pieces), peer=peer, pins=len(pieces),
            size=sum(pieces.values()), since=_ns(self.gone_at.get(peer, at)), ktime=_ns(at),
        )  # fmt: skip

    def _lasting(self, at: float) -> list[Event]:
        """Holds after a peer was gone, said again once they outlast the teardown window (an
        update of the same relation: the policy then weighs it as orphaned)."""
        out: list[Event] = []
        for (pid, peer), said_at in list(self.orphans.items()):
            pile = self.piles.get(pid, {}).get(peer)
            if pile is None or not pile.keys:
                del self.orphans[(pid, peer)]  # let go (or gone): said at the last poll it held
                continue
            if at - self.gone_at.get(peer, said_at) >= TEARDOWN_WINDOW_S:
                del self.orphans[(pid, peer)]
                pieces = {k: self.sizes.get(pid, {}).get(k, 0) for k in pile.keys}
                out.append(self._orphaned(pid, peer, pieces, at))
        return out

    def _exit(self, t: Tracker, pid: int, at: float) -> list[Event]:
        """A holder found gone: what it still mapped when last read, per peer, and the peak of
        a growth said while it lived."""
        out: list[Event] = []
        maps = self.maps.pop(pid, {})
        sizes = self.sizes.pop(pid, {})
        by_peer: dict[int, dict[Key, int]] = {}
        road = pid in _roads(t)
        for key, m in maps.items():
            if m.how in CROSSED and m.source is not None:
                by_peer.setdefault(m.source, {})[key] = m.size
            elif m.how == Arrival.PRESENT and ("orphan", pid, m.source) in self.said:
                by_peer.setdefault(m.source or UNSEEN, {})[key] = m.size
            elif m.how == Arrival.OPENED and road:
                by_peer.setdefault(UNSEEN, {})[key] = m.size
        self._looked.pop(pid, None)
        for peer, pile in self.piles.pop(pid, {}).items():
            self.orphans.pop((pid, peer), None)
            if pile.said and len(pile.keys) > pile.said:
                pieces = {k: sizes.get(k, 0) for k in pile.keys}
                pile.said = len(pile.keys)
                out.append(self._growth(t, pid, peer, pieces, pile, at))
        for peer, pieces in sorted(by_peer.items()):
            kind = str(next(iter(maps[k].kind for k in pieces)))
            out.append(
                Leak(
                    LeakKind.POSSIBLE_HELD_UNTIL_EXIT,
                    "",
                    pid,
                    "",
                    "",
                    at,
                    memory=kind,
                    peer=peer,
                    pins=len(pieces),
                    size=sum(pieces.values()),
                )  # fmt: skip
            )
        return out


def _ns(seconds: float) -> int:
    return int(seconds * 1e9)


def _roads(t: Tracker) -> frozenset[int]:
    """The followed processes a Unix socket joins to another (sock_diag's peers, as seen)."""
    return frozenset(
        pid for ends in t.pairs_said if len({q for q, _ in ends}) == 2 for pid, _ in ends
    )


def _kind(m: Mappings, pid: int, pieces: dict[Key, int]) -> str:
    kinds = {x.kind for k, x in m.maps.get(pid, {}).items() if k in pieces}
    return str(next(iter(kinds))) if len(kinds) == 1 else ""
