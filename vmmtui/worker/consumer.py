"""The consumer's steps: connect, receive what the producer sent, import and map it, check or write, ACK."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmmtui.plan.config import Direction, Verify
from vmmtui.plan.steps import PRODUCER
from vmmtui.stream.failures import StepError, failure
from vmmtui.stream.sizes import align_up
from vmmtui.stream.state import HeldKind, Peer
from vmmtui.stream.values import Ack, AllocMessage
from vmmtui.wire import channel
from vmmtui.worker import memory, transport

if TYPE_CHECKING:
    import socket

    from vmmtui.worker.core import Worker


def _sock(w: Worker, call: str) -> socket.socket:
    if w.sock is None:
        raise StepError(failure("PROTOCOL", call, "not connected to the producer"))
    return w.sock


def connect(w: Worker, expect_pid: int | None = None) -> None:
    w.say("Connecting to producer...")
    path, timeout = w.cfg.socket_path, w.cfg.connect_timeout
    retries: list[str] = []
    sock, tries = w.backend.calls.timed(
        "connect",
        {"path": path, "timeout_s": timeout},
        lambda: channel.connect(path, timeout, retries.append),
        lambda r: f"fd {r[0].fileno()} after {r[1]} tries",
    )
    cred = channel.peer_cred(sock)
    if expect_pid is not None and cred.pid != expect_pid:
        sock.close()
        raise StepError(
            failure(
                "PEER_REFUSED", "connect", f"peer pid {cred.pid} is not the producer {expect_pid}"
            )
        )
    w.sock = sock
    w.book.hold(sock.fileno(), HeldKind.CONNECTION, f"connection to producer pid {cred.pid}")
    w.state.peers[PRODUCER] = Peer(cred.pid, cred.uid, cred.gid, sock.fileno())
    w.state.connect_tries, w.state.connect_retries = tries, retries
    if retries:
        counts = ", ".join(f"{code} x{retries.count(code)}" for code in dict.fromkeys(retries))
        w.say(
            f"connect() failed {len(retries)} times ({counts}): the producer was not listening yet; retried"
        )
    w.say("Connected to producer")


def receive(w: Worker) -> None:
    sock = _sock(w, "recvmsg")
    sharing = w.sharing
    # what recvmsg returned: the fds and the bytes that came over the socket (a few hundred),
    # then the size of the allocation those bytes name (which did not travel)
    meta, fds, _ = w.backend.calls.timed(
        "recvmsg",
        {"fd": sock.fileno(), "want": transport.wants(w)},
        lambda: channel.receive_sized(
            sock,
            w.cfg.ack_timeout,
            AllocMessage,
            want_fds=0 if transport.takes_fd(w) else sharing.want_fds,
        ),
        lambda r: f"fds {r[1]}, {r[2]} bytes (metadata naming a {r[0].alloc_size}-byte allocation)",
    )
    for fd in fds:
        w.book.hold(fd, HeldKind.RECEIVED, "received via SCM_RIGHTS")
    try:
        if meta.backend != w.backend.name or meta.mechanism != w.cfg.mechanism:
            raise StepError(
                failure(
                    "BAD_MESSAGE",
                    "recvmsg",
                    f"producer uses {meta.backend} {meta.mechanism}, "
                    f"we use {w.backend.name} {w.cfg.mechanism}",
                )
            )
        if meta.transport != w.cfg.transport:
            raise StepError(
                failure(
                    "BAD_MESSAGE",
                    "recvmsg",
                    f"producer uses {meta.transport}, we {w.cfg.transport}",
                )
            )
        _check_claim(w, meta)
        if transport.takes_fd(w):
            fds = [transport.take(w, meta)]
        sharing.received(w, meta, fds)
    except StepError:
        for fd in fds:
            w.book.close_fd(fd)
        raise
    s = w.state
    s.received, s.alloc_size, s.granularity, s.owner_device = (
        meta,
        meta.alloc_size,
        meta.granularity,
        meta.device,
    )
    s.requested_size = meta.requested_size


def _check_claim(w: Worker, meta: AllocMessage) -> None:
    """The producer may claim only the size this consumer was asked to share (its own ``--size``,
    rounded to the granularity): anything else is refused before the fd is imported, mapped or read.

    The granularity is the producer's word here; the import step checks it against the kernel's or
    the driver's (``SizeCheck.granularity``), so a lying granularity cannot stretch the claim."""
    gran, claimed = meta.granularity, meta.alloc_size
    if gran <= 0 or gran & (gran - 1):
        raise StepError(
            failure("SIZE_MISMATCH", "recvmsg", f"granularity {gran}: not a power of two")
        )
    expected = align_up(w.cfg.size, gran)
    if claimed != expected:
        raise StepError(
            failure(
                "SIZE_MISMATCH",
                "recvmsg",
                f"claimed {claimed} bytes; this consumer shares --size {w.cfg.size}, "
                f"{expected} at granularity {gran}",
            )
        )


