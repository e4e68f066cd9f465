"""CPU memory shared between processes with memfd: the same steps as the CUDA path, on real pages.

This is the CPU analogue of XPMEM's make/get/attach (seed 002): memfd_create + ftruncate make the
allocation, an anonymous PROT_NONE mapping reserves a range, mmap(MAP_FIXED|MAP_SHARED) maps the
fd onto it, mprotect grants access. The memfd travels with SCM_RIGHTS exactly like a CUDA fd.
It is not GPU memory and is labelled so wherever it is shown.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import functools
import mmap
import os
import stat

import numpy as np

from vmmtui.backends.base import Backend, DeviceInfo, SizeCheck
from vmmtui.backends.labels import LABELS
from vmmtui.backends.pattern import CHUNK, pattern, verify_chunks
from vmmtui.stream.failures import StepError, failure
from vmmtui.stream.names import shown
from vmmtui.stream.values import Verification

_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [
    ctypes.c_void_p,
    ctypes.c_size_t,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_int,
    ctypes.c_long,
]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_libc.free.argtypes = [ctypes.c_void_p]
_libc.free.restype = None
MAP_FAILED = ctypes.c_void_p(-1).value
PROT_NONE, PROT_READ, PROT_WRITE = 0, 1, 2
MAP_FIXED = 0x10
MAP_NORESERVE = getattr(mmap, "MAP_NORESERVE", 0x4000)

#: what the producer seals before export and the consumer requires: the size can no longer change
#: (a shrink under a mapping makes every access past the new end SIGBUS), nor can seals be added
SIZE_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW
SEALS = SIZE_SEALS | fcntl.F_SEAL_SEAL
SEAL_NAMES = {
    fcntl.F_SEAL_SEAL: "F_SEAL_SEAL",
    fcntl.F_SEAL_SHRINK: "F_SEAL_SHRINK",
    fcntl.F_SEAL_GROW: "F_SEAL_GROW",
    fcntl.F_SEAL_WRITE: "F_SEAL_WRITE",
    getattr(fcntl, "F_SEAL_FUTURE_WRITE", 0x10): "F_SEAL_FUTURE_WRITE",
}


#: what an fd that is not a memfd is, by its file type (fstat)
FILE_KINDS = (
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISFIFO, "a pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISREG, "a regular file"),
)


def not_memfd(fd: int) -> str | None:
    """What the fd is when it is not a memfd (``a pipe (pipe:[123])``), as the kernel says; None
    for a memfd. Its name is the sender's to choose: shown through the one sanitiser."""
    try:
        mode = os.fstat(fd).st_mode
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError as exc:
        return f"an fd the kernel does not describe ({exc.strerror})"
    if stat.S_ISREG(mode) and target.startswith("/memfd:"):
        return None
    kind = next((name for test, name in FILE_KINDS if test(mode)), "a special file")
    return f"{kind} ({shown(target, 80)})"


def seal_names(seals: int) -> str:
    """``F_SEAL_SHRINK|F_SEAL_GROW`` for a seal mask (``none`` for 0)."""
    return "|".join(name for bit, name in sorted(SEAL_NAMES.items()) if seals & bit) or "none"


LABEL = LABELS["memfd"]


def _oserror(call: str) -> StepError:
    err = ctypes.get_errno()
    return StepError(failure(errno.errorcode.get(err, "OSERROR"), call, os.strerror(err)))


def _hex(v: int) -> str:
    return f"0x{v:x}"


