"""Leaks and zombies: memory kept by a process after the processes it shared with are gone, and
files in /dev/shm or socket files whose owners are dead.

Checked after every scan (``during``), when a process exits (``at_exit``) and on demand
(``leftover_files``). Each leak is its facts (the holder, the fd and its target, the peers that
exited, how its origin was seen); ``vmmtui/words/leaks.py`` words it where it is drawn, and says
where /proc cannot tell (a GPU fd's mapping is invisible).
"""

from __future__ import annotations

import contextlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from vmmtui.stream.events import FdOpened, GpuMemory, Leak, LeakKind, ProcessGone
from vmmtui.trace.procfs.lifecycle import Tracker
from vmmtui.trace.procfs.mappings import TEARDOWN_WINDOW_S
from vmmtui.trace.procfs.scan import MEMORY_KINDS

TORCH_SHM = re.compile(r"^torch_(\d+)_")
SOCKET_DIRS = ("/tmp",)


@dataclass
class Followed:
    """What the followed processes were seen with, for the files left at the end: their pids
    and the (dev, ino) of every /dev/shm file one of them held or mapped at a poll."""

    pids: set[int] = field(default_factory=set)
    files: set[tuple[int, int]] = field(default_factory=set)
    #: /dev/shm files made during the run that no followed process was seen to hold
    strangers: list[str] = field(default_factory=list)


@dataclass
class LeakFinder:
    said: set[tuple] = field(default_factory=set)
    #: (pid, fd, target) -> the poll (s) that first found it kept after every peer was gone: said
    #: only once the hold outlasts one teardown window, with its start and now (ns), so the
    #: policy weighs it by how long it lasted (a shutdown's order is no orphan)
    kept_since: dict[tuple, float] = field(default_factory=dict)
    #: the holds ever found kept after their peers: one that comes back waits its own window
    was_kept: set[tuple] = field(default_factory=set)

    def _once(self, key: tuple, leak: Leak) -> list[Leak]:
        if key in self.said:
            return []
        self.said.add(key)
        return [leak]

    def during(self, t: Tracker, gpu: dict[int, GpuMemory] | None, at: float) -> list[Leak]:
        """fds and NVML memory held by a live process whose peers are all gone."""
        out: list[Leak] = []
        kept = list(_kept(t, t.received, ("arrived", "inherited")))
        # a hold no longer kept (closed, mapped again, its holder gone) starts again if it comes back
        now = {(pid, fd, e.target) for (pid, fd), e, _ in kept}
        self.kept_since = {k: v for k, v in self.kept_since.items() if k in now}
        for (pid, fd), e, peers in kept:
            # only fds that came from another process: its own allocation is not leaked by its
            # peers' exit
            # polling sees what is open at each poll, never the close between two: possible
            key = (pid, fd, e.target)
            if key not in self.kept_since:
                # the hold began when its last peer was found gone (the poll that found it,
                # ``ProcessGone.at``), not at this poll: a poll that ran late (another user's
                # /proc, a loaded machine) must not shorten the hold it measures; one that
                # comes back (closed, mapped again) waits from now
                ended = None if key in self.was_kept else _last_gone(t, peers)
                self.kept_since[key] = min(at, ended) if ended is not None else at
                self.was_kept.add(key)
            first = self.kept_since[key]
            if at - first < TEARDOWN_WINDOW_S:
                continue  # inside the teardown window: a shutdown's order, not yet an orphan
            p = t.alive[pid].fds.get(fd)
            leak = _fd_leak(
                LeakKind.POSSIBLE_FD_AFTER_PEER, t, pid, fd, e, at, peers=_names(t, peers),
                peer=e.source.pid if e.source else None, size=p.size if p is not None else 0,
                since=max(1, int(first * 1e9)), ktime=int(at * 1e9),
            )  # fmt: skip
            out += self._once(("fd", pid, fd, e.target), leak)
        out += self._possible(t, at)
        for pid, g in (gpu or {}).items():
            peers = {
                e.source.pid
                for e in t.timeline.get(pid, [])
                if isinstance(e, FdOpened)
                and e.kind == "gpu"
                and e.how == "arrived"
                and e.source is not None
            }
            if pid in t.alive and g.used and peers and peers <= t.gone:
                total = sum(g.used.values())
                out += self._once(
                    ("gpu", pid),
                    Leak(
                        LeakKind.GPU_MEMORY_AFTER_PEER,
                        pid=pid,
                        at=at,
                        name=t.names.get(pid, "?"),
                        peers=_names(t, peers),
                        mib=total >> 20,
                    ),  # fmt: skip
                )
        return out

    def _possible(self, t: Tracker, at: float) -> list[Leak]:
        """The same check for shared fds whose origin polling did not see (open before attach, or
        made and sent within one poll): said as possible leaks, since the holder may have made it."""
        out: list[Leak] = []
        for (pid, fd), e, peers in _kept(t, t.unsure, None):
            if e.kind == "gpu":
                continue
            kind = LeakKind.POSSIBLE_FD_AFTER_PEER
            leak = _fd_leak(kind, t, pid, fd, e, at, peers=_names(t, peers))
            out += self._once(("possible", pid, fd, e.target), leak)
        return out

    def at_exit(self, t: Tracker, pid: int, at: float) -> list[Leak]:
        """Received fds a process never closed: the exit closed them."""
        out: list[Leak] = []
        for e in t.at_exit.get(pid, []):
            if ("possible", pid, e.fd, e.target) in self.said:
                leak = _fd_leak(LeakKind.POSSIBLE_HELD_UNTIL_EXIT, t, pid, e.fd, e, at)
                out += self._once(("possible-exit", pid, e.fd, e.target), leak)
            if (
                e.how == "opened"
                and e.kind in MEMORY_KINDS
                and e.kind != "gpu"
                and (pid, e.fd) not in t.sources  # polling saw it go from here: the origin's own
            ):
                # polling sees an fd appear, not the call that put it there: a memfd or a
                # /dev/shm file that arrived after the trace began and was still open at the end
                # may have been received (its sender closed its own copy between two polls, so
                # kcmp had nothing to match) -- said as possible, never cleared as fine
                kind = LeakKind.POSSIBLE_HELD_UNTIL_EXIT
                leak = _fd_leak(kind, t, pid, e.fd, e, at, appeared=e.at)
                out += self._once(("possible-exit", pid, e.fd, e.target), leak)
            if e.how == "arrived" and e.kind in MEMORY_KINDS:
                source = e.source.pid if e.source else None
                # its exit closed it, unless a close came after the last read: possible
                leak = _fd_leak(
                    LeakKind.POSSIBLE_HELD_UNTIL_EXIT, t, pid, e.fd, e, at, appeared=e.at,
                    source=source, peer=source,
                    source_name=t.names.get(source, "?") if source is not None else "",
                )  # fmt: skip
                out += self._once(("possible-exit", pid, e.fd, e.target), leak)
        return out


