"""Each process's fd table as the kernel shows it, and the kernel's word on whether two fds are one file.

Nothing here trusts a worker: entries come from ``/proc/PID/fd`` (psutil confirms the process),
and ``kcmp(KCMP_FILE)`` answers whether two fds in two processes share an open file description.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
from dataclasses import dataclass, field

import psutil

KCMP_FILE = 0
_SYS_KCMP = {"x86_64": 312, "aarch64": 272, "ppc64le": 354, "s390x": 343}
_libc = ctypes.CDLL(None, use_errno=True)


@dataclass(frozen=True)
class FdEntry:
    fd: int
    target: str
    dev: int | None
    ino: int | None


@dataclass
class FdTable:
    """One read of ``/proc/PID/fd``; ``error`` says why it could not be read."""

    pid: int
    entries: dict[int, FdEntry] = field(default_factory=dict)
    error: str | None = None
    status: str = ""

    @classmethod
    def read(cls, pid: int) -> FdTable:
        try:
            proc = psutil.Process(pid)
            status = proc.status()
        except psutil.NoSuchProcess:
            return cls(pid, error=f"process {pid} is gone (it exited)", status="gone")
        except psutil.AccessDenied:
            return cls(
                pid, error=f"process {pid} cannot be read (permission denied)", status="gone"
            )
        except psutil.Error:
            return cls(pid, error=f"process {pid} cannot be read", status="gone")
        if status == psutil.STATUS_ZOMBIE:
            return cls(pid, error=f"process {pid} has exited (zombie)", status=status)
        table = cls(pid, status=status)
        base = f"/proc/{pid}/fd"
        try:
            names = os.listdir(base)
        except OSError as exc:
            table.error = f"cannot read {base}: {exc.strerror}"
            return table
        for name in names:
            fd = int(name)
            try:
                target = os.readlink(f"{base}/{name}")
            except OSError:
                continue  # closed while we looked
            dev: int | None = None
            ino: int | None = None
            try:
                st = os.stat(f"{base}/{name}")
                dev, ino = st.st_dev, st.st_ino
            except OSError:
                pass
            table.entries[fd] = FdEntry(fd, target, dev, ino)
        return table

    def __len__(self) -> int:
        return len(self.entries)


def target_class(target: str) -> str:
    """What an fd is, from its /proc target alone: nvidia, memfd, shm, socket, pipe, pidfd, dmabuf,
    anon or other. The session and attach each name these for their own views; this is the one reading."""
    if target.startswith("/dev/nvidia"):
        return "nvidia"
    if target.startswith("/memfd:"):
        return "memfd"
    if target.startswith("/dev/shm/"):
        return "shm"
    if target.startswith("socket:"):
        return "socket"
    if target.startswith("pipe:"):
        return "pipe"
    if target == "anon_inode:[pidfd]" or target.startswith("pidfd:"):
        return "pidfd"
    if "dmabuf" in target:
        return "dmabuf"
    if target.startswith("anon_inode:"):
        return "anon"
    return "other"


@dataclass
class KcmpResult:
    same: bool | None  # None: the kernel would not say
    detail: str


def kcmp_same_file(pid1: int, fd1: int, pid2: int, fd2: int) -> KcmpResult:
    """Ask the kernel whether ``pid1``'s ``fd1`` and ``pid2``'s ``fd2`` are the same open file description."""
    nr = _SYS_KCMP.get(platform.machine())
    if nr is None:
        return KcmpResult(None, f"unavailable: kcmp syscall number unknown on {platform.machine()}")
    rc = _libc.syscall(nr, pid1, pid2, KCMP_FILE, fd1, fd2)
    if rc == 0:
        return KcmpResult(True, "same open file description")
    if rc > 0:
        return KcmpResult(False, "different open file descriptions")
    err = ctypes.get_errno()
    return KcmpResult(
        None, f"unavailable: kcmp failed with {errno.errorcode.get(err, err)} ({os.strerror(err)})"
    )


class KcmpUnavailable(OSError):
    """kcmp refused or unknown here: callers say "unavailable" with this errno, never guess."""


def kcmp_order(pid1: int, fd1: int, pid2: int, fd2: int) -> int:
    """kcmp(KCMP_FILE) as a comparator: 0 same open file description, -1/1 the kernel's order.

    The kernel orders file pointers (1: less, 2: greater), so it can sort fds and equal ones end up
    next to each other: O(n log n) calls instead of all pairs. Raises KcmpUnavailable on refusal.
    """
    nr = _SYS_KCMP.get(platform.machine())
    if nr is None:
        raise KcmpUnavailable(errno.ENOSYS, f"kcmp syscall number unknown on {platform.machine()}")
    rc = _libc.syscall(nr, pid1, pid2, KCMP_FILE, fd1, fd2)
    if rc < 0:
        err = ctypes.get_errno()
        raise KcmpUnavailable(
            err, f"kcmp failed with {errno.errorcode.get(err, err)} ({os.strerror(err)})"
        )
    return 0 if rc == 0 else (-1 if rc == 1 else 1)
