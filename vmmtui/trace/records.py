"""The ring buffer's records (the ``struct rec*`` of trace.bpf.c) as typed trace events.

Kernel pointers never leave this module: a ``struct file *`` becomes a keyed hash (``FileNames``:
a fresh random key per trace), enough to match a send to its receive and useless to anyone
reading a recording. Bytes from the traced processes (comm, memfd and socket names) are decoded
as text here and shown only through ``vmmtui.words.names.shown`` by the renderers.
"""

from __future__ import annotations

import hashlib
import os
import struct
from dataclasses import dataclass

from vmmtui.stream.observed import (
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
    ProcessFacts,
    ProcessForked,
    QueuedAtRelease,
    SocketEnd,
    TraceCall,
    base_name,
)
from vmmtui.trace.cuda import FUNCS

MAXFDS = 16
SEND, RECV, PIDFD_OPEN, PIDFD_GETFD, CLOSE, CLOSE_RANGE, DUP, MEMFD = range(1, 9)
FORK, EXEC, EXIT, CUDA, FDS, QUEUED, REFUSAL = range(9, 16)
DUP_CALLS = {32: "dup", 33: "dup2", 292: "dup3", 72: "fcntl"}
FAMILIES = {1: "unix", 2: "inet", 10: "inet6", 16: "netlink"}

#: struct rec of trace.bpf.c, the head of every record: type, tgid, tid, nfds, ktime, ret,
#: arg[3], file (64 bytes)
HEAD = struct.Struct("<IIIIQq3QQ")
#: struct rec_named: comm, name
NAMED = struct.Struct("<16s128s")
#: struct rec_msg: sock_ino, peer_ino, family, namelen, the socket's sockaddr_un, fds, files
MSG = struct.Struct(f"<QQII112s{MAXFDS}i{MAXFDS}Q")
#: struct rec_fds (EV_FDS, EV_QUEUED): fds, files
FDLIST = struct.Struct(f"<{MAXFDS}i{MAXFDS}Q")
#: struct rec_cuda: args[5], dur, name
CUDAREC = struct.Struct("<5QQ128s")
#: struct side (of struct rec_refusal: caller, then target): pid, uid, euid, suid, gid, egid,
#: sgid, userns, pidns, seccomp, filters, dumpable, cap_eff, cap_prm, comm
SIDE = struct.Struct("<9I3i2Q16s")
SIZES = {
    REFUSAL: HEAD.size + 2 * SIDE.size,
    SEND: HEAD.size + MSG.size,
    RECV: HEAD.size + MSG.size,
    FDS: HEAD.size + FDLIST.size,
    QUEUED: HEAD.size + FDLIST.size,
    MEMFD: HEAD.size + NAMED.size,
    FORK: HEAD.size + NAMED.size,
    EXEC: HEAD.size + NAMED.size,
    EXIT: HEAD.size + NAMED.size,
    CUDA: HEAD.size + CUDAREC.size,
}


class Raw:
    """One record's head, unpacked at once; the tail of its kind (``tail``) read on demand."""

    __slots__ = ("raw", "type", "tgid", "tid", "nfds", "ktime", "ret", "arg", "file")

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        v = HEAD.unpack_from(raw)
        self.type, self.tgid, self.tid, self.nfds, self.ktime, self.ret = v[:6]
        self.arg = v[6:9]
        self.file = v[9]

    def tail(self, layout: struct.Struct) -> tuple:
        return layout.unpack_from(self.raw, HEAD.size)


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


def _socket(ino: int, peer: int, fam: int, namelen: int, addr: bytes) -> SocketEnd:
    family = FAMILIES.get(fam, f"family {fam}")
    name = ""
    if fam == 1 and namelen > 2:
        path = addr[2 : min(namelen, 110)]
        if path[:1] == b"\0":
            name = "@" + path[1:].decode("utf-8", "surrogateescape")
        else:
            name = _text(path)
    return SocketEnd(ino, peer, name, family)


def _s32(v: int) -> int:
    v &= 0xFFFFFFFF
    return v - (1 << 32) if v & 0x80000000 else v


