"""Who shares what: open file descriptions held by two or more processes, proven by the kernel.

Fds are grouped by (device, inode) first (an exported VMM fd reads ``/dev/nvidiactl`` like every
driver control fd, so the inode alone proves nothing), then each group that spans two processes is
sorted with kcmp(KCMP_FILE) as the comparator: O(n log n) calls, and equal fds (one open file
description) end up next to each other. kcmp refused: the group says "unavailable" with the errno.

Scan after scan only what can have changed is worked out again: the index of holders by inode is
kept (``Index``) and updated for the processes whose fds or mappings were re-read; only the inodes
they touch are grouped, compared (``kcmpsort.update_group``) and described again; the others keep
last scan's answer, which still holds since none of their holders ran.
"""

from __future__ import annotations

import errno
import os
from collections import defaultdict
from dataclasses import dataclass, field

from vmmtui.stream.events import AttachKind, FdHolder, SharedFile, SocketPair
from vmmtui.system.fdtable import KcmpUnavailable
from vmmtui.trace.procfs.kcmpsort import (
    Group,
    Holder,
    runs_of,
    sort_group,
    still_holds,
    update_group,
)
from vmmtui.trace.procfs.scan import MEMORY_KINDS, Mapping, OpenFd, Scan

Key = tuple[int, int]  # (dev, ino)
#: kcmp's answers when an fd was closed (EBADF) or its process exited (ESRCH) after the scan read it
VANISHED = (errno.EBADF, errno.ESRCH)


@dataclass
class Index:
    """Holders by inode as of the last scan, and last scan's answer per inode; handed on scan to scan."""

    fds_of: dict[int, dict[int, OpenFd]] = field(
        default_factory=dict
    )  # pid -> the fds dict indexed
    maps_of: dict[int, list[Mapping]] = field(default_factory=dict)
    holders: dict[Key, dict[Holder, OpenFd]] = field(default_factory=lambda: defaultdict(dict))
    mapped: dict[Key, set[int]] = field(default_factory=lambda: defaultdict(set))
    map_paths: dict[Key, str] = field(default_factory=dict)
    groups: dict[Key, Group] = field(
        default_factory=dict
    )  # kcmp order of inodes held by 2+ processes
    files: dict[Key, list[SharedFile]] = field(default_factory=dict)
    runs: dict[Key, list[list[Holder]]] = field(default_factory=dict)
    retry: set[Key] = field(default_factory=set)  # kcmp refused: ask again next scan

    def sync(self, scan: Scan) -> set[Key]:
        """Bring the index to ``scan``; the inodes whose holders or mappers changed."""
        alive = scan.alive()
        dirty, self.retry = self.retry, set()
        for pid in [
            pid for pid, fds in self.fds_of.items() if pid not in alive or alive[pid].fds is not fds
        ]:
            for fd, f in self.fds_of.pop(pid).items():
                if f.kind != "pidfd":
                    self.holders[f.key].pop((pid, fd), None)
                    dirty.add(f.key)
        for pid in [
            pid
            for pid, maps in self.maps_of.items()
            if pid not in alive or alive[pid].maps is not maps
        ]:
            for m in self.maps_of.pop(pid):
                self.mapped[(m.dev, m.ino)].discard(pid)
                dirty.add((m.dev, m.ino))
        for pid, p in alive.items():
            if pid not in self.fds_of:
                self.fds_of[pid] = p.fds
                for f in p.fds.values():
                    if f.kind != "pidfd":
                        self.holders[f.key][(pid, f.fd)] = f
                        dirty.add(f.key)
            if pid not in self.maps_of:
                self.maps_of[pid] = p.maps
                for m in p.maps:
                    self.mapped[(m.dev, m.ino)].add(pid)
                    self.map_paths.setdefault((m.dev, m.ino), m.path)
                    dirty.add((m.dev, m.ino))
        return dirty


@dataclass
class Shares:
    files: list[SharedFile] = field(default_factory=list)
    pairs: list[SocketPair] = field(default_factory=list)
    #: (pid, fd) -> every (pid, fd) of its open file description (one shared list per description)
    runs: dict[Holder, list[Holder]] = field(default_factory=dict)
    #: (dev, ino) of memory held or mapped -> pids (to tell arrivals where kcmp cannot: the sender closed)
    memory_holders: dict[tuple[int, int], set[int]] = field(default_factory=dict)
    kcmp_calls: int = 0
    unavailable: str | None = None  # kcmp's refusal, with the errno
    vanished: int = 0  # kcmp calls that found an fd or a process gone since the scan (asked again)
    #: groups whose fd numbers named another file by the time kcmp was asked (asked again next poll)
    renumbered: int = 0
    index: Index = field(default_factory=Index)
    inodes_redone: int = 0  # inodes worked out again in this scan (the rest carried over)

    def same_as(self, pid: int, fd: int, limit: int = 8) -> list[Holder]:
        """Up to ``limit`` fds of other processes that are the same open file description as ``pid``'s ``fd``."""
        out: list[Holder] = []
        for h in self.runs.get((pid, fd), ()):
            if h[0] != pid:
                out.append(h)
                if len(out) >= limit:
                    break
        return out