def _last_gone(t: Tracker, peers: set[int]) -> float | None:
    """When the last of ``peers`` was found gone (its ``ProcessGone``), None where one was not."""
    ends = []
    for pid in peers:
        gone = [e.at for e in t.timeline.get(pid, ()) if isinstance(e, ProcessGone)]
        if not gone:
            return None
        ends.append(gone[-1])
    return max(ends, default=None)


def _kept(
    t: Tracker, fds: dict[tuple[int, int], FdOpened], how: tuple[str, ...] | None
) -> Iterator[tuple[tuple[int, int], FdOpened, set[int]]]:
    """The memory fds of ``fds`` (came ``how``, when given) that a live process keeps, no longer
    mapped, after every process it shared them with exited: each with those peers. A memory's
    peers are the processes seen holding or mapping that file (``Tracker.holders``) and where it
    came from; any process it shared a file with (a socket its launcher held for a moment) is
    the fallback where the file's holders were not seen."""
    live = _with_live_peer(t)
    for (pid, fd), e in list(fds.items()):
        if e.kind not in MEMORY_KINDS or pid not in t.alive:
            continue
        if how is not None and e.how not in how:
            continue
        p = t.alive[pid]
        f = p.fds.get(fd)
        source = {e.source.pid} if e.source else set()
        holders = t.holders.get(f.key, set()) - {pid} if f is not None else set()
        if holders:
            peers = holders | source
        elif pid in live:
            continue
        else:
            peers = t.peers.get(pid, set()) | source
        if not peers or not peers <= t.gone:
            continue
        if f is not None and any((m.dev, m.ino) == f.key for m in p.maps):
            continue  # still mapped: in use, not leaked
        yield (pid, fd), e, peers


