"""One read of /proc for a set of processes: the fds and mappings that can carry shared memory.

Per process: fds on ``/dev/nvidia*`` (driver fds and exported VMM allocations read alike:
``/dev/nvidiactl``), memfds, ``/dev/shm`` files, dma-bufs, Unix sockets (with the peer from
``sock_diag``), pidfds (with the process they name, from fdinfo), and the ``/dev/shm`` and memfd
mappings of ``/proc/PID/maps``. A process that is gone or unreadable gets an ``error`` and the scan
goes on. Nothing here guesses: what /proc does not say is left empty.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass, field

from vmmtui.attach.sockets import SocketTable, read_sockets

#: kinds of fd the attach view shows; everything else is counted only
KINDS = ("gpu", "memfd", "shm", "dmabuf", "socket", "pidfd")
#: kinds whose files hold memory (what "sharing" means here); sockets are shared too but carry fds
MEMORY_KINDS = ("gpu", "memfd", "shm", "dmabuf")


def kind_of(target: str) -> str | None:
    if target.startswith("/dev/nvidia"):
        return "gpu"
    if target.startswith("/memfd:"):
        return "memfd"
    if target.startswith("/dev/shm/"):
        return "shm"
    if target.startswith("socket:["):
        return "socket"
    if target == "anon_inode:[pidfd]" or target.startswith("pidfd:"):
        return "pidfd"
    if "dmabuf" in target:
        return "dmabuf"
    return None


@dataclass(frozen=True)
class OpenFd:
    fd: int
    target: str
    kind: str
    dev: int
    ino: int
    pidfd_of: int | None = None  # a pidfd's process (fdinfo "Pid:")

    @property
    def key(self) -> tuple[int, int]:
        return (self.dev, self.ino)


@dataclass(frozen=True)
class Mapping:
    path: str
    kind: str  # memfd | shm
    dev: int
    ino: int
    size: int


@dataclass
class ProcessScan:
    pid: int
    ppid: int = 0
    name: str = ""
    uid: int | None = None
    pid_ns: int | None = None
    fds: dict[int, OpenFd] = field(default_factory=dict)
    other_fds: int = 0
    maps: list[Mapping] = field(default_factory=list)
    cmdline: str = ""
    maps_error: str | None = None  # /proc/PID/maps refused: mappings unknown, fds still shown
    #: "gone" or "no permission: …"; fds then stay empty
    error: str | None = None

    @property
    def gone(self) -> bool:
        return self.error == "gone"

    def holds_memory(self) -> bool:
        return bool(self.maps) or any(f.kind in MEMORY_KINDS for f in self.fds.values())


@dataclass
class Scan:
    at: float
    processes: dict[int, ProcessScan]
    sockets: SocketTable
    seconds: float = 0.0  # how long the scan took

    def alive(self) -> dict[int, ProcessScan]:
        return {p: s for p, s in self.processes.items() if s.error is None}


def _read(path: str) -> str:
    with open(path, "rb") as f:
        return f.read().decode(errors="replace")


def _refusal(exc: OSError, what: str) -> str:
    if exc.errno in (errno.ENOENT, errno.ESRCH):
        return "gone"
    return f"no permission: {what}: {errno.errorcode.get(exc.errno or 0, exc.errno)} ({exc.strerror})"


def _stat_line(pid: int) -> tuple[int, str, str]:
    """(ppid, name, state) from /proc/PID/stat; the name may hold spaces and parentheses."""
    text = _read(f"/proc/{pid}/stat")
    name = text[text.index("(") + 1:text.rindex(")")]
    rest = text[text.rindex(")") + 2:].split()
    return int(rest[1]), name, rest[0]


def _maps(pid: int) -> list[Mapping]:
    found: dict[tuple[int, int], Mapping] = {}
    for line in _read(f"/proc/{pid}/maps").splitlines():
        if "/memfd:" not in line and "/dev/shm/" not in line:
            continue
        parts = line.split(None, 5)
        if len(parts) < 6:
            continue
        lo, hi = (int(x, 16) for x in parts[0].split("-"))
        major, minor = (int(x, 16) for x in parts[3].split(":"))
        key = (os.makedev(major, minor), int(parts[4]))
        path = parts[5]
        old = found.get(key)
        found[key] = Mapping(path, "memfd" if path.startswith("/memfd:") else "shm", key[0], key[1],
                             (old.size if old else 0) + hi - lo)
    return list(found.values())


def scan_process(pid: int, known: dict[int, OpenFd] | None = None) -> ProcessScan:
    """One process's fds and mappings; ``error`` when it is gone or not ours to read.

    ``known`` (the last scan's fds of this process) spares the stat of an fd whose number and target
    did not change: an fd closed and reopened onto a file of the same name between two scans reads
    as unchanged (it would be missed anyway when it happens within one scan interval).
    """
    p = ProcessScan(pid)
    try:
        p.ppid, p.name, state = _stat_line(pid)
        st = os.stat(f"/proc/{pid}")
        p.uid = st.st_uid
    except OSError as exc:
        p.error = _refusal(exc, f"/proc/{pid}/stat")
        return p
    except (ValueError, IndexError):
        p.error = "gone"
        return p
    if state in ("Z", "X"):
        p.error = "gone"
        return p
    try:
        p.cmdline = _read(f"/proc/{pid}/cmdline").replace("\0", " ").strip()
        p.pid_ns = os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        pass
    base = f"/proc/{pid}/fd"
    try:
        names = os.listdir(base)
    except OSError as exc:
        p.error = _refusal(exc, base)
        return p
    for name in names:
        try:
            target = os.readlink(f"{base}/{name}")
        except OSError:
            continue  # closed while we looked
        kind = kind_of(target)
        if kind is None:
            p.other_fds += 1
            continue
        fd = int(name)
        old = known.get(fd) if known else None
        if old is not None and old.target == target:
            p.fds[fd] = old
            continue
        if kind == "socket":
            p.fds[fd] = OpenFd(fd, target, kind, 0, int(target[8:-1]))
            continue
        try:
            st = os.stat(f"{base}/{name}")
        except OSError:
            continue
        pidfd_of = None
        if kind == "pidfd":
            try:
                for line in _read(f"/proc/{pid}/fdinfo/{fd}").splitlines():
                    if line.startswith("Pid:"):
                        pidfd_of = int(line.split()[1])
            except (OSError, ValueError):
                pass
        p.fds[fd] = OpenFd(fd, target, kind, st.st_dev, st.st_ino, pidfd_of)
    try:
        p.maps = _maps(pid)
    except OSError as exc:
        p.maps_error = _refusal(exc, f"/proc/{pid}/maps")
    return p


def scan(pids: list[int] | set[int], t0: float | None = None, prev: Scan | None = None) -> Scan:
    """One scan of ``pids`` and of this network namespace's Unix sockets; ``at`` counts from ``t0``."""
    start = time.monotonic()
    before = prev.processes if prev else {}
    procs = {pid: scan_process(pid, before[pid].fds if pid in before else None) for pid in sorted(pids)}
    sockets = read_sockets()
    for p in procs.values():  # a socket fd that is not a Unix socket (TCP, netlink) is not ours to show
        for fd in [fd for fd, f in p.fds.items() if f.kind == "socket" and f.ino not in sockets.sockets]:
            if sockets.sockets:
                del p.fds[fd]
                p.other_fds += 1
    end = time.monotonic()
    return Scan(end - (t0 if t0 is not None else start), procs, sockets, end - start)


def children(pid: int) -> list[int]:
    """The children of ``pid`` (every thread's), from /proc/PID/task/*/children."""
    out: list[int] = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for t in tasks:
        try:
            out += [int(c) for c in _read(f"/proc/{pid}/task/{t}/children").split()]
        except OSError:
            continue
    return out


def all_pids() -> list[int]:
    return sorted(int(n) for n in os.listdir("/proc") if n.isdigit())


def holders_of_memory(uid: int | None) -> list[int]:
    """Every process (of ``uid``, or all when None) that holds a GPU fd, a memfd, a dma-buf or a shm mapping."""
    me = os.getpid()
    found = []
    for pid in all_pids():
        if pid == me:
            continue
        if uid is not None:
            try:
                if os.stat(f"/proc/{pid}").st_uid != uid:
                    continue
            except OSError:
                continue
        p = scan_process(pid)
        if p.error is None and p.holds_memory():
            found.append(pid)
    return found