@dataclass
class _Message:
    """A message's fds gathered from its head record and its EV_FDS continuations."""

    kind: int
    pid: int
    tid: int
    ktime: int
    call: str
    sock: SocketEnd
    result: int
    total: int
    fds: list[int]
    files: list[str]

    def event(self) -> TraceCall:
        missing = max(self.total - len(self.fds), 0)
        if self.kind == SEND:
            return FdsSent(
                self.pid, self.tid, self.ktime, self.call, self.sock, self.fds, self.files,
                self.result, fds_not_read=missing,
            )  # fmt: skip
        return FdsReceived(
            self.pid, self.tid, self.ktime, self.call, self.sock, self.fds, self.files,
            self.result, fds_not_read=missing,
        )  # fmt: skip


@dataclass
class _Queued:
    pid: int
    tid: int
    ktime: int
    sock: int
    total: int
    files: list[str]

    def event(self) -> TraceCall:
        return QueuedAtRelease(
            self.pid, self.tid, self.ktime, self.sock, tuple(self.files), self.total
        )


class Decoder:
    """The records as typed events, in ring order. A message with more than 16 fds comes as its
    head record and continuation records (EV_FDS, same thread and time): its event is made when
    every fd has come, or, with ``fds_not_read`` counting the rest, when that thread's next record
    or the end of the trace shows that no more will."""

    def __init__(self, files: FileNames) -> None:
        self.files = files
        self.pending: dict[int, _Message | _Queued] = {}
        #: a refused pidfd_getfd's facts (EV_REFUSAL, just before its call's record), by thread:
        #: (importer, exporter or None), taken by whoever explains the refusal
        self.refusals: dict[int, tuple[ProcessFacts, ProcessFacts | None]] = {}

    def __call__(self, raw: bytes) -> list[TraceCall]:
        if len(raw) < HEAD.size:
            return []
        r = Raw(raw)
        if len(raw) < SIZES.get(r.type, HEAD.size):
            return []
        p = self.pending.get(r.tid)
        if r.type == FDS:
            if isinstance(p, _Message) and p.ktime == r.ktime and r.arg[0] == len(p.fds):
                return self._extend(r, p)
            return []  # its head was lost (counted as lost)
        if r.type == QUEUED and r.arg[2] > 0:
            if isinstance(p, _Queued) and p.sock == r.arg[0] and p.total == r.arg[1]:
                return self._extend(r, p)
            return []
        out = [self.pending.pop(r.tid).event()] if p is not None else []
        if r.type == REFUSAL:
            caller = _side(r.raw, HEAD.size, "importer")
            target = _side(r.raw, HEAD.size + SIDE.size, "exporter")
            if caller is not None:
                self.refusals[r.tid] = (caller, target)
            return out
        if r.type in (SEND, RECV):
            ino, peer, fam, namelen, addr, *rest = r.tail(MSG)
            n = min(r.nfds, MAXFDS)
            nr, total = r.arg[2], int(r.arg[1])
            many = nr in (299, 307)
            call = (
                ("sendmmsg" if many else "sendmsg")
                if r.type == SEND
                else "recvmmsg"
                if many
                else "recvmsg"
            )
            m = _Message(
                r.type, r.tgid, r.tid, r.ktime, call, _socket(ino, peer, fam, namelen, addr),
                r.ret, total, list(rest[:n]), [self.files(f) for f in rest[MAXFDS : MAXFDS + n]],
            )  # fmt: skip
            return self._hold(m, out)
        if r.type == QUEUED:
            q = _Queued(r.tgid, r.tid, r.ktime, int(r.arg[0]), int(r.arg[1]), [])
            return self._extend(r, q, out)
        e = decode(r, self.files)
        if e is not None:
            out.append(e)
        return out

    def batch(self, records: list[bytes]) -> list[TraceCall]:
        """The events of ``records``, in their order: the one-record calls decoded here, inline
        (the most of a trace), the messages and continuations through ``__call__``."""
        out: list[TraceCall] = []
        pending, files, head, unpack = self.pending, self.files, HEAD.size, HEAD.unpack_from
        for raw in records:
            if len(raw) < head:
                continue
            kind, tgid, tid, nfds, ktime, ret, a0, a1, a2, file = unpack(raw)
            if kind == CLOSE and tid not in pending:
                out.append(FdCloseCall(tgid, tid, ktime, _s32(a0), files(file), ret))
            elif kind == MEMFD and tid not in pending and len(raw) >= SIZES[MEMFD]:
                name = NAMED.unpack_from(raw, head)[1]
                out.append(MemfdCreated(tgid, tid, ktime, _text(name), ret, files(file)))
            else:
                out += self(raw)
        return out

    def _hold(self, m: _Message | _Queued, out: list[TraceCall]) -> list[TraceCall]:
        have = len(m.fds) if isinstance(m, _Message) else len(m.files)
        if have >= m.total:
            out.append(m.event())
        else:
            self.pending[m.tid] = m
        return out

    def _extend(self, r: Raw, m: _Message | _Queued, out: list[TraceCall] | None = None):
        self.pending.pop(m.tid, None)
        vals = r.tail(FDLIST)
        n = min(r.nfds, MAXFDS)
        if isinstance(m, _Message):
            m.fds.extend(vals[:n])
        m.files.extend(self.files(f) for f in vals[MAXFDS : MAXFDS + n])
        return self._hold(m, out if out is not None else [])

    def flush(self) -> list[TraceCall]:
        """The messages still waiting for fds that will not come (the end of the trace)."""
        out = [m.event() for m in self.pending.values()]
        self.pending.clear()
        return out


