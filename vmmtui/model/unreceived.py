"""The ledger's word on fds the kernel closed unreceived because their receive had no room for
them (``FdsDropped``: ``read()``, ``readv()``, ``recvfrom()``, ``recvmsg()`` without a control
buffer), naming the send they came from where the trace saw it."""

from __future__ import annotations

from vmmtui.model.entries import Pending
from vmmtui.stream.observed import FdsDropped, LedgerFinding


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