class Renumbered(Exception):
    """An fd number of a group names another file than the scan read: kcmp's answer is not about it."""


def still_named(members: dict[Holder, OpenFd]) -> None:
    """Raises ``Renumbered`` unless every ``(pid, fd)`` of ``members`` still names the file the scan
    read there (one stat each): kcmp compares fd numbers, so its answer counts only while they hold.
    An fd closed or a process gone raises KcmpUnavailable with EBADF, as kcmp itself would."""
    for (pid, fd), f in members.items():
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError as exc:
            raise KcmpUnavailable(errno.EBADF, f"pid {pid} fd {fd}: {exc.strerror}") from None
        same_dev = (
            st.st_mode & 0o170000 == 0o140000 if f.kind == AttachKind.SOCKET else st.st_dev == f.dev
        )
        if st.st_ino != f.ino or not same_dev:
            raise Renumbered


def find_shares(scan: Scan, prev: Shares | None = None) -> Shares:
    """The shared files and socket pairs among the scanned processes.

    ``prev`` (the last scan's answer, whose index this one takes over) spares the work on inodes
    none of whose holders was re-read.
    """
    ix = prev.index if prev is not None else Index()
    shares = Shares(index=ix)
    suspects = {pid for pid, p in scan.processes.items() if p.fresh}
    dirty = ix.sync(scan)
    # groups whose holders did not change but one of whose processes ran: an fd of theirs may have
    # been swapped for another open file of the same inode; kcmp re-proves each run by its neighbours
    for key, g in ix.groups.items() if suspects else ():
        if key in dirty or not any(h[0] in suspects for h in g.order):
            continue
        try:
            if still_holds(g, suspects, shares):
                continue
        except KcmpUnavailable:
            pass  # worked out again below, where a refusal or a vanished fd is told apart
        dirty.add(key)
    shares.inodes_redone = len(dirty)
    if prev is not None and not dirty and not ix.retry:
        # nothing to work out again: last poll's answer, the very same lists (the tracker skips them)
        shares.runs, shares.memory_holders = prev.runs, prev.memory_holders
        shares.files, shares.pairs = prev.files, prev.pairs
        return shares
    if prev is not None:
        shares.runs = dict(prev.runs)
        shares.memory_holders = dict(prev.memory_holders)  # prev's stays as it was: "held before"
    for key in dirty:
        old_runs = ix.runs.pop(key, [])
        for run in old_runs:
            for h in run:
                shares.runs.pop(h, None)
        old_files = ix.files.pop(key, [])
        members = ix.holders.get(key)
        if not members:
            ix.holders.pop(key, None)
        mapped = ix.mapped.get(key) or set()
        if not mapped:
            ix.mapped.pop(key, None)
            ix.map_paths.pop(key, None)
        if not members and not mapped:
            ix.groups.pop(key, None)
            shares.memory_holders.pop(key, None)
            continue
        before = dict(
            zip(map(tuple, old_runs), old_files, strict=False)
        )  # run files come first, in run order
        _redo(key, members or {}, mapped, ix, shares, suspects, scan.at, before)
    shares.files = [f for files in ix.files.values() for f in files]
    _socket_pairs(scan, shares)
    return shares


