"""The ledger's word on fds the kernel closed unreceived: because their receive had no room for
them (``FdsDropped``: ``read()``, ``readv()``, ``recvfrom()``, ``recvmsg()`` without a control
buffer), or because the socket they were queued on was released (``QueuedAtRelease``), naming
the send they came from where the trace saw it, and who released the socket and how."""

from __future__ import annotations

from vmmtui.model.entries import Pending
from vmmtui.stream.observed import FdsDropped, LedgerFinding, QueuedAtRelease


def dropped(e: FdsDropped, file: str, sent: Pending | None) -> LedgerFinding:
    return LedgerFinding(
        "fds-dropped",
        e.pid,
        e.ktime,
        peer=sent.pid if sent else 0,
        file=file,
        peer_fd=sent.fd if sent else -1,
        via=e.call,
        sock=sent.sock if sent else None,
    )


def queued(e: QueuedAtRelease, file: str, sent: Pending | None, exited: bool) -> LedgerFinding:
    """An fd still queued when its socket was released: ``in-flight``, about the sender. The
    process that released the socket is ``peer`` (where it is not the sender) and ``how`` says
    whether its exit released it (``exit``: it had exited, its fds closed by the kernel, queue
    and all) or a close while it ran (``close``). Either way the kernel closes the queued fds
    (unix(7): a socket's queue is purged at its release), so nothing stays held; whether the lost
    message is a problem is the policy's."""
    return LedgerFinding(
        "in-flight",
        sent.pid if sent else e.pid,
        e.ktime,
        peer=e.pid if sent and e.pid != sent.pid else 0,
        file=file,
        fd=sent.fd if sent else -1,
        how="exit" if exited else "close",
        via="SCM_RIGHTS",
        sock=sent.sock if sent else None,
    )