def _side(raw: bytes, at: int, role: str) -> ProcessFacts | None:
    """One ``struct side`` (None: the kernel found no such process)."""
    pid, uid, euid, suid, gid, egid, sgid, userns, pidns, sec, filters, dumpable, eff, prm, comm = (
        SIDE.unpack_from(raw, at)
    )
    if pid == 0:
        return None
    return ProcessFacts(
        pid, role, _text(comm), uid, euid, suid, gid, egid, sgid, eff, prm, userns, pidns, sec,
        filters, dumpable,
    )  # fmt: skip


def decode(r: Raw, files: FileNames) -> TraceCall | None:
    """A one-record call as its event (None for a kind this vmmtui does not know). The common
    kinds first, each reading only its own fields: this runs once per record."""
    kind, pid, tid, t = r.type, r.tgid, r.tid, r.ktime
    if kind == CLOSE:
        return FdCloseCall(pid, tid, t, _s32(r.arg[0]), files(r.file), r.ret)
    if kind == MEMFD:
        name = r.tail(NAMED)[1]
        return MemfdCreated(pid, tid, t, _text(name), r.ret, files(r.file))
    if kind == DUP:
        call = DUP_CALLS.get(r.arg[2], "dup")
        return FdDuplicated(pid, tid, t, call, _s32(r.arg[0]), r.ret, files(r.file))
    if kind == CUDA:
        return _cuda(r, pid, tid, t)
    if kind == PIDFD_OPEN:
        return PidfdOpened(pid, tid, t, _s32(r.arg[0]), r.ret)
    if kind == PIDFD_GETFD:
        target = int(r.arg[2]) if r.ret != -9 else 0  # EBADF: the pidfd was no pidfd
        return FdTaken(pid, tid, t, _s32(r.arg[0]), target, _s32(r.arg[1]), r.ret, files(r.file))
    if kind == CLOSE_RANGE:
        return FdCloseCall(
            pid, tid, t, _s32(r.arg[0]), "", r.ret, min(r.arg[1], 2**31 - 1), "close_range"
        )
    if kind == FORK:
        return ProcessForked(pid, tid, t, int(r.arg[0]), _text(r.tail(NAMED)[0]))
    if kind == EXEC:
        comm, name = r.tail(NAMED)
        return ProcessExec(pid, tid, t, _text(name), _text(comm))
    if kind == EXIT:
        return ProcessExit(pid, tid, t, r.ret, _text(r.tail(NAMED)[0]))
    return None


def _cuda(r: Raw, pid: int, tid: int, t: int) -> CudaCall | None:
    if r.nfds >= len(FUNCS):
        return None
    func = FUNCS[r.nfds]
    f = base_name(func)
    *a, dur, name = r.tail(CUDAREC)
    res = _s32(r.ret)
    out = r.file if res == 0 else 0
    entry, after = name[:64], name[64:128]
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
    return CudaCall(pid, tid, t, func, res, duration_ns=dur, **c)  # type: ignore[arg-type]