def _check_peer(w: Worker) -> None:
    """A consumer on another GPU must be able to reach the producer's device (NVLink/PCIe P2P)."""
    owner, own = w.state.owner_device, w.state.device
    if owner is None or owner == own:
        return
    ok = w.backend.can_access_peer(owner)
    w.state.peer_access = ok
    if not ok:
        raise StepError(
            failure(
                "PEER_UNREACHABLE",
                "cuDeviceCanAccessPeer",
                f"device {own} cannot access memory on device {owner}",
            )
        )
    w.say(f"Device {own} can access device {owner}'s memory (peer access)")


def import_memory(w: Worker) -> None:
    _check_peer(w)
    w.sharing.import_(w)
    if w.sharing.checks_size:
        _check_size(w)


def _check_size(w: Worker) -> None:
    """Nothing the producer says is trusted: the size it claims must be what the kernel or driver reports
    for the fd that arrived, before anything is mapped (a memfd shorter than the mapping is SIGBUS)."""
    s = w.state
    check = w.backend.check_size(w.received_fd, w.allocation, s.alloc_size)
    s.size_claimed, s.size_reported, s.size_source, s.seals, s.size_by_map = (
        check.claimed,
        check.reported,
        check.source,
        check.seals,
        check.by_map,
    )
    if check.code:
        raise StepError(failure(check.code, "import", check.detail))
    told = w.state.granularity
    if check.granularity is not None and told != check.granularity:
        raise StepError(
            failure(
                "SIZE_MISMATCH",
                "import",
                f"granularity {told} claimed, {check.granularity} per {check.source}: "
                f"the claim of {check.claimed} bytes rests on it",
            )
        )
    what = "the kernel" if check.source.startswith("kernel") else "the driver"
    if check.reported is not None:
        w.say(
            f"Size claimed {check.claimed} bytes; {what} reports {check.reported} ({check.source})"
            + (f", sealed {check.seals}" if check.seals else "")
        )
    elif check.by_map:
        w.say(
            f"Size claimed {check.claimed} bytes: the driver cannot tell an allocation's size; "
            "the map step maps exactly that, and a refusal is SIZE_MISMATCH"
        )


def map_memory(w: Worker) -> None:
    """On cuda the real mapping is the last size check: a refusal of it is SIZE_MISMATCH with the
    driver's code, whatever that code is (INVALID_VALUE, NOT_SUPPORTED, OUT_OF_MEMORY)."""
    try:
        memory.map_range(w)
    except StepError as exc:
        if not w.state.size_by_map:
            raise
        f = exc.failure
        raise StepError(
            failure(
                "SIZE_MISMATCH",
                "cuMemMap (imported)",
                f"claimed {w.state.alloc_size} bytes, but cuMemMap of that size at offset 0 is "
                f"{f.code}: the allocation that arrived is smaller, or cannot be mapped whole",
            )
        ) from None
    w.say("Mapped imported memory to virtual address")


def verify(w: Worker) -> None:
    memory.verify(w)


def slice_of(role: str, alloc_size: int, consumers: int) -> tuple[int, int]:
    """Consumer ``role``'s integers [start, end): equal slices, each starting at a multiple of 4 (16 bytes)."""
    count = alloc_size // 4
    k = int(role.rsplit("-", 1)[1]) if "-" in role else 1
    per = (count // consumers) // 4 * 4
    return (k - 1) * per, count if k == consumers else k * per


def write(w: Worker) -> None:
    start, end = slice_of(w.role, w.state.alloc_size, w.cfg.consumers)
    on = (
        Verify.DEVICE.value
        if w.backend.has_device and w.cfg.verify != Verify.HOST
        else Verify.HOST.value
    )
    w.backend.fill(w.address + start * 4, (end - start) * 4, on, first=start)
    w.state.slice, w.state.write_on = (start, end), on
    if on == Verify.DEVICE:
        w.gpu_ms("write")
    w.say(
        f"Wrote integers [{start}, {end}) of the shared buffer"
        + (
            " with the fill kernel on this process's stream; the stream has finished"
            if on == Verify.DEVICE
            else ""
        )
    )


def ack(w: Worker) -> None:
    sock = _sock(w, "send")
    s = w.state
    if w.cfg.direction == Direction.CONSUMER_WRITES:
        message = Ack(
            s.slice is not None,
            "slice written" if s.slice is not None else "nothing written",
            slice=s.slice,
        )
    else:
        passed = s.verification is not None and s.verification.passed
        message = Ack(
            passed,
            "verified" if passed else "verification failed",
            checked=s.verification.checked if s.verification else 0,
        )
    w.backend.calls.timed(
        "send",
        {"fd": sock.fileno(), "message": "ack"},
        lambda: channel.send_message(sock, message, timeout=w.cfg.connect_timeout),
        lambda n: f"{n} bytes",
    )
    w.say("Sent acknowledgment to producer")
