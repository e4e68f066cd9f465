"""What changed between two scans: processes that came and went, fds that opened, arrived or closed.

An fd is *arrived* when kcmp says it is the same open file description as an fd another process
held before it appeared (or, for a memfd or /dev/shm file, when the same memory was held by another
process before: the sender may have closed its copy already, as NCCL does). How it travelled is told
only from evidence: the receiver holding a pidfd of the sender (pidfd_getfd), or a Unix socket
joining them (SCM_RIGHTS). Nothing else is guessed.

Direction is claimed only where a poll saw it: the other process holding the file while this one,
read after it in the same poll (or not started yet), did not. *Inherited* likewise: the parent seen
holding it, at the same number, before the child started; a child first seen with its parent's file
otherwise "arrived between two polls (how: not seen)". An fd made and sent between two polls
shows up in both processes at once: it is *unknown* (the same open file as the other's, which one
made it not seen), never "arrived" in either. Fds open before attach are *present*, with the other
holder named where they are shared; both kinds are checked for leaks, worded as possible ones.
"""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field

from vmmtui.stream.events import (
    Arrival,
    Event,
    FdClosed,
    FdHolder,
    FdOpened,
    GpuMemory,
    ProcessGone,
    ProcessSeen,
    ProcessUnreadable,
    SharedFile,
)
from vmmtui.stream.names import shown
from vmmtui.trace.identity import identity_of
from vmmtui.trace.procfs.scan import MEMORY_KINDS, OpenFd, ProcessScan, Scan
from vmmtui.trace.procfs.shares import Shares, find_shares

Holder = tuple[int, int]

#: the clock tick of /proc/PID/stat's start time (a start within one tick of a read tells nothing)
TICK = 1 / os.sysconf("SC_CLK_TCK")
#: why an fd shared with another process is "unknown": both ends appeared between two polls
UNSEEN_DIRECTION = (
    "both appeared between two polls: which process made it and which received it was not seen"
)
#: why the fd of a process first seen, shared with another, is "unknown": it came before any poll
#: saw the process (inherited at fork, or received later: the same number proves neither)
UNSEEN_ARRIVAL = "arrived between two polls (how: not seen)"


