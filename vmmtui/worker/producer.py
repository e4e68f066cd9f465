"""The producer's steps: make the memory, fill it, export it, hand it to each consumer, wait for the ACKs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmmtui.plan.config import Direction, Verify
from vmmtui.plan.steps import CONSUMER
from vmmtui.stream.failures import StepError, failure
from vmmtui.stream.state import HeldKind, Peer
from vmmtui.stream.values import Ack
from vmmtui.wire import channel
from vmmtui.worker import memory

if TYPE_CHECKING:
    from vmmtui.worker.core import Worker


def query(w: Worker) -> None:
    w.sharing.query(w)


def create(w: Worker) -> None:
    w.sharing.create(w)


def map_memory(w: Worker) -> None:
    memory.map_range(w)
    w.say(
        "Mapped physical memory to virtual address"
        if w.backend.has_device
        else "Mapped the memfd at that address"
    )


def fill(w: Worker) -> None:
    on = Verify.HOST.value if w.cfg.verify == Verify.HOST else Verify.DEVICE.value
    count = w.backend.fill(w.address, w.state.alloc_size, on)
    w.state.integers, w.state.fill_on = count, on
    if on == Verify.DEVICE:
        w.gpu_ms("fill")
        w.say(f"Wrote {count} test integers on the GPU (fill_pattern kernel)")
    else:
        w.say(f"Generated {count} test integers")
        w.say(
            "Copied test data to GPU"
            if w.backend.has_device
            else "Wrote test data into the shared pages"
        )


def clear(w: Worker) -> None:
    w.backend.clear(w.address, w.state.alloc_size)
    w.state.integers = w.state.alloc_size // 4
    w.say(f"Cleared {w.state.alloc_size} bytes: the consumers will write the pattern")


def verify(w: Worker) -> None:
    memory.verify(w, "Checked what the consumers wrote")


def export(w: Worker) -> None:
    w.sharing.export(w)


def listen(w: Worker) -> None:
    path = w.cfg.socket_path
    found = w.backend.calls.timed(
        "stale socket check",
        {"path": path},
        lambda: channel.remove_if_stale(path),
        lambda r: r or "no file",
    )
    if found:
        w.say(f"Removed a {found.split(':', 1)[0]}: {found.split(': ', 1)[1]}")
        w.state.stale_socket = found
    w.listener = w.backend.calls.timed(
        "socket+bind+listen",
        {"path": path, "type": "SOCK_SEQPACKET"},
        lambda: channel.listen(path),
        lambda s: f"fd {s.fileno()}",
    )
    w.book.hold(w.listener.fileno(), HeldKind.LISTENER, f"listening socket {path}")
    w.say("Waiting for consumer connection...")


def accept(w: Worker, expect_pid: int | None = None, peer: str = CONSUMER) -> None:
    listener = w.listener
    if listener is None:
        raise StepError(failure("PROTOCOL", "accept", "not listening"))

    def on_refused(cred: channel.PeerCred) -> None:
        s = w.state
        s.refused_total += 1
        if len(s.refused) < channel.MAX_REFUSED_SHOWN:  # a flood is counted, not listed
            s.refused.append(Peer(cred.pid, cred.uid, cred.gid))
            w.say(
                f"Refused connection from pid {cred.pid} uid {cred.uid}: not the consumer we launched"
            )

    conn, cred = w.backend.calls.timed(
        "accept",
        {"fd": listener.fileno(), "expect_pid": expect_pid},
        lambda: channel.accept(listener, expect_pid, w.cfg.accept_timeout, on_refused),
        lambda r: f"fd {r[0].fileno()}, SO_PEERCRED pid={r[1].pid} uid={r[1].uid}",
    )
    if w.state.refused_total > len(w.state.refused):
        w.say(
            f"Refused {w.state.refused_total} connections in all (only the first {len(w.state.refused)} listed)"
        )
    w.peers[peer] = conn
    w.book.hold(conn.fileno(), HeldKind.CONNECTION, f"connection to {peer} pid {cred.pid}")
    w.state.peers[peer] = Peer(cred.pid, cred.uid, cred.gid, conn.fileno())
    w.say(f"{peer.capitalize()} connected (pid {cred.pid}, checked with SO_PEERCRED)")


def _connection(w: Worker, peer: str, call: str):
    sock = w.peers.get(peer)
    if sock is None:
        raise StepError(failure("PROTOCOL", call, f"no connection to {peer}"))
    return sock


def send(w: Worker, peer: str = CONSUMER) -> None:
    w.state.sent = w.sharing.send(w, _connection(w, peer, "sendmsg"), peer)


def wait_ack(w: Worker, peer: str = CONSUMER) -> None:
    sock = _connection(w, peer, "recv")
    timeout = w.cfg.ack_timeout
    ack, _ = w.backend.calls.timed(
        "recv",
        {"fd": sock.fileno(), "timeout_s": timeout},
        lambda: channel.receive_message(sock, timeout, Ack),
        lambda r: "ack " + ("verified" if r[0].verified else "FAILED"),
    )
    w.state.acks[peer] = ack
    if not ack.verified:
        raise StepError(
            failure("VERIFY_MISMATCH", "ack", f"{peer} reports: {ack.detail or 'failed'}")
        )
    if w.cfg.direction == Direction.CONSUMER_WRITES:
        start, end = ack.slice or ("?", "?")
        stream = " and its stream finished" if w.backend.has_device else ""
        w.say(f"{peer.capitalize()} wrote its slice [{start}, {end}){stream}")
    else:
        w.say(f"{peer.capitalize()} verified data successfully!")
