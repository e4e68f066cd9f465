"""One read of /proc for a set of processes: the fds and mappings that can carry shared memory.

Per process: fds on ``/dev/nvidia*`` (driver fds and exported VMM allocations read alike:
``/dev/nvidiactl``), memfds, ``/dev/shm`` files, dma-bufs, Unix sockets (with the peer from
``sock_diag``), pidfds (with the process they name, from fdinfo), and the ``/dev/shm`` and memfd
mappings of ``/proc/PID/maps``. A process that is gone or unreadable gets an ``error`` and the scan
goes on. Nothing here guesses: what /proc does not say is left empty.

Only what can have changed is read again. A process changes its own fd table and mappings only by
running, so each scan first reads what its threads have run (``/proc/PID/task/*/schedstat``: ns of
CPU time and timeslices); when that is unchanged since the last scan and the process is not running
right now, its fds and mappings are carried over instead of re-read. What this cannot see, and why it
is bounded: another process installing an fd into it (seccomp ``ADDFD``, a ``CLONE_FILES`` sharer that
is not one of its threads), or a thread running without a scheduler tick (``nohz_full``) so its
runtime lags. Every process is therefore read in full every ``REFRESH_POLLS`` scans anyway (5 s at
4 Hz), staggered by pid; where that read finds exactly what was carried (same fds, inodes and
mappings) the process stays carried over, and its kcmp verdicts are not asked again: an fd swapped
for another open file of the same inode while the process itself did not run is the one change
that goes unseen until the process runs. A re-read fd is never trusted by its name: two memfds (or a driver fd and an
exported VMM allocation) read alike, so each fd of a kind attach shows is stat()ed for its inode.
Only those are stat()ed: a stat follows the link to the file, and a file on a hung network mount
would hang the scan (readlink does not touch the file).

A process that ran costs one syscall an fd: an fd number that held a shown kind is stat()ed first
and, with the same inode, keeps its last reading (no readlink); when every fd is kept the scan hands
on the last table itself, so what comes after skips it by identity (kcmp still re-proves its shared
files: the process ran). Its mappings are read again when its virtual size changed, and on the full
read, and whenever it ran while it mapped shared memory: a mapping swapped for another of the
same size is then seen at once.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass, field

from vmmtui.stream.events import AttachKind
from vmmtui.stream.observed import MEMORY_FILES
from vmmtui.system.fdtable import target_class
from vmmtui.trace.procfs.sockets import SocketTable, read_sockets

#: kinds of fd the attach view shows; everything else is counted only
KINDS = tuple(AttachKind)
#: every process is read in full at least once per this many scans, whatever its runtime says
REFRESH_POLLS = 20
#: kinds whose files hold memory (what "sharing" means here; ``stream.observed.MEMORY_FILES``, as
#: the trace weighs a kept fd); sockets are shared too but carry fds
MEMORY_KINDS = tuple(k for k in AttachKind if k in MEMORY_FILES)


#: target class (vmmtui.system.fdtable.target_class) -> the kind attach shows; other classes are counted only
SHOWN = {
    "nvidia": AttachKind.GPU,
    "memfd": AttachKind.MEMFD,
    "shm": AttachKind.SHM,
    "socket": AttachKind.SOCKET,
    "pidfd": AttachKind.PIDFD,
    "dmabuf": AttachKind.DMABUF,
}


def kind_of(target: str) -> AttachKind | None:
    return SHOWN.get(target_class(target))


@dataclass(frozen=True)
class OpenFd:
    fd: int
    target: str
    kind: AttachKind
    dev: int
    ino: int
    pidfd_of: int | None = None  # a pidfd's process (fdinfo "Pid:")
    #: the file's size when this number was first read for it (fstat: a memfd's or /dev/shm
    #: file's bytes after ftruncate; 0 for the driver's and the roads' fds)
    size: int = 0

    @property
    def key(self) -> tuple[int, int]:
        return (self.dev, self.ino)


@dataclass(frozen=True)
class Mapping:
    path: str
    kind: AttachKind  # memfd or shm
    dev: int
    ino: int
    size: int

    @property
    def key(self) -> tuple[int, int]:
        return (self.dev, self.ino)


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
    #: what its threads had run when this scan began (None: the kernel does not say, or running now)
    ran: bytes | None = None
    #: fds and maps read in this scan (False: carried over from the last, as the process did not run)
    fresh: bool = True
    #: "gone" or "no permission: …"; fds then stay empty
    error: str | None = None
    #: its place in the scan's reading order: processes are read one after another, so a process of
    #: lower ``order`` was read (its fds seen) before one of higher order was begun
    order: int = 0
    #: when it started, in seconds since boot (/proc/PID/stat), to tell a process that did not exist yet
    started: float = 0.0
    #: when its reading began and ended, in seconds since boot (CLOCK_BOOTTIME, the clock of
    #: ``started``); what it held was seen between the two (a process carried because it did not run:
    #: confirmed then; one deferred: the times of the read it keeps)
    read_start: float = 0.0
    read_end: float = 0.0
    #: not read in this scan, which had spent its CPU budget: its last reading stands
    deferred: bool = False
    #: its virtual memory size (/proc/PID/stat): unchanged, its mappings are taken as unchanged
    vsize: int = 0
    #: re-read and found to hold the very files of the last read (the scan then keeps the last table)
    same_fds: bool = False

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
    number: int = 0  # scans of this set so far, counting from 0

    def fresh(self) -> int:
        """How many processes had their fds re-read in this scan (the rest did not run since the last)."""
        return sum(1 for p in self.processes.values() if p.error is None and p.fresh)

    def alive(self) -> dict[int, ProcessScan]:
        return {p: s for p, s in self.processes.items() if s.error is None}


def _read(path: str) -> str:
    with open(path, "rb") as f:
        return f.read().decode(errors="replace")


#: /proc/PID/stat's flags: the task is exiting (include/linux/sched.h, PF_EXITING)
PF_EXITING = 0x4


def _exiting(pid: int) -> bool:
    """Whether ``pid`` is gone or on its way out. An exiting process drops its memory map
    (exit_mm) before its files: from then /proc gives its own user EACCES for ``/proc/PID/fd``
    (proc(5): access is governed by a ptrace access mode check, and the owner of a task with no
    mm is root), which is no refusal of permission but an exit under way."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
        rest = raw[raw.rindex(b")") + 2 :].split()
        return rest[0] in (b"Z", b"X") or bool(int(rest[6]) & PF_EXITING)
    except (OSError, ValueError, IndexError):
        return True


