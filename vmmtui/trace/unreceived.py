"""The ledger's word on fds the kernel closed unreceived because their receive had no room for
them (``FdsDropped``: ``read()``, ``readv()``, ``recvfrom()``, ``recvmsg()`` without a control
buffer), naming the send they came from where the trace saw it."""

from __future__ import annotations

from vmmtui.stream.observed import FdsDropped, LedgerFinding
from vmmtui.trace.entries import Pending


def dropped(e: FdsDropped, file: str, sent: Pending | None) -> LedgerFinding:
    who = f"pid {sent.pid} sent fd {sent.fd} over {sent.via}" if sent else "sent"
    return LedgerFinding(
        "fds-dropped",
        e.pid,
        f"fd {sent.fd} of pid {sent.pid} dropped by {e.call}()"
        if sent
        else f"an fd dropped by {e.call}()",
        f"{who}; pid {e.pid} read the message with {e.call}(), which has no room for "
        "SCM_RIGHTS, so the kernel closed the fd: it was never received",
        "receive fd-carrying messages with recvmsg and a control buffer (CMSG_SPACE for every fd)",
        e.ktime,
        peer=sent.pid if sent else 0,
        file=file,
    )
