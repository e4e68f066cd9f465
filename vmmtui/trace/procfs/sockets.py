"""Unix sockets of this network namespace and their peers, as the kernel tells them.

``sock_diag`` (NETLINK_SOCK_DIAG with UDIAG_SHOW_PEER) gives each socket's peer inode; where the
netlink family is missing or refused we fall back to ``/proc/net/unix``, which has names but no
peers, and say so. Either way only this network namespace's sockets are visible.
"""

from __future__ import annotations

import os
import socket
import struct
from dataclasses import dataclass

NETLINK_SOCK_DIAG = 4
SOCK_DIAG_BY_FAMILY = 20
NLM_F_REQUEST, NLM_F_DUMP = 0x1, 0x300
NLMSG_DONE, NLMSG_ERROR = 3, 2
UDIAG_SHOW_NAME, UDIAG_SHOW_PEER = 0x1, 0x4
UNIX_DIAG_NAME, UNIX_DIAG_PEER = 0, 2
TYPES = {1: "stream", 2: "dgram", 5: "seqpacket"}


@dataclass(frozen=True)
class UnixSocket:
    ino: int
    type: str
    path: str  # "" unnamed, "@name" abstract, else the filesystem path
    peer: int | None  # the peer socket's inode, when the kernel says


@dataclass
class SocketTable:
    sockets: dict[int, UnixSocket]
    source: str  # "sock_diag" or why peers are unknown


def _sock_diag() -> dict[int, UnixSocket]:
    req = struct.pack(
        "=BBHIIIII",
        socket.AF_UNIX,
        0,
        0,
        0xFFFFFFFF,
        0,
        UDIAG_SHOW_NAME | UDIAG_SHOW_PEER,
        0xFFFFFFFF,
        0xFFFFFFFF,
    )
    msg = (
        struct.pack("=IHHII", 16 + len(req), SOCK_DIAG_BY_FAMILY, NLM_F_REQUEST | NLM_F_DUMP, 1, 0)
        + req
    )
    out: dict[int, UnixSocket] = {}
    with socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_SOCK_DIAG) as nl:
        nl.sendto(msg, (0, 0))
        while True:
            data = nl.recv(1 << 17)
            off = 0
            while off + 16 <= len(data):
                length, kind, _, _, _ = struct.unpack_from("=IHHII", data, off)
                if length < 16:
                    return out
                if kind == NLMSG_DONE:
                    return out
                if kind == NLMSG_ERROR:
                    err = -struct.unpack_from("=i", data, off + 16)[0]
                    raise OSError(err, os.strerror(err))
                _family, stype, _state, _pad, ino = struct.unpack_from("=BBBBI", data, off + 16)
                path, peer = "", None
                a = off + 16 + 16
                while a + 4 <= off + length:
                    alen, atype = struct.unpack_from("=HH", data, a)
                    if alen < 4:
                        break
                    body = data[a + 4 : a + alen]
                    if atype == UNIX_DIAG_NAME:
                        path = (
                            "@" + body[1:].decode(errors="replace")
                            if body[:1] == b"\0"
                            else body.decode(errors="replace").rstrip("\0")
                        )
                    elif atype == UNIX_DIAG_PEER:
                        peer = struct.unpack("=I", body[:4])[0] or None
                    a += (alen + 3) & ~3
                out[ino] = UnixSocket(ino, TYPES.get(stype, str(stype)), path, peer)
                off += (length + 3) & ~3


def _proc_net_unix() -> dict[int, UnixSocket]:
    out = {}
    with open("/proc/net/unix") as f:
        next(f, None)
        for line in f:
            parts = line.split(None, 7)
            if len(parts) < 7:
                continue
            ino = int(parts[6])
            path = parts[7].strip() if len(parts) > 7 else ""
            out[ino] = UnixSocket(ino, TYPES.get(int(parts[4], 16), parts[4]), path, None)
    return out


def read_sockets() -> SocketTable:
    """Every Unix socket of this network namespace, with peers where sock_diag answers."""
    try:
        return SocketTable(_sock_diag(), "sock_diag")
    except OSError as exc:
        why = f"sock_diag unavailable ({exc.strerror or exc}): socket peers unknown"
    try:
        return SocketTable(_proc_net_unix(), why)
    except OSError as exc:
        return SocketTable({}, f"{why}; /proc/net/unix unreadable ({exc.strerror})")