def _refusal(exc: OSError, what: str, pid: int = 0) -> str:
    if exc.errno in (errno.ENOENT, errno.ESRCH):
        return "gone"
    if pid and exc.errno in (errno.EACCES, errno.EPERM) and _exiting(pid):
        return "gone"
    return (
        f"no permission: {what}: {errno.errorcode.get(exc.errno or 0, exc.errno)} ({exc.strerror})"
    )


_TICK = os.sysconf("SC_CLK_TCK")


def _stat_line(pid: int) -> tuple[int, str, str, int, float, int]:
    """(ppid, name, state, threads, start in s since boot, virtual size) from /proc/PID/stat; the
    name may hold spaces and parentheses."""
    with open(f"/proc/{pid}/stat", "rb") as f:
        raw = f.read()
    name = raw[raw.index(b"(") + 1 : raw.rindex(b")")].decode(errors="surrogateescape")
    rest = raw[raw.rindex(b")") + 2 :].split()
    return int(rest[1]), name, rest[0].decode(), int(rest[17]), int(rest[19]) / _TICK, int(rest[20])


def _readb(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def _runtime(pid: int, state: str, threads: int) -> bytes | None:
    """What every thread of ``pid`` has run (schedstat: ns, wait, timeslices); None where unknown.

    A thread that is running right now has a runtime that lags until the next tick, so a running
    process (its main thread in R) gets None, as does a kernel without schedstat (``0 0 0``).
    """
    if state == "R":
        return None
    try:
        if threads <= 1:
            sig = _readb(f"/proc/{pid}/schedstat")
        else:
            parts = []
            for tid in sorted(os.listdir(f"/proc/{pid}/task")):
                parts.append(tid.encode())
                parts.append(_readb(f"/proc/{pid}/task/{tid}/schedstat"))
            sig = b" ".join(parts)
    except OSError:
        return None
    return None if sig.startswith(b"0 0 0") else sig


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
        found[key] = Mapping(
            path,
            AttachKind.MEMFD if path.startswith("/memfd:") else AttachKind.SHM,
            key[0],
            key[1],
            (old.size if old else 0) + hi - lo,
        )
    return list(found.values())


def scan_process(
    pid: int, prev: ProcessScan | None = None, refresh: bool = True, defer: bool = False
) -> ProcessScan:
    """One process's fds and mappings; ``error`` when it is gone or not ours to read.

    With ``prev`` (the last scan of this process) and ``refresh`` False, a process whose threads have
    not run since ``prev`` keeps ``prev``'s fds and mappings (``fresh`` False): it cannot have changed
    them itself. Otherwise every fd is read again and every fd of a kind shown is stat()ed, so an fd
    closed and reopened onto another file of the same name is seen.
    """
    p = ProcessScan(pid)
    try:
        p.ppid, p.name, state, threads, p.started, p.vsize = _stat_line(pid)
    except OSError as exc:
        p.error = _refusal(exc, f"/proc/{pid}/stat", pid)
        return p
    except (ValueError, IndexError):
        p.error = "gone"
        return p
    if state in ("Z", "X"):
        p.error = "gone"
        return p
    p.ran = _runtime(pid, state, threads)
    if defer and prev is not None and prev.error is None:
        # over this poll's budget: what was read last time stands, as of when it was read (its read
        # times are kept), and the process is read first at the next poll (its runtime is kept too)
        p.uid, p.pid_ns, p.cmdline, p.ran = prev.uid, prev.pid_ns, prev.cmdline, prev.ran
        p.fds, p.other_fds, p.maps, p.maps_error = (
            prev.fds,
            prev.other_fds,
            prev.maps,
            prev.maps_error,
        )
        p.read_start, p.read_end, p.fresh, p.deferred = prev.read_start, prev.read_end, False, True
        return p
    if (
        prev is not None
        and not refresh
        and prev.error is None
        and p.ran is not None
        and p.ran == prev.ran
    ):
        p.uid, p.pid_ns, p.cmdline = prev.uid, prev.pid_ns, prev.cmdline
        p.fds, p.other_fds, p.maps, p.maps_error, p.fresh = (
            prev.fds,
            prev.other_fds,
            prev.maps,
            prev.maps_error,
            False,
        )
        return p
    if prev is not None and prev.error is None and not refresh and prev.name == p.name:
        # the same program as at the last read (an exec renames it): owner, command line and PID
        # namespace are read again only on a full read
        p.uid, p.pid_ns, p.cmdline = prev.uid, prev.pid_ns, prev.cmdline
    else:
        try:
            p.uid = os.stat(f"/proc/{pid}").st_uid
        except OSError as exc:
            p.error = _refusal(exc, f"/proc/{pid}", pid)
            return p
        try:
            p.cmdline = _read(f"/proc/{pid}/cmdline").replace("\0", " ").strip()
            p.pid_ns = os.stat(f"/proc/{pid}/ns/pid").st_ino
        except OSError:
            pass
    base = f"/proc/{pid}/fd"
    try:
        dirfd = os.open(base, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as exc:
        p.error = _refusal(exc, base, pid)
        return p
    try:
        _read_fds(p, dirfd, prev.fds if prev is not None and prev.error is None else {})
    except OSError as exc:
        p.error = _refusal(exc, base, pid)
        return p
    finally:
        os.close(dirfd)
    if (
        prev is not None
        and prev.error is None
        and not refresh
        and prev.maps_error is None
        and prev.vsize == p.vsize
        and p.same_fds
        and not prev.maps
    ):
        # mapping or unmapping changes the virtual size, so a process that ran and maps no shared
        # memory keeps its last reading; one that maps some is read again whenever it ran: a
        # swap of one mapping for another of the same size (a queue's consumer that maps each
        # piece it receives, closes the fd and unmaps the one before) leaves the size and the fd
        # table as they were
        p.maps = prev.maps
        return p
    try:
        p.maps = _maps(pid)
    except OSError as exc:
        p.maps_error = _refusal(exc, f"/proc/{pid}/maps", pid)
        if p.maps_error == "gone":  # it exited while read: what it held is over
            p.error, p.maps_error, p.fds = "gone", None, {}
    return p


def _read_fds(p: ProcessScan, dirfd: int, before: dict[int, OpenFd]) -> None:
    """Every fd of ``p``, relative to its /proc/PID/fd.

    An fd number that held a kind shown at the last read is stat()ed first: the same (dev, ino) is
    the same file (a memfd's name is fixed, a socket's inode is its name), so the last reading is
    kept without a readlink. Anything else (new numbers, other kinds, a changed file) is read with
    readlink, and stat()ed only when of a kind shown: readlink does not touch the file, so a file
    on a hung network mount cannot hang the scan unless its fd number held a memfd, socket or GPU
    fd a poll ago."""
    readlink, stat, fds, other, reused = os.readlink, os.stat, p.fds, 0, 0
    for name in os.listdir(dirfd):
        fd = int(name)
        old = before.get(fd)
        if old is not None and old.kind != "pidfd":
            try:
                st = stat(name, dir_fd=dirfd)
            except OSError:
                continue  # closed while we looked
            if st.st_ino == old.ino and (
                st.st_dev == old.dev if old.kind != "socket" else st.st_mode & 0o170000 == 0o140000
            ):
                fds[fd] = old
                reused += 1
                continue
        try:
            target = readlink(name, dir_fd=dirfd)
        except OSError:
            continue  # closed while we looked
        kind = kind_of(target)
        if kind is None:
            other += 1
            continue
        if kind == "socket":
            fds[fd] = OpenFd(fd, target, kind, 0, int(target[8:-1]))
            continue
        try:
            st = stat(name, dir_fd=dirfd)
        except OSError:
            continue
        pidfd_of = None
        if kind == "pidfd":
            if (
                old is not None
                and old.kind == "pidfd"
                and old.key == (st.st_dev, st.st_ino)
                and st.st_ino > 1
            ):
                pidfd_of = old.pidfd_of  # pidfs gives each process its own inode: the same process
            else:
                pidfd_of = _pidfd_target(p.pid, fd)
        size = st.st_size if kind in ("memfd", "shm", "dmabuf") else 0
        fds[fd] = OpenFd(fd, target, kind, st.st_dev, st.st_ino, pidfd_of, size)
    p.other_fds = other
    p.same_fds = reused == len(fds) == len(before)


def _pidfd_target(pid: int, fd: int) -> int | None:
    try:
        for line in _read(f"/proc/{pid}/fdinfo/{fd}").splitlines():
            if line.startswith("Pid:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return None


def scan(
    pids: list[int] | set[int],
    t0: float | None = None,
    prev: Scan | None = None,
    refresh_polls: int = REFRESH_POLLS,
    budget: float | None = None,
) -> Scan:
    """One scan of ``pids`` and of this network namespace's Unix sockets; ``at`` counts from ``t0``.

    With ``prev``, processes that did not run since are carried over (see the module's docstring);
    each is read in full once per ``refresh_polls`` scans, staggered by pid (1: every scan, no carrying).
    With ``budget`` (seconds of this thread's CPU time), processes are taken stalest first and, once
    the budget is spent, those seen before are *deferred*: their last reading stands, marked as such,
    and they come first in the next scan. Every process is still looked at (gone, running or not).
    """
    start = time.monotonic()
    before = prev.processes if prev else {}
    number = prev.number + 1 if prev else 0
    procs = {}
    cpu0 = time.thread_time()
    # those put off last time come first, the longest unread first; then by pid (a parent before
    # the children it starts)
    first = sorted(
        (q for q in pids if q in before and before[q].deferred),
        key=lambda q: (before[q].read_end, q),
    )
    read_one = False  # at least one process is read, however small the budget: each gets its turn
    for order, pid in enumerate(first + sorted(set(pids).difference(first))):
        over = budget is not None and read_one and time.thread_time() - cpu0 > budget
        begun = time.clock_gettime(time.CLOCK_BOOTTIME)
        p = scan_process(pid, before.get(pid), (number + pid) % max(refresh_polls, 1) == 0, over)
        p.order = order
        if not p.deferred:
            p.read_start, p.read_end = begun, time.clock_gettime(time.CLOCK_BOOTTIME)
            read_one = read_one or (p.fresh and p.error is None)
        procs[pid] = p
    procs = dict(sorted(procs.items()))
    sockets = read_sockets()
    if sockets.sockets:
        for p in (
            procs.values()
        ):  # a socket fd that is not a Unix socket (TCP, netlink) is not ours to show
            if not p.fresh:
                continue  # filtered when it was read
            for fd in [
                fd for fd, f in p.fds.items() if f.kind == "socket" and f.ino not in sockets.sockets
            ]:
                del p.fds[fd]
                p.other_fds += 1
    for pid, p in procs.items():  # a refresh that found what was carried: carried, for what follows
        old = before.get(pid)
        if (
            refresh_polls > 1
            and p.fresh
            and p.error is None
            and old is not None
            and old.error is None
            and p.ran is not None
            and p.ran == old.ran
            and p.fds == old.fds
            and p.maps == old.maps
            and p.other_fds == old.other_fds
        ):
            p.fds, p.maps, p.fresh = old.fds, old.maps, False
        elif (
            p.fresh
            and p.error is None
            and old is not None
            and old.error is None
            and p.same_fds
            and old.fds.keys() == p.fds.keys()
            and p.other_fds == old.other_fds
        ):
            # it ran, but its table holds the very files of the last read: keep the last table (the
            # index and the lifecycle skip it by identity); still fresh, so kcmp re-proves its shares
            p.fds = old.fds
            if p.maps == old.maps:
                p.maps = old.maps
    end = time.monotonic()
    return Scan(end - (t0 if t0 is not None else start), procs, sockets, end - start, number)


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
