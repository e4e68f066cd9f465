"""Which send a receive is, as the kernel delivered it.

A message with SCM_RIGHTS is queued on the sending socket's peer (``SocketEnd.peer_sk``) and
taken from there by a receive on that socket (``SocketEnd.sk``), in the order sent (a stream,
seqpacket or datagram socket's queue is FIFO). So a receive of file F on socket R is the oldest
send of F not yet matched whose peer is R: never "the oldest send of F anywhere", which names the
wrong sender when one open file goes over two sockets at once, and never a send found by the
file's name alone, which the kernel reuses once the old file is freed.

A send leaves the queue when it is received, or when the kernel says its fds were freed unreceived:
the socket holding them released (``QueuedAtRelease``, named by the sending socket) or a receive
that had no room for them (``FdsDropped``, named by the receiving socket). A send whose
destination the record could not name (an unconnected datagram socket sending to an address)
waits under ``""``: a receive takes it only when no send to its own socket has that file.
Recordings made before sockets were named by their sock fall back to their inodes.

Pure: no events, no words; the ledger and the programs view keep one each.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from vmmtui.stream.observed import SocketEnd

T = TypeVar("T")


def socket_id(sk: str, ino: int) -> str:
    """A socket's name in the queue: its sock, else its inode (older recordings), else ``""``."""
    return sk or (f"ino:{ino}" if ino else "")


def destination(s: SocketEnd) -> str:
    """The socket a send's message was queued on (the sending socket's peer)."""
    return socket_id(s.peer_sk, s.peer_ino)


def receiver(s: SocketEnd) -> str:
    """The socket a receive took its message from."""
    return socket_id(s.sk, s.ino)


@dataclass(frozen=True)
class Sent(Generic[T]):
    sender: str  # the sending socket (``receiver``-style id of the send's own socket)
    item: T


class SendQueue(Generic[T]):
    """Sends not yet received, by (receiving socket, file), oldest first."""

    __slots__ = ("_q",)

    def __init__(self) -> None:
        self._q: dict[tuple[str, str], deque[Sent[T]]] = {}

    def copy(self) -> SendQueue[T]:
        """An independent copy (for a view that keeps every frame's state)."""
        out: SendQueue[T] = SendQueue()
        out._q = {k: deque(v) for k, v in self._q.items()}
        return out

    def __len__(self) -> int:
        return sum(len(q) for q in self._q.values())

    def __bool__(self) -> bool:
        return bool(self._q)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SendQueue) and self._q == other._q

    __hash__ = None  # type: ignore[assignment]

    def sent(self, sock: SocketEnd, file: str, item: T) -> None:
        key = (destination(sock), file)
        self._q.setdefault(key, deque()).append(Sent(receiver(sock), item))

    def _take(self, key: tuple[str, str]) -> T | None:
        q = self._q.get(key)
        if not q:
            return None
        s = q.popleft()
        if not q:
            del self._q[key]
        return s.item

    def received(self, sock: SocketEnd, file: str) -> T | None:
        """The send this receive (or drop) on ``sock`` of ``file`` is, taken off the queue; None
        when no traced send matches (sent by a process not traced, or not folded yet)."""
        me = receiver(sock)
        got = self._take((me, file))
        if got is None and me:
            got = self._take(("", file))
        return got

    def released(self, sender: str, sender_ino: int, file: str) -> T | None:
        """The oldest send of ``file`` from the sending socket ``sender`` (its sock; its inode
        where the sock is not known), taken off the queue: the kernel freed it unreceived."""
        ids = {socket_id(sender, 0), socket_id("", sender_ino)} - {""}
        for key, q in self._q.items():
            if key[1] != file:
                continue
            for s in q:
                if s.sender in ids or not ids:
                    q.remove(s)
                    if not q:
                        del self._q[key]
                    return s.item
        return None

    def items(self) -> Iterator[tuple[str, tuple[T, ...]]]:
        """(file, its sends waiting), for showing."""
        for (_, file), q in self._q.items():
            yield file, tuple(s.item for s in q)

    def pending(self) -> Iterator[T]:
        for q in self._q.values():
            yield from (s.item for s in q)

    def clear(self) -> None:
        self._q.clear()
