"""The ring buffer's records (``struct event`` of trace.bpf.c) as typed trace events.

Kernel pointers never leave this module: a ``struct file *`` becomes a keyed hash (``FileNames``:
a fresh random key per trace), enough to match a send to its receive and useless to anyone
reading a recording. Bytes from the traced processes (comm, memfd and socket names) are decoded
as text here and shown only through ``vmmtui.names.shown`` by the renderers.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import struct

from vmmtui.trace.cuda import FUNCS, base_name
from vmmtui.trace.events import (
    CudaCall,
    FdCloseCall,
    FdDuplicated,
    FdsReceived,
    FdsSent,
    FdTaken,
    MemfdCreated,
    PidfdOpened,
    ProcessExec,
    ProcessExit,
    ProcessForked,
    SocketEnd,
    TraceCall,
)

MAXFDS = 16
SEND, RECV, PIDFD_OPEN, PIDFD_GETFD, CLOSE, CLOSE_RANGE, DUP, MEMFD = range(1, 9)
FORK, EXEC, EXIT, CUDA = range(9, 13)
DUP_CALLS = {32: "dup", 33: "dup2", 292: "dup3", 72: "fcntl"}
FAMILIES = {1: "unix", 2: "inet", 10: "inet6", 16: "netlink"}


class Record(ctypes.Structure):
    """struct event of trace.bpf.c (for tests that make records; ``LAYOUT`` decodes them)."""

    _fields_ = [
        ("type", ctypes.c_uint32),
        ("tgid", ctypes.c_uint32),
        ("tid", ctypes.c_uint32),
        ("nfds", ctypes.c_uint32),
        ("ktime", ctypes.c_uint64),
        ("ret", ctypes.c_int64),
        ("arg", ctypes.c_uint64 * 6),
        ("fds", ctypes.c_int32 * MAXFDS),
        ("files", ctypes.c_uint64 * MAXFDS),
        ("sock_ino", ctypes.c_uint64),
        ("peer_ino", ctypes.c_uint64),
        ("family", ctypes.c_uint32),
        ("namelen", ctypes.c_uint32),
        ("dur", ctypes.c_uint64),
        ("comm", ctypes.c_char * 16),
        ("name", ctypes.c_uint8 * 128),
    ]


#: struct event, unpacked in one call (ctypes field by field costs five times more per record)
LAYOUT = struct.Struct("<IIIIQq6Q16i16QQQIIQ16s128s")


HEAD = struct.Struct("<IIIIQq6Q")  # type … arg[6]: every record needs these
FDS = struct.Struct(f"<{MAXFDS}i")
FILES = struct.Struct(f"<{MAXFDS}Q")
SOCK = struct.Struct("<QQII")  # sock_ino, peer_ino, family, namelen
DUR = struct.Struct("<Q")
_OFF = {"fds": 80, "files": 144, "sock": 272, "dur": 296, "comm": 304, "name": 320}


class Raw:
    """One record's fields, as ``Record`` names them: the head unpacked at once, the rest (fds,
    files, socket, comm, name) only when a kind of record reads them (most read two or three)."""

    __slots__ = ("raw", "type", "tgid", "tid", "nfds", "ktime", "ret", "arg")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        v = HEAD.unpack_from(raw)
        self.type, self.tgid, self.tid, self.nfds, self.ktime, self.ret = v[:6]
        self.arg = v[6:12]

    @property
    def fds(self) -> tuple[int, ...]:
        return FDS.unpack_from(self.raw, _OFF["fds"])

    @property
    def files(self) -> tuple[int, ...]:
        return FILES.unpack_from(self.raw, _OFF["files"])

    @property
    def file0(self) -> int:
        return DUR.unpack_from(self.raw, _OFF["files"])[0]

    @property
    def sock_ino(self) -> int:
        return SOCK.unpack_from(self.raw, _OFF["sock"])[0]

    @property
    def peer_ino(self) -> int:
        return SOCK.unpack_from(self.raw, _OFF["sock"])[1]

    @property
    def family(self) -> int:
        return SOCK.unpack_from(self.raw, _OFF["sock"])[2]

    @property
    def namelen(self) -> int:
        return SOCK.unpack_from(self.raw, _OFF["sock"])[3]

    @property
    def dur(self) -> int:
        return DUR.unpack_from(self.raw, _OFF["dur"])[0]

    @property
    def comm(self) -> bytes:
        return self.raw[_OFF["comm"] : _OFF["comm"] + 16]

    @property
    def name(self) -> bytes:
        return self.raw[_OFF["name"] : _OFF["name"] + 128]


class FileNames:
    """A kernel file pointer → a short keyed hash, stable for one trace."""

    #: names kept (an open file is named by each of its records: create, send, receive, closes)
    KEEP = 65536

    def __init__(self, key: bytes | None = None) -> None:
        self.key = key or os.urandom(16)
        self._known: dict[int, str] = {}

    def __call__(self, ptr: int) -> str:
        if not ptr:
            return ""
        name = self._known.get(ptr)
        if name is None:
            if len(self._known) >= self.KEEP:
                self._known.clear()
            name = hashlib.blake2b(
                ptr.to_bytes(8, "little"), key=self.key, digest_size=6
            ).hexdigest()
            self._known[ptr] = name
        return name


def _text(raw: bytes) -> str:
    return raw.split(b"\0", 1)[0].decode("utf-8", "surrogateescape")


def _socket(r: Raw) -> SocketEnd:
    ino, peer, fam, namelen = SOCK.unpack_from(r.raw, _OFF["sock"])
    family = FAMILIES.get(fam, f"family {fam}")
    name = ""
    if fam == 1 and namelen > 2:
        path = r.name[2 : min(namelen, 110)]
        if path[:1] == b"\0":
            name = "@" + path[1:].decode("utf-8", "surrogateescape")
        else:
            name = _text(path)
    return SocketEnd(ino, peer, name, family)


def _s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


def decode(raw: bytes, files: FileNames) -> TraceCall | None:
    """One record as its event (None for a record of a kind this vmmtui does not know). The
    common kinds first, each reading only its own fields: this runs once per record."""
    if len(raw) < LAYOUT.size:
        return None
    r = Raw(raw)
    kind, pid, tid, t = r.type, r.tgid, r.tid, r.ktime
    if kind == CLOSE:
        return FdCloseCall(pid, tid, t, _s32(r.arg[0]), files(r.file0), r.ret)
    if kind in (SEND, RECV):
        n = min(r.nfds, MAXFDS)
        fds = list(r.fds[:n])
        names = [files(f) for f in r.files[:n]]
        many = r.arg[5] in (299, 307)
        if kind == SEND:
            call = "sendmmsg" if many else "sendmsg"
            return FdsSent(pid, tid, t, call, _socket(r), fds, names, r.ret)
        call = "recvmmsg" if many else "recvmsg"
        return FdsReceived(pid, tid, t, call, _socket(r), fds, names, r.ret)
    if kind == MEMFD:
        return MemfdCreated(pid, tid, t, _text(r.name), r.ret, files(r.file0))
    if kind == DUP:
        call = DUP_CALLS.get(r.arg[5], "dup")
        return FdDuplicated(pid, tid, t, call, _s32(r.arg[0]), r.ret, files(r.file0))
    if kind == CUDA:
        return _cuda(r, pid, tid, t)
    if kind == PIDFD_OPEN:
        return PidfdOpened(pid, tid, t, _s32(r.arg[0]), r.ret)
    if kind == PIDFD_GETFD:
        target = int(r.arg[4]) if r.ret != -9 else 0  # EBADF: the pidfd was no pidfd
        return FdTaken(pid, tid, t, _s32(r.arg[0]), target, _s32(r.arg[1]), r.ret, files(r.file0))
    if kind == CLOSE_RANGE:
        return FdCloseCall(
            pid, tid, t, _s32(r.arg[0]), "", r.ret, min(r.arg[1], 2**31 - 1), "close_range"
        )
    if kind == FORK:
        return ProcessForked(pid, tid, t, int(r.arg[0]), _text(r.comm))
    if kind == EXEC:
        return ProcessExec(pid, tid, t, _text(r.name), _text(r.comm))
    if kind == EXIT:
        return ProcessExit(pid, tid, t, r.ret, _text(r.comm))
    return None


def _cuda(r: Raw, pid: int, tid: int, t: int) -> CudaCall | None:
    if r.nfds >= len(FUNCS):
        return None
    func = FUNCS[r.nfds]
    f = base_name(func)
    a, res = r.arg, _s32(r.ret)
    out = r.files[0] if res == 0 else 0
    entry, after = r.name[:64], r.name[64:128]
    c: dict[str, int | str] = {}  # the fields this call fills; the event is built once (frozen)
    if f == "cuMemCreate":
        _, types, _, dev = struct.unpack_from("IIii", entry)
        c.update(handle=out, size=a[1], handle_types=types, device=dev, flags=a[3])
    elif f == "cuMemExportToShareableHandle":
        c.update(handle=a[1], handle_types=a[2], flags=a[3])
        if res == 0 and a[2] == 1:
            c["fd"] = struct.unpack_from("i", after)[0]
        elif res == 0 and a[2] == 8:
            c["ipc"] = after.hex()
    elif f == "cuMemImportFromShareableHandle":
        c.update(handle=out, handle_types=a[2])
        if a[2] == 1:
            c["fd"] = _s32(a[1])
    elif f == "cuMemMap":
        c.update(ptr=a[0], size=a[1], handle=a[3], flags=a[4])
    elif f == "cuMemUnmap":
        c.update(ptr=a[0], size=a[1])
    elif f == "cuMemSetAccess":
        _, dev, flags = struct.unpack_from("iiI", entry)
        c.update(ptr=a[0], size=a[1], device=dev, flags=flags)
    elif f == "cuMemRelease":
        c["handle"] = a[0]
    elif f == "cuIpcGetMemHandle":
        c["ptr"] = a[1]
        c["ipc"] = after.hex() if res == 0 else ""
    elif f == "cuIpcOpenMemHandle":
        c.update(ptr=out, ipc=entry.hex(), flags=a[1])
    elif f in ("cuIpcCloseMemHandle", "cuMemFree"):
        c["ptr"] = a[0]
    elif f == "cuMemAlloc":
        c.update(ptr=out, size=a[1])
    # pools: ``handle`` is the CUmemoryPool, ``ipc`` the 64 bytes of CUmemPoolPtrExportData
    elif f == "cuMemPoolCreate":
        _, types, _, dev = struct.unpack_from("IIii", entry)
        c.update(handle=out, handle_types=types, device=dev)
    elif f == "cuMemAllocFromPoolAsync":
        c.update(ptr=out, size=a[1], handle=a[2])
    elif f == "cuMemPoolExportToShareableHandle":
        c.update(handle=a[1], handle_types=a[2], flags=a[3])
        if res == 0 and a[2] == 1:
            c["fd"] = struct.unpack_from("i", after)[0]
    elif f == "cuMemPoolImportFromShareableHandle":
        c.update(handle=out, handle_types=a[2], flags=a[3])
        if a[2] == 1:
            c["fd"] = _s32(a[1])
    elif f == "cuMemPoolExportPointer":
        c["ptr"] = a[1]
        c["ipc"] = after.hex() if res == 0 else ""
    elif f == "cuMemPoolImportPointer":
        c.update(ptr=out, handle=a[1], ipc=entry.hex())
    elif f == "cuMemFreeAsync":
        c["ptr"] = a[0]
    elif f == "cuMemPoolDestroy":
        c["handle"] = a[0]
    return CudaCall(pid, tid, t, func, res, duration_ns=r.dur, **c)  # type: ignore[arg-type]