def _fd_leak(
    kind: LeakKind, t: Tracker, pid: int, fd: int, e: FdOpened, at: float, **facts: Any
) -> Leak:
    """The leak of ``pid``'s ``fd`` (which ``e`` opened), with its holder's name and its facts."""
    return Leak(
        kind, pid=pid, at=at, memory=e.kind, name=t.names.get(pid, "?"), fd=fd, target=e.target,
        how=e.how, **facts,
    )  # fmt: skip


def _names(t: Tracker, pids: set[int]) -> dict[int, str]:
    """Each pid with its name as polling last saw it ("?": never seen)."""
    return {q: t.names.get(q, "?") for q in sorted(pids)}


def _with_live_peer(t: Tracker) -> set[int]:
    """Processes one of whose peers still runs: none of their fds is kept after every peer exited
    (checked once a process, not once an fd)."""
    return {pid for pid in t.alive if t.peers.get(pid, set()) - t.gone}


def _owner_alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


def leftover_files(
    created_after: float | None = None,
    bound_paths: set[str] | None = None,
    live_paths: set[str] | None = None,
    at: float = 0.0,
    seen: Followed | None = None,
) -> list[Leak]:
    """/dev/shm files of dead owners (torch_<pid>_*, or created during a watch and held by no one)
    and socket files no live socket is bound to.

    ``seen``: what the followed processes were seen to hold (a watch, a trace of pids): a file is
    theirs only when a poll saw one of them hold or map it, and a ``torch_<pid>_`` file only
    when its pid was one of them. /dev/shm is the whole machine's: a file another program made
    meanwhile is not the followed command's finding (shm_overview(7): any process may
    shm_open a name), so it is counted in ``seen.strangers`` and said as such, never a leak."""
    out: list[Leak] = []
    try:
        shm = os.scandir("/dev/shm")
    except OSError:
        shm = None
    held = _held_shm() if shm is not None else set()
    for entry in shm or []:
        m = TORCH_SHM.match(entry.name)
        try:
            st = entry.stat()
        except OSError:
            continue
        if m and not _owner_alive(int(m.group(1))):
            owner = int(m.group(1))
            if seen is not None and owner not in seen.pids:
                continue  # a dead process's file, never one of those followed
            out.append(Leak(LeakKind.SHM_FILE, pid=owner, at=at, target=entry.path, how="torch"))
        elif (
            created_after is not None
            and st.st_mtime >= created_after
            and (st.st_dev, st.st_ino) not in held
        ):
            if seen is not None and (st.st_dev, st.st_ino) not in seen.files:
                seen.strangers.append(entry.path)  # made meanwhile, never seen held by them
                continue
            out.append(Leak(LeakKind.SHM_FILE, at=at, target=entry.path, how="watched"))
    live = live_paths or set()
    candidates = set(bound_paths or ())
    for d in SOCKET_DIRS:
        with contextlib.suppress(OSError):
            candidates |= {
                e.path
                for e in os.scandir(d)
                if e.name.startswith(("nccl-socket", "nvshmem-socket"))
            }
    for path in sorted(candidates):
        try:
            is_sock = stat.S_ISSOCK(os.lstat(path).st_mode)
        except OSError:
            continue
        if is_sock and path not in live:
            out.append(Leak(LeakKind.SOCKET_FILE, at=at, target=path))
    return out


def _held_shm() -> set[tuple[int, int]]:
    """(dev, ino) of every /dev/shm file some readable process has open or mapped."""
    from vmmtui.trace.procfs.scan import all_pids, scan_process

    held: set[tuple[int, int]] = set()
    for pid in all_pids():
        p = scan_process(pid)
        held |= {f.key for f in p.fds.values() if f.kind == "shm"} | {
            (m.dev, m.ino) for m in p.maps if m.kind == "shm"
        }
    return held
