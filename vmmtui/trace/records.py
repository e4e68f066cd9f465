"""The ring buffer's records (the ``struct rec*`` of trace.bpf.c) as typed trace events.

Kernel pointers never leave this module: a ``struct file *`` becomes a keyed hash (``FileNames``:
a fresh random key per trace), enough to match a send to its receive and useless to anyone
reading a recording. Bytes from the traced processes (comm, memfd and socket names) are decoded
as text here and shown only through ``vmmtui.stream.names.shown`` by the renderers.
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
    FdsDropped,
    FdsReceived,
    FdsSent,
    FdTaken,
    FileSized,
    MemfdCreated,
    MemoryMapped,
    MemoryUnmapped,
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
FORK, EXEC, EXIT, CUDA, FDS, QUEUED, REFUSAL, DROPPED = range(9, 17)
MMAP, MUNMAP, TRUNC = 17, 18, 19
#: EV_CLOSE's h.arg[1]: a close(2), or a watched fd the kernel closed at an execve (close-on-exec)
CLOSED_BY_CLOSE, CLOSED_AT_EXEC = 0, 1
#: the syscalls of an EV_MUNMAP (its h.nfds)
UNMAP_CALLS = {11: "munmap", 25: "mremap", 9: "mmap"}
PATHLEN = 256
DUP_CALLS = {32: "dup", 33: "dup2", 292: "dup3", 72: "fcntl"}
FAMILIES = {1: "unix", 2: "inet", 10: "inet6", 16: "netlink"}
#: the syscalls whose receive dropped fds (EV_DROPPED's h.ret)
DROP_CALLS = {0: "read", 19: "readv", 45: "recvfrom", 47: "recvmsg"}

#: each record struct of bpf/trace.h, field by field (``struct`` formats): the Structs below are
#: made from these, and tests/trace/test_record_layout.py checks them against the object's BTF
LAYOUTS: dict[str, tuple[tuple[str, str], ...]] = {
    # struct rec, the head of every record (64 bytes)
    "rec": (
        ("type", "I"), ("tgid", "I"), ("tid", "I"), ("nfds", "I"), ("ktime", "Q"),
        ("ret", "q"), ("arg", "3Q"), ("file", "Q"),
    ),
    # memfd_create, fork, exec, exit
    "rec_named": (("comm", "16s"), ("name", "128s")),
    # a message's SCM_RIGHTS: the socket, its peer, the sockaddr_un, fds, files, their kinds
    "rec_msg": (
        ("sock_ino", "Q"), ("peer_ino", "Q"), ("sk", "Q"), ("peer_sk", "Q"), ("family", "I"),
        ("namelen", "I"), ("name", "112s"), ("fds", f"{MAXFDS}i"), ("files", f"{MAXFDS}Q"),
        ("kinds", f"{MAXFDS}Q"),
    ),
    # EV_FDS, EV_QUEUED, EV_DROPPED
    "rec_fds": (("fds", f"{MAXFDS}i"), ("files", f"{MAXFDS}Q"), ("kinds", f"{MAXFDS}Q")),
    "rec_cuda": (("args", "5Q"), ("dur", "Q"), ("name", "128s")),
    # EV_MMAP: the protection and flags asked, what the file is (file_kind), its name
    "rec_map": (("prot", "I"), ("flags", "I"), ("kind", "Q"), ("path", f"{PATHLEN}s")),
    # struct side: one process of a refused pidfd_getfd, as the kernel's ptrace check sees it
    "side": (
        ("pid", "I"), ("uid", "I"), ("euid", "I"), ("suid", "I"), ("gid", "I"), ("egid", "I"),
        ("sgid", "I"), ("userns", "I"), ("pidns", "I"), ("seccomp", "i"), ("filters", "i"),
        ("dumpable", "i"), ("cap_eff", "Q"), ("cap_prm", "Q"), ("comm", "16s"),
    ),
}  # fmt: skip
# struct rec_refusal: the caller's side, then the target's
LAYOUTS["rec_refusal"] = tuple(
    (f"{who}.{name}", fmt) for who in ("caller", "target") for name, fmt in LAYOUTS["side"]
)


def _struct(name: str) -> struct.Struct:
    return struct.Struct("<" + "".join(f for _, f in LAYOUTS[name]))


HEAD = _struct("rec")
NAMED = _struct("rec_named")
MSG = _struct("rec_msg")
FDLIST = _struct("rec_fds")
CUDAREC = _struct("rec_cuda")
MAPREC = _struct("rec_map")
#: a message record's socket part (sock_ino … name), then where its fds and files start
_SOCK = struct.Struct("<QQQQII112s")
_FDS_AT = HEAD.size + _SOCK.size
_FILES_AT = _FDS_AT + 4 * MAXFDS
_KINDS_AT = _FILES_AT + 8 * MAXFDS
#: n fds, n files or n kinds of a message record, for n = 0..16
_INTS = [struct.Struct(f"<{n}i") for n in range(MAXFDS + 1)]
_U64S = [struct.Struct(f"<{n}Q") for n in range(MAXFDS + 1)]
SIDE = _struct("side")
SIZES = {
    REFUSAL: HEAD.size + 2 * SIDE.size,
    SEND: HEAD.size + MSG.size,
    RECV: HEAD.size + MSG.size,
    FDS: HEAD.size + FDLIST.size,
    QUEUED: HEAD.size + FDLIST.size,
    DROPPED: HEAD.size + FDLIST.size,
    MEMFD: HEAD.size + NAMED.size,
    FORK: HEAD.size + NAMED.size,
    EXEC: HEAD.size + NAMED.size,
    EXIT: HEAD.size + NAMED.size,
    CUDA: HEAD.size + CUDAREC.size,
    MMAP: HEAD.size + MAPREC.size,
}

#: superblock magics (linux/magic.h) of the files worth naming
_MAGICS = {
    0x01021994: "memfd",  # tmpfs/shmem: memfd_create, /dev/shm
    0x958458F6: "memfd",  # hugetlbfs
    0x534F434B: "socket",
    0x50494446: "pidfd",
    0x444D4142: "dmabuf",
    0x50495045: "pipe",
}
_S_IFMT, _S_IFCHR, _S_IFREG, _S_IFDIR = 0o170000, 0o020000, 0o100000, 0o040000
NVIDIA_MAJOR = 195
#: trace.h's KIND_DEV_SHM: a tmpfs file on the tmpfs mounted at /dev/shm (not a memfd)
KIND_DEV_SHM = 1 << 31


def file_kind(packed: int) -> str:
    """What a sent file is, from trace.bpf.c's ``file_kind`` (superblock magic << 32 | device
    major << 16 | i_mode, with ``KIND_DEV_SHM`` for a /dev/shm file): ``memfd``, ``shm``
    (/dev/shm), ``socket``, ``gpu`` (/dev/nvidia*)…; ``""`` when unread."""
    if not packed:
        return ""
    magic, major, mode = packed >> 32, (packed >> 16) & 0x7FFF, packed & 0xFFFF
    if packed & KIND_DEV_SHM:
        return "shm"
    if magic in _MAGICS:
        return _MAGICS[magic]
    if magic == 0x09041934:
        return "anon inode"
    fmt = mode & _S_IFMT
    if fmt == _S_IFCHR:
        return "gpu" if major == NVIDIA_MAJOR else f"char device {major}"
    if fmt == _S_IFREG:
        return "file"
    if fmt == _S_IFDIR:
        return "directory"
    return f"magic {magic:#x}"


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


def _socket(
    ino: int, peer: int, sk: str, peer_sk: str, fam: int, namelen: int, addr: bytes
) -> SocketEnd:
    family = FAMILIES.get(fam, f"family {fam}")
    name = ""
    if fam == 1 and namelen > 2:
        path = addr[2 : min(namelen, 110)]
        if path[:1] == b"\0":
            name = "@" + path[1:].decode("utf-8", "surrogateescape")
        else:
            name = _text(path)
    return SocketEnd(ino, peer, name, family, sk, peer_sk)


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
    kinds: list[str]

    def event(self) -> TraceCall:
        missing = max(self.total - len(self.fds), 0)
        if self.kind == SEND:
            return FdsSent(
                self.pid, self.tid, self.ktime, self.call, self.sock, self.fds, self.files,
                self.result, self.kinds, fds_not_read=missing,
            )  # fmt: skip
        return FdsReceived(
            self.pid, self.tid, self.ktime, self.call, self.sock, self.fds, self.files,
            self.result, fds_not_read=missing,
        )  # fmt: skip


@dataclass
class _Queued:
    """The fds of a message the kernel closed unreceived (EV_QUEUED, EV_DROPPED), gathered."""

    kind: int
    pid: int
    tid: int
    ktime: int
    sock: int
    sk: str
    total: int
    call: int
    files: list[str]

    def event(self) -> TraceCall:
        if self.kind == DROPPED:
            return FdsDropped(
                self.pid, self.tid, self.ktime, DROP_CALLS.get(self.call, f"syscall {self.call}"),
                SocketEnd(self.sock, sk=self.sk), tuple(self.files), self.total,
            )  # fmt: skip
        return QueuedAtRelease(
            self.pid, self.tid, self.ktime, self.sock, tuple(self.files), self.total, self.sk
        )


class Decoder:
    """The records as typed events, in ring order. A message with more than 16 fds comes as its
    head record and continuation records (EV_FDS, same thread and time): its event is made when
    every fd has come, or, with ``fds_not_read`` counting the rest, when that thread's next record
    or the end of the trace shows that no more will."""

    #: sockets kept (one ``SocketEnd`` for every message on a socket), at most
    SOCKETS = 4096

    def __init__(self, files: FileNames) -> None:
        self.files = files
        self.pending: dict[int, _Message | _Queued] = {}
        #: a socket's SocketEnd by its record's bytes: made once, one object for all its messages
        #: (a ledger that keeps each transfer keeps one socket, not one a message)
        self.sockets: dict[bytes, SocketEnd] = {}
        #: what a sent file is (``file_kind``) by its packed kind
        self.kinds: dict[int, str] = {}
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
        if r.type in (QUEUED, DROPPED) and r.arg[2] > 0:
            if (
                isinstance(p, _Queued)
                and (p.kind, p.sock, p.total) == (r.type, r.arg[0], r.arg[1])
                and r.arg[2] == len(p.files)
            ):
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
            rest = r.tail(MSG)[7:]  # the socket (its first 7 fields) comes from _socket
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
            sock = self._socket(r.raw)
            kinds = (
                [self._kind(k) for k in rest[2 * MAXFDS : 2 * MAXFDS + n]] if r.type == SEND else []
            )
            m = _Message(
                r.type, r.tgid, r.tid, r.ktime, call, sock, r.ret, total, list(rest[:n]),
                [self.files(f) for f in rest[MAXFDS : MAXFDS + n]], kinds,
            )  # fmt: skip
            return self._hold(m, out)
        if r.type in (QUEUED, DROPPED):
            q = _Queued(
                r.type, r.tgid, r.tid, r.ktime, int(r.arg[0]), self.files(r.file),
                int(r.arg[1]), r.ret, [],
            )  # fmt: skip
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
        msg_size = SIZES[SEND]
        for raw in records:
            if len(raw) < head:
                continue
            kind, tgid, tid, nfds, ktime, ret, a0, a1, a2, file = unpack(raw)
            if kind == CLOSE and tid not in pending:
                call = "exec" if a1 == CLOSED_AT_EXEC else "close"
                out.append(FdCloseCall(tgid, tid, ktime, _s32(a0), files(file), ret, call=call))
            elif kind == MEMFD and tid not in pending and len(raw) >= SIZES[MEMFD]:
                name = NAMED.unpack_from(raw, head)[1]
                out.append(MemfdCreated(tgid, tid, ktime, _text(name), ret, files(file)))
            elif (
                kind in (SEND, RECV)
                and nfds == a1  # the whole message in this record: no continuation to wait for
                and nfds <= MAXFDS
                and tid not in pending
                and len(raw) >= msg_size
            ):
                out.append(self._message(raw, kind, tgid, tid, nfds, ktime, ret, a2))
            else:
                out += self(raw)
        return out

    def _message(
        self, raw: bytes, kind: int, pid: int, tid: int, n: int, ktime: int, ret: int, nr: int
    ) -> TraceCall:
        """A message whose record holds all its fds (most messages), decoded in one pass: the
        event ``__call__`` makes of it, without the gathering a message of more fds needs."""
        sock = self._socket(raw)
        fds = list(_INTS[n].unpack_from(raw, _FDS_AT))
        names = self.files
        files = [names(f) for f in _U64S[n].unpack_from(raw, _FILES_AT)]
        many = nr in (299, 307)
        if kind == SEND:
            kinds = [self._kind(k) for k in _U64S[n].unpack_from(raw, _KINDS_AT)]
            call = "sendmmsg" if many else "sendmsg"
            return FdsSent(pid, tid, ktime, call, sock, fds, files, ret, kinds)
        return FdsReceived(
            pid, tid, ktime, "recvmmsg" if many else "recvmsg", sock, fds, files, ret
        )

    def _socket(self, raw: bytes) -> SocketEnd:
        """The socket of a message record, made once per socket (its bytes are its key)."""
        key = raw[HEAD.size : _FDS_AT]
        sock = self.sockets.get(key)
        if sock is None:
            if len(self.sockets) >= self.SOCKETS:
                self.sockets.clear()
            ino, peer, sk, peer_sk, fam, namelen, addr = _SOCK.unpack_from(raw, HEAD.size)
            sock = _socket(ino, peer, self.files(sk), self.files(peer_sk), fam, namelen, addr)
            self.sockets[key] = sock
        return sock

    def _kind(self, packed: int) -> str:
        name = self.kinds.get(packed)
        if name is None:
            name = self.kinds[packed] = file_kind(packed)
        return name

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
            if m.kind == SEND:
                m.kinds.extend(self._kind(k) for k in vals[2 * MAXFDS : 2 * MAXFDS + n])
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
        call = "exec" if r.arg[1] == CLOSED_AT_EXEC else "close"
        return FdCloseCall(pid, tid, t, _s32(r.arg[0]), files(r.file), r.ret, call=call)
    if kind == MMAP:
        return _mapped(r, files)
    if kind == MUNMAP:
        return _unmapped(r)
    if kind == TRUNC:
        return FileSized(pid, tid, t, _s32(r.arg[0]), files(r.file), int(r.arg[1]), min(r.ret, 0))
    if kind == MEMFD:
        name = r.tail(NAMED)[1]
        return MemfdCreated(pid, tid, t, _text(name), r.ret, files(r.file))
    if kind == DUP:
        call = DUP_CALLS.get(r.arg[2], "dup")
        return FdDuplicated(pid, tid, t, call, _s32(r.arg[0]), r.ret, files(r.file))
    if kind == CUDA:
        return _cuda(r, files, pid, tid, t)
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


def _mapped(r: Raw, files: FileNames) -> MemoryMapped:
    """EV_MMAP: the kernel's return is the address (``result`` 0) or ``-errno`` (``addr`` 0).
    ``kind`` is the file's name as /proc/PID/maps gives it (``memfd:x``, ``/dev/shm/x``,
    ``/dev/nvidia-uvm``), else what it is (``file_kind``)."""
    prot, flags, packed, path = r.tail(MAPREC)
    ret = r.ret
    return MemoryMapped(
        r.tgid, r.tid, r.ktime, _s32(r.arg[0]), files(r.file), max(ret, 0), int(r.arg[1]),
        min(ret, 0), prot, flags, int(r.arg[2]), _text(path) or file_kind(packed),
    )  # fmt: skip


def _unmapped(r: Raw) -> MemoryUnmapped:
    """EV_MUNMAP: an unmap that touched a range a traced process mapped from a file of interest
    (the kernel keeps those ranges; other unmaps never come). An ``mremap``'s return is where
    the mapping went (``new_addr``; it equals ``addr`` when resized in place)."""
    call = UNMAP_CALLS.get(r.nfds, f"syscall {r.nfds}")
    ret = r.ret
    moved = call == "mremap" and ret >= 0
    return MemoryUnmapped(
        r.tgid, r.tid, r.ktime, int(r.arg[0]), int(r.arg[1]), min(ret, 0), call,
        ret if moved else 0, int(r.arg[2]) if moved else 0,
    )  # fmt: skip


#: the CUDA calls whose record names the open file of their fd (trace.bpf.c's h.arg[0])
_FD_CALLS = (
    "cuMemExportToShareableHandle",
    "cuMemImportFromShareableHandle",
    "cuMemPoolExportToShareableHandle",
    "cuMemPoolImportFromShareableHandle",
)


def _cuda(r: Raw, files: FileNames, pid: int, tid: int, t: int) -> CudaCall | None:
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
    elif f == "cuMemRetainAllocationHandle":
        c.update(handle=out, ptr=a[1])
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
    if r.arg[0] and f in _FD_CALLS:  # the open file of the fd exported or imported
        c["file"] = files(r.arg[0])
    return CudaCall(pid, tid, t, func, res, duration_ns=dur, **c)  # type: ignore[arg-type]