class MemfdBackend(Backend):
    name = "memfd"
    label = LABEL
    title = "memfd (CPU memory, not GPU)"
    export_note = "dup of the memfd"

    def init(self, device: int) -> DeviceInfo:
        self.page = self.calls.timed(
            "sysconf", {"name": "SC_PAGESIZE"}, lambda: os.sysconf("SC_PAGESIZE")
        )
        # no VMM on the CPU (vmm False); the memfd is an fd from the start (posix_fd True)
        self.info = DeviceInfo(
            self.name, self.label, device, "CPU memory (memfd)", False, True, self.page, self.page
        )
        return self.info

    def query(self) -> DeviceInfo:
        return self.info

    def create(self, size: int, shareable: bool = True) -> int:
        fd = self.calls.timed(
            "memfd_create",
            {"name": "vmmtui-alloc", "flags": "MFD_CLOEXEC|MFD_ALLOW_SEALING"},
            lambda: os.memfd_create("vmmtui-alloc", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING),
        )
        try:
            self.calls.timed(
                "ftruncate",
                {"fd": fd, "length": size},
                lambda: os.ftruncate(fd, size),
                lambda _: "0",
            )
        except OSError as exc:
            os.close(fd)
            raise StepError(
                failure(errno.errorcode.get(exc.errno or 0, "OSERROR"), "ftruncate", str(exc))
            ) from exc
        return fd

    def _mmap(
        self, call: str, addr: int | None, size: int, prot: int, flags: int, fd: int, args: dict
    ) -> int:
        va = self.calls.timed(
            call,
            args,
            lambda: _libc.mmap(addr, size, prot, flags, fd, 0),
            lambda v: "MAP_FAILED" if v in (None, MAP_FAILED) else _hex(v),
        )
        if va in (None, MAP_FAILED):
            raise _oserror("mmap")
        return va

    def reserve(self, size: int, alignment: int) -> int:
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE
        return self._mmap(
            "mmap",
            None,
            size,
            PROT_NONE,
            flags,
            -1,
            {
                "addr": "NULL",
                "length": size,
                "prot": "PROT_NONE",
                "flags": "MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE",
                "fd": -1,
            },
        )

    def map(self, va: int, size: int, handle: int) -> None:
        self._mmap(
            "mmap",
            va,
            size,
            PROT_NONE,
            mmap.MAP_SHARED | MAP_FIXED,
            handle,
            {
                "addr": _hex(va),
                "length": size,
                "prot": "PROT_NONE",
                "flags": "MAP_SHARED|MAP_FIXED",
                "fd": handle,
            },
        )

    def set_access(self, va: int, size: int) -> None:
        rc = self.calls.timed(
            "mprotect",
            {"addr": _hex(va), "length": size, "prot": "PROT_READ|PROT_WRITE"},
            lambda: _libc.mprotect(va, size, PROT_READ | PROT_WRITE),
            str,
        )
        if rc != 0:
            raise _oserror("mprotect")

    def _view(self, va: int, size: int) -> np.ndarray:
        return np.ctypeslib.as_array((ctypes.c_uint32 * (size // 4)).from_address(va))

    def fill(self, va: int, size: int, on: str = "host", first: int = 0) -> int:
        count = size // 4

        def write() -> int:
            view = self._view(va, size)
            for start in range(0, count, CHUNK):
                n = min(CHUNK, count - start)
                view[start : start + n] = pattern(first + start, n)
            return count

        return self.calls.timed("store pattern", {"addr": _hex(va), "integers": count}, write, str)

    def clear(self, va: int, size: int) -> None:
        self.calls.timed(
            "memset",
            {"addr": _hex(va), "c": 0, "n": size},
            lambda: ctypes.memset(va, 0, size),
            lambda _: "done",
        )

    def export_fd(self, handle: int) -> int:
        """Seal the size (then the seals) so that no one can shrink the memfd under a consumer's mapping; dup it."""
        try:
            for seals in (SIZE_SEALS, fcntl.F_SEAL_SEAL):
                self.calls.timed(
                    "fcntl",
                    {"fd": handle, "cmd": "F_ADD_SEALS", "seals": seal_names(seals)},
                    functools.partial(fcntl.fcntl, handle, fcntl.F_ADD_SEALS, seals),
                    lambda _: "0",
                )
        except OSError as exc:
            raise StepError(
                failure(
                    errno.errorcode.get(exc.errno or 0, "OSERROR"), "fcntl(F_ADD_SEALS)", str(exc)
                )
            ) from exc
        return self.calls.timed("dup", {"fd": handle}, lambda: os.dup(handle), str)

    def check_size(self, fd: int, handle: int, claimed: int) -> SizeCheck:
        """The kernel's word on the memfd that arrived: its seals (F_GET_SEALS) and its size (fstat).

        Sealed against shrinking, a memfd at least ``claimed`` bytes long can be mapped without SIGBUS."""
        try:
            seals = self.calls.timed(
                "fcntl",
                {"fd": fd, "cmd": "F_GET_SEALS"},
                lambda: fcntl.fcntl(fd, fcntl.F_GET_SEALS),
                seal_names,
            )
        except OSError:  # EINVAL: not a memfd, or another file that cannot carry seals
            seals = 0
        size = self.calls.timed(
            "fstat", {"fd": fd}, lambda: os.fstat(fd).st_size, lambda n: f"st_size={n}"
        )
        check = SizeCheck(claimed, size, "kernel fstat", seal_names(seals), granularity=self.page)
        missing = SEALS & ~seals
        other = not_memfd(fd)
        if other:
            check.refuse(
                "NOT_MEMFD", f"the fd that arrived is {other}, not a memfd: not shared memory"
            )
        elif missing:
            check.refuse(
                "UNSEALED",
                f"the memfd carries {seal_names(seals)}, lacks {seal_names(missing)}: its owner "
                "could shrink it under our mapping",
            )
        elif claimed <= 0 or size < claimed:
            check.refuse(
                "SIZE_MISMATCH", f"claimed {claimed} bytes, the kernel reports {size} (fstat)"
            )
        return check

    def import_fd(self, fd: int) -> int:
        return self.calls.timed("dup", {"fd": fd}, lambda: os.dup(fd), str)

    def verify(self, va: int, size: int, on: str = "host") -> Verification:
        count = size // 4

        def check() -> Verification:
            view = self._view(va, size)
            return verify_chunks(count, lambda start, n: view[start : start + n])

        return self.calls.timed(
            "compare pattern",
            {"addr": _hex(va), "integers": count},
            check,
            lambda v: "PASSED" if v.passed else f"FAILED ({v.mismatches} differ)",
        )

    def unmap(self, va: int, size: int) -> None:
        # Put the PROT_NONE reservation back over the range, as cuMemUnmap leaves the VA reserved.
        flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED
        self._mmap(
            "mmap",
            va,
            size,
            PROT_NONE,
            flags,
            -1,
            {
                "addr": _hex(va),
                "length": size,
                "prot": "PROT_NONE",
                "flags": "MAP_PRIVATE|MAP_ANONYMOUS|MAP_NORESERVE|MAP_FIXED",
                "fd": -1,
            },
        )

    def free_range(self, va: int, size: int) -> None:
        rc = self.calls.timed(
            "munmap", {"addr": _hex(va), "length": size}, lambda: _libc.munmap(va, size), str
        )
        if rc != 0:
            raise _oserror("munmap")

    def release(self, handle: int) -> None:
        self.calls.timed("close", {"fd": handle}, lambda: os.close(handle), lambda _: "0")

    def wrong_release(self, va: int) -> str:
        # libc free() on a page that malloc never handed out: glibc aborts or the read of the
        # chunk header faults. Said before the call, because the process may not live to report it.
        print(f"wrong release: calling free(0x{va:x}) on the mmap'd memfd pages", flush=True)
        _libc.free(va)
        return "returned"

    def handle_fd(self, handle: int) -> int | None:
        return handle