def _redo(
    key: Key,
    members: dict[Holder, OpenFd],
    mapped: set[int],
    ix: Index,
    shares: Shares,
    suspects: set[int],
    at: float,
    before: dict[tuple, SharedFile],
) -> None:
    """One inode's holders, mappers and shared files, worked out again (``before``: last scan's files
    by run, kept as they were where the run and its mappers are unchanged)."""
    if len(members) == 1 and not mapped:  # held by one fd of one process: nothing shared
        (pid, _), f = next(iter(members.items()))
        ix.groups.pop(key, None)
        if f.kind in MEMORY_KINDS and f.kind != "gpu":
            shares.memory_holders[key] = {pid}
        else:
            shares.memory_holders.pop(key, None)
        return
    pids = {pid for pid, _ in members}
    first = next(iter(members.values()), None)
    kind, target = (first.kind, first.target) if first else (None, "")
    memory = kind in MEMORY_KINDS and kind != AttachKind.GPU
    holders = (pids if memory else set()) | mapped
    if holders:
        shares.memory_holders[key] = holders
    else:
        shares.memory_holders.pop(key, None)
    files: list[SharedFile] = []
    if len(pids) >= 2 and kind is not None:  # two pids: ``first`` is one of their fds
        try:
            still_named(members)
            cached = ix.groups.get(key)
            g = (
                update_group(cached, set(members), suspects, shares)
                if cached
                else sort_group(list(members), shares)
            )
            still_named(members)
        except Renumbered:
            # an fd number read in this poll names another file now: what kcmp compared is not what
            # the scan read, so nothing is said of it; the process ran, so the next poll re-reads it
            shares.renumbered += 1
            ix.groups.pop(key, None)
            ix.retry.add(key)
            ix.files[key] = list(before.values())
            if not ix.files[key]:
                ix.files.pop(key)
            return
        except KcmpUnavailable as exc:
            ix.groups.pop(key, None)
            ix.retry.add(key)
            if (
                exc.errno in VANISHED
            ):  # an fd closed, or its process exited, since the scan read it:
                shares.vanished += 1  # not a refusal; the next poll sees the table without it
                ix.files[key] = [f for f in before.values()]
                if not ix.files[key]:
                    ix.files.pop(key)
                return
            code = errno.errorcode.get(exc.errno or 0, str(exc.errno))
            shares.unavailable = f"unavailable: {code} ({os.strerror(exc.errno or 0)})"
            files.append(
                SharedFile(
                    kind,
                    target,
                    *key,
                    [FdHolder(*h) for h in members],
                    sorted(mapped),
                    None,
                    f"kcmp {shares.unavailable}: same inode only",
                    at,
                )
            )
        else:
            ix.groups[key] = g
            runs = [run for run in runs_of(g) if any(h[0] != run[0][0] for h in run)]
            by = sorted(mapped)
            for run in runs:
                shares.runs.update(dict.fromkeys(run, run))
                was = before.get(tuple(run))
                if was is not None and was.same_description and was.mapped_by == by:
                    files.append(was)
                    continue
                files.append(
                    SharedFile(
                        kind,
                        target,
                        *key,
                        [FdHolder(*h) for h in run],
                        by,
                        True,
                        "one open file description (kcmp)",
                        at,
                    )
                )
            ix.runs[key] = runs
            if not runs and memory:
                files.append(
                    SharedFile(
                        kind,
                        target,
                        *key,
                        [FdHolder(*h) for h in members],
                        sorted(mapped),
                        False,
                        "same inode, different open file descriptions (kcmp)",
                        at,
                    )
                )
    else:
        ix.groups.pop(key, None)
    if (
        not files and len(mapped | pids) >= 2 and mapped
    ):  # mapped by 2+ where at most one still holds an fd
        path = ix.map_paths[key]
        files.append(
            SharedFile(
                AttachKind.MEMFD if path.startswith("/memfd:") else AttachKind.SHM,
                path,
                *key,
                [FdHolder(*h) for h in members],
                sorted(mapped),
                None,
                "mapped by several processes (/proc/PID/maps); no fd left to compare with kcmp",
                at,
            )
        )
    if files:
        ix.files[key] = files


def _socket_pairs(scan: Scan, shares: Shares) -> None:
    by_ino: dict[int, Holder] = {}
    for key, members in shares.index.holders.items():
        if key[0] == 0 and members:  # sockets are indexed as (0, inode)
            first = min(members)
            if members[first].kind == "socket":
                by_ino[key[1]] = first
    done: set[frozenset[int]] = set()
    for ino, (pid, fd) in sorted(by_ino.items(), key=lambda kv: kv[1]):
        s = scan.sockets.sockets.get(ino)
        if s is None or s.peer is None or s.peer not in by_ino:
            continue
        other = by_ino[s.peer]
        if other[0] == pid or frozenset((ino, s.peer)) in done:
            continue
        done.add(frozenset((ino, s.peer)))
        peer = scan.sockets.sockets.get(s.peer)
        shares.pairs.append(
            SocketPair(
                FdHolder(pid, fd),
                FdHolder(*other),
                s.type,
                s.path or (peer.path if peer else ""),
                scan.at,
            )
        )
