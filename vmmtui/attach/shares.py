"""Who shares what: open file descriptions held by two or more processes, proven by the kernel.

Fds are grouped by (device, inode) first (an exported VMM fd reads ``/dev/nvidiactl`` like every
driver control fd, so the inode alone proves nothing), then each group that spans two processes is
sorted with kcmp(KCMP_FILE) as the comparator: O(n log n) calls, and equal fds (one open file
description) end up next to each other. kcmp refused: the group says "unavailable" with the errno.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from functools import cmp_to_key

from vmmtui.attach.scan import MEMORY_KINDS, OpenFd, Scan
from vmmtui.events import FdHolder, SharedFile, SocketPair
from vmmtui.fdtable import KcmpUnavailable, kcmp_order

Holder = tuple[int, int]  # (pid, fd)


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

    def same_as(self, pid: int, fd: int, limit: int = 8) -> list[Holder]:
        """Up to ``limit`` fds of other processes that are the same open file description as ``pid``'s ``fd``."""
        out: list[Holder] = []
        for h in self.runs.get((pid, fd), ()):
            if h[0] != pid:
                out.append(h)
                if len(out) >= limit:
                    break
        return out


def _runs(members: list[tuple[int, OpenFd]], shares: Shares) -> list[list[tuple[int, OpenFd]]]:
    """``members`` sorted by the kernel's order on open file descriptions, cut into runs of equal ones."""
    seen: dict[tuple[Holder, Holder], int] = {}

    def cmp(x: tuple[int, OpenFd], y: tuple[int, OpenFd]) -> int:
        shares.kcmp_calls += 1
        r = kcmp_order(x[0], x[1].fd, y[0], y[1].fd)
        seen[((x[0], x[1].fd), (y[0], y[1].fd))] = r
        return r

    ordered = sorted(members, key=cmp_to_key(cmp))
    runs = [[ordered[0]]]
    for prev, cur in zip(ordered, ordered[1:], strict=False):
        a, b = (prev[0], prev[1].fd), (cur[0], cur[1].fd)
        if (a, b) in seen:
            r = seen[(a, b)]
        elif (b, a) in seen:
            r = -seen[(b, a)]
        else:
            r = cmp(prev, cur)
        if r == 0:
            runs[-1].append(cur)
        else:
            runs.append([cur])
    return runs


def find_shares(scan: Scan) -> Shares:
    """The shared files and socket pairs among the scanned processes."""
    shares = Shares()
    groups: dict[tuple[int, int], list[tuple[int, OpenFd]]] = defaultdict(list)
    mapped: dict[tuple[int, int], set[int]] = defaultdict(set)
    targets: dict[tuple[int, int], str] = {}
    for pid, p in scan.alive().items():
        for f in p.fds.values():
            if f.kind != "pidfd":
                groups[f.key].append((pid, f))
        for m in p.maps:
            mapped[(m.dev, m.ino)].add(pid)
            targets.setdefault((m.dev, m.ino), m.path)
    for key, members in groups.items():
        pids = {pid for pid, _ in members}
        kind, target = members[0][1].kind, members[0][1].target
        if kind in MEMORY_KINDS and kind != "gpu":
            shares.memory_holders[key] = pids | mapped.get(key, set())
        if len(pids) < 2:
            continue
        try:
            runs = _runs(members, shares)
        except KcmpUnavailable as exc:
            shares.unavailable = f"unavailable: {exc.strerror}"
            shares.files.append(SharedFile(kind, target, *key, [FdHolder(p, f.fd) for p, f in members],
                                           sorted(mapped.get(key, ())), None, f"kcmp {shares.unavailable}", scan.at))
            continue
        proven = False
        for run in runs:
            if len({pid for pid, _ in run}) < 2:
                continue
            proven = True
            holders = [(pid, f.fd) for pid, f in run]
            for h in holders:
                shares.runs[h] = holders
            shares.files.append(SharedFile(kind, target, *key, [FdHolder(*h) for h in holders],
                                           sorted(mapped.get(key, ())), True,
                                           "kcmp(KCMP_FILE): one open file description", scan.at))
        if not proven and kind in MEMORY_KINDS and kind != "gpu":
            shares.files.append(SharedFile(kind, target, *key, [FdHolder(p, f.fd) for p, f in members],
                                           sorted(mapped.get(key, ())), False,
                                           "same inode, different open file descriptions (kcmp)", scan.at))
    for key, pids in mapped.items():  # memory mapped by 2+ processes where at most one still holds an fd
        holders = {pid for pid, _ in groups.get(key, [])}
        shares.memory_holders.setdefault(key, set()).update(pids)
        if len(pids | holders) >= 2 and not any((f.dev, f.ino) == key for f in shares.files):
            path = targets[key]
            shares.files.append(SharedFile("memfd" if path.startswith("/memfd:") else "shm", path, *key,
                                           [FdHolder(p, f.fd) for p, f in groups.get(key, [])], sorted(pids),
                                           None, "mapped by several processes (/proc/PID/maps); no fd left to "
                                           "compare with kcmp", scan.at))
    _socket_pairs(scan, shares)
    return shares


def _socket_pairs(scan: Scan, shares: Shares) -> None:
    by_ino: dict[int, Holder] = {}
    for pid, p in scan.alive().items():
        for f in p.fds.values():
            if f.kind == "socket":
                by_ino.setdefault(f.ino, (pid, f.fd))
    done: set[frozenset[int]] = set()
    for ino, (pid, fd) in by_ino.items():
        s = scan.sockets.sockets.get(ino)
        if s is None or s.peer is None or s.peer not in by_ino:
            continue
        other = by_ino[s.peer]
        if other[0] == pid or frozenset((ino, s.peer)) in done:
            continue
        done.add(frozenset((ino, s.peer)))
        peer = scan.sockets.sockets.get(s.peer)
        shares.pairs.append(SocketPair(FdHolder(pid, fd), FdHolder(*other), s.type,
                                       s.path or (peer.path if peer else ""), scan.at))