@dataclass
class Tracker:
    """Follows a set of processes scan after scan and says what changed, as events."""

    prev: Scan | None = None
    shares: Shares | None = None
    alive: dict[int, ProcessScan] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    gone: set[int] = field(default_factory=set)
    #: every (pid, fd) open now, with how it came
    open_fds: dict[Holder, FdOpened] = field(default_factory=dict)
    #: pid -> the other pids it ever shared a file or memory with
    peers: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))
    #: (dev, ino) of a file -> every pid seen holding or mapping it: a memory's own peers (a
    #: process that only held the same socket, as a launcher does for a moment, holds none of it)
    holders: dict[tuple[int, int], set[int]] = field(default_factory=lambda: defaultdict(set))
    timeline: dict[int, list[Event]] = field(default_factory=lambda: defaultdict(list))
    said_unreadable: set[int] = field(default_factory=set)
    shared_said: set[tuple] = field(default_factory=set)
    pairs_said: set[frozenset] = field(default_factory=set)
    gpu_said: dict[int, tuple] = field(default_factory=dict)
    returncodes: dict[int, tuple[int | None, str | None]] = field(default_factory=dict)
    #: the shared files of the last scan, by id (kept alive here, so an id is never reused meanwhile)
    files_seen: dict[int, SharedFile] = field(default_factory=dict)
    #: (pid, fd) open now that came from another process (arrived or inherited): what leaks look at
    received: dict[Holder, FdOpened] = field(default_factory=dict)
    #: (pid, fd) open now, shared with another process, whose origin polling did not see (open before
    #: attach, or both ends appeared within one poll): checked for leaks, worded as possible ones
    unsure: dict[Holder, FdOpened] = field(default_factory=dict)
    #: (pid, fd) open now -> when it was first seen held (the end of that reading, s since boot)
    held_since: dict[Holder, float] = field(default_factory=dict)
    #: pid -> the fds it still held at its last scan before it was gone
    at_exit: dict[int, list[FdOpened]] = field(default_factory=dict)
    #: (pid, fd) another process's fd was seen to come from (arrived or inherited): the origin
    sources: set[Holder] = field(default_factory=set)
    #: following processes that ran before the first poll (attach, ``trace -p``, ``--all``): what
    #: the first poll finds is "found at attach" (``present``); False for a command started here
    #: (watch, ``trace --poll -- CMD``), whose every fd was opened after it started
    attached: bool = True
    #: pids found as children of followed processes (not named by the user)
    discovered: set[int] = field(default_factory=set)
    #: discovered pids that ended before any poll read them
    vanished: set[int] = field(default_factory=set)

    def update(self, scan: Scan, gpu: dict[int, GpuMemory] | None = None) -> list[Event]:
        shares = find_shares(scan, self.shares)
        out: list[Event] = []
        for pid, p in scan.processes.items():
            if p.error is None:
                out += self._process(p, scan, shares)
            elif p.gone and pid in self.alive:
                out.append(self._gone(pid, scan.at))
            elif not p.gone and pid not in self.said_unreadable:
                self.said_unreadable.add(pid)
                out.append(ProcessUnreadable(pid, p.error))
            elif p.gone and pid in self.returncodes and pid not in self.gone:
                self.gone.add(pid)
                code, sig = self.returncodes[pid]
                out.append(ProcessGone(pid, p.name or "?", scan.at, code, sig))
            elif p.gone and pid not in self.gone and pid in self.discovered:
                # a child of a followed process that ended before a poll read it: not a target
                # the user named, so no "no such process" (said with what polling missed)
                self.gone.add(pid)
                self.vanished.add(pid)
            elif p.gone and pid not in self.gone and pid not in self.said_unreadable:
                self.said_unreadable.add(pid)
                self.gone.add(pid)
                out.append(
                    ProcessUnreadable(pid, "no such process (it does not exist or has exited)")
                )
        for pid in [pid for pid in self.alive if pid not in scan.processes]:
            out.append(self._gone(pid, scan.at))
        same_answer = self.shares is not None and shares.files is self.shares.files
        if not same_answer:
            files_before, self.files_seen = self.files_seen, {id(f): f for f in shares.files}
        for f in () if same_answer else shares.files:
            if files_before.get(id(f)) is f:
                continue  # the same answer as last scan (shares keeps it): said, and its peers noted
            key = (f.dev, f.ino, tuple((h.pid, h.fd) for h in f.holders), tuple(f.mapped_by))
            pids = {h.pid for h in f.holders} | set(f.mapped_by)
            for pid in pids:
                self.peers[pid] |= pids - {pid}
            self.holders[(f.dev, f.ino)] |= pids
            if key not in self.shared_said:
                self.shared_said.add(key)
                out.append(f)
                for pid in pids:
                    self.timeline[pid].append(f)
        for pair in () if same_answer else shares.pairs:
            ends = frozenset(((pair.a.pid, pair.a.fd), (pair.b.pid, pair.b.fd)))
            if ends not in self.pairs_said:
                self.pairs_said.add(ends)
                out.append(pair)
        for pid, g in (gpu or {}).items():
            charged = (tuple(sorted(g.used.items())), g.error)
            if self.gpu_said.get(pid) != charged and (pid in self.alive):
                self.gpu_said[pid] = charged
                out.append(g)
                self.timeline[pid].append(g)
        self.prev, self.shares = scan, shares
        return out

    # -- one process -------------------------------------------------------------------------------
    def _process(self, p: ProcessScan, scan: Scan, shares: Shares) -> list[Event]:
        out: list[Event] = []
        new = p.pid not in self.alive
        if new:
            self.names[p.pid] = p.name
            who = identity_of(p.pid)
            c = who.container
            e = ProcessSeen(
                p.pid,
                p.ppid,
                p.name,
                p.cmdline,
                p.uid,
                scan.at,
                p.pid_ns,
                shown(c.label(), 120) if c else "",
                c.pod if c else "",
                who.inner_pid,
            )
            out.append(e)
            self.timeline[p.pid].append(e)
        before = {} if new else self.alive[p.pid].fds
        if before is p.fds:  # carried over by the scan: the process did not run, nothing changed
            self.alive[p.pid] = p
            return out
        for fd, f in p.fds.items():
            old = before.get(fd)
            if old is not None and old.key == f.key:
                continue
            if old is not None:
                out.append(self._closed(p.pid, old, scan.at))
            out.append(self._opened(p, f, scan, shares, first=new))
        for fd, old in before.items():
            if fd not in p.fds:
                out.append(self._closed(p.pid, old, scan.at))
        self.alive[p.pid] = p
        return out

    def _opened(
        self, p: ProcessScan, f: OpenFd, scan: Scan, shares: Shares, first: bool
    ) -> FdOpened:
        how = Arrival.PRESENT if first and self.prev is None and self.attached else Arrival.OPENED
        source: FdHolder | None = None
        via = ""
        others = shares.same_as(p.pid, f.fd)
        prev = self.prev.processes if self.prev else {}
        # another process held this open file while this one, read after it, did not: the only
        # observation that proves which way it went (both read in one poll prove nothing)
        # a dup of an open file this process already held is no arrival: kcmp's run holds both fds
        mine = prev.get(p.pid)
        dup = mine is not None and any(
            q == p.pid and qfd != f.fd and qfd in mine.fds
            for q, qfd in shares.runs.get((p.pid, f.fd), ())
        )
        older = [
            o
            for o in others
            if not dup
            and o[0] in prev
            and o[1] in prev[o[0]].fds
            and prev[o[0]].fds[o[1]].key == f.key
            and self._lacked_since(p, self.held_since.get(o), prev)
        ]
        # fork and exec keep the number; inherited only where the parent was seen holding it before
        # this process started: one first seen with its parent's file, made after the fork and
        # sent over SCM_RIGHTS, may well sit at the same number
        parent_same = [o for o in older if o[0] == p.ppid and o[1] == f.fd]
        if first and parent_same and not any(x.pidfd_of == p.ppid for x in p.fds.values()):
            how, source = Arrival.INHERITED, FdHolder(*parent_same[0])
        elif older:
            how, source = Arrival.ARRIVED, FdHolder(*older[0])
        elif others and (self.prev is not None or not self.attached):
            how, source = Arrival.UNKNOWN, FdHolder(*others[0])
            via = UNSEEN_ARRIVAL if first and self.prev is not None else UNSEEN_DIRECTION
        elif others:
            source = FdHolder(*others[0])  # present at attach: the same open file, origin unknown
        elif f.kind in MEMORY_KINDS and f.kind != "gpu" and self.shares is not None:
            had = self.shares.memory_holders.get(f.key, set()) - {p.pid}
            was = sorted(
                q
                for q in had
                if q in prev
                and prev[q].error is None
                and self._lacked_since(p, prev[q].read_end, prev)
            )
            if was:
                how, source = Arrival.ARRIVED, FdHolder(was[0], -1)
                via = (
                    f"the same memory was held by pid {was[0]} before; its fd is closed now, so kcmp "
                    "cannot compare the open files"
                )
            elif had:
                how, source = Arrival.UNKNOWN, FdHolder(min(had), -1)
                via = UNSEEN_DIRECTION + "; the other's fd is closed now"
        if how == Arrival.ARRIVED and source is not None and not via:
            via = self._evidence(p, source.pid, shares)
        e = FdOpened(p.pid, f.fd, f.target, f.kind, how, scan.at, source, via)
        if source is not None:
            self.sources.add((source.pid, source.fd))
        self.open_fds[(p.pid, f.fd)] = e
        self.held_since[(p.pid, f.fd)] = p.read_end
        if how in (Arrival.ARRIVED, Arrival.INHERITED):
            self.received[(p.pid, f.fd)] = e
        elif source is not None:  # present at attach or direction unseen: shared, origin unknown
            self.unsure[(p.pid, f.fd)] = e
        self.timeline[p.pid].append(e)
        return e

    @staticmethod
    def _lacked_since(p: ProcessScan, held: float | None, prev: dict[int, ProcessScan]) -> bool:
        """True when ``p`` was seen without the file after another process was seen holding it (at
        ``held``, seconds since boot, and since): ``p``'s last reading began later, or ``p`` did not
        exist yet then. Anything else (both seen with it first in one poll, or ``p`` read before the
        other) leaves the direction unseen."""
        if held is None:
            return False
        was = prev.get(p.pid)
        if was is not None and was.error is None:
            return was.read_start > held  # seen without it after the other was seen with it
        return was is None and p.started > held + TICK  # started after the other held it

    def _evidence(self, p: ProcessScan, src: int, shares: Shares) -> str:
        pidfds = [f for f in p.fds.values() if f.pidfd_of == src]
        if not pidfds and self.alive.get(p.pid):
            pidfds = [f for f in self.alive[p.pid].fds.values() if f.pidfd_of == src]
        if pidfds:
            return f"pid {p.pid} holds a pidfd of pid {src} (fd {pidfds[0].fd}): pidfd_getfd"
        for pair in shares.pairs:
            ends = {(pair.a.pid, pair.a.fd), (pair.b.pid, pair.b.fd)}
            if {e[0] for e in ends} == {p.pid, src}:
                return f"a Unix {pair.type} socket joins them ({shown(pair.path) if pair.path else 'unnamed'}): SCM_RIGHTS"
        return "no pidfd or Unix socket between them was seen: how it travelled is not visible"

    def _closed(self, pid: int, f: OpenFd, at: float) -> FdClosed:
        self.open_fds.pop((pid, f.fd), None)
        self.received.pop((pid, f.fd), None)
        self.unsure.pop((pid, f.fd), None)
        self.held_since.pop((pid, f.fd), None)
        e = FdClosed(pid, f.fd, f.target, f.kind, at)
        self.timeline[pid].append(e)
        return e

    def _gone(self, pid: int, at: float) -> ProcessGone:
        p = self.alive.pop(pid)
        self.gone.add(pid)
        code, sig = self.returncodes.get(pid, (None, None))
        e = ProcessGone(pid, p.name, at, code, sig)
        self.timeline[pid].append(e)
        mapped = {(m.dev, m.ino) for m in p.maps}
        held = [self.open_fds.pop((pid, fd)) for fd in list(p.fds) if (pid, fd) in self.open_fds]
        for fd in p.fds:
            self.received.pop((pid, fd), None)
            self.unsure.pop((pid, fd), None)
            self.held_since.pop((pid, fd), None)
        #: received fds neither mapped nor closed at the last scan: a mapped one was still in use
        self.at_exit[pid] = [e for e in held if p.fds[e.fd].key not in mapped]
        return e
