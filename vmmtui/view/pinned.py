"""What the programs panel says pins memory, from the world's own word in the stream (``model.pins``
decides; the ledger's findings say it): which received fd pins whose memory, and which hold after
an exporter died the world says is over. No fold here: the rules that read those findings."""

from __future__ import annotations

from vmmtui.stream.events import FdOpened, MappingSeen
from vmmtui.stream.observed import LedgerFinding

#: the targets of files that carry memory (``stream.observed.MEMORY_FILES``): a memfd, a
#: /dev/shm file, a dma-buf, a driver's export of an allocation (as ``view.programs`` names it)
MEMORY_TARGETS = ("memfd:", "/memfd:", "/dev/shm/", "dmabuf", "anon_inode:dmabuf", "allocation ")

#: the roads on which the world saw a file come to a process from the one that sent it (a kcmp
#: share of polling names two holders, not who made it: no pin claimed)
CAME_VIA = ("SCM_RIGHTS", "pidfd_getfd")


def carries_memory(target: str) -> bool:
    """Whether an fd's target names a file that carries memory (a file of a kind not seen is not
    said to: the panel claims a pin only where it knows the memory)."""
    return target.startswith(MEMORY_TARGETS)


def after_death_key(e: LedgerFinding, died_at: int) -> tuple[int, int, int, str, str, int, int]:
    """What names one hold after an exporter died, in its ``held-…`` finding (``died_at``: its
    time) and in the ``released-…`` that ends it (``since``): the holder, the exporter, when it
    died, and the memory (``model.entries.HeldAfterDeath``)."""
    return (e.pid, e.peer, died_at, str(e.memory), e.file, e.handle, e.ptr)


#: the fds that carry memory as polling names their kind (``stream.events.AttachKind``)
MEMORY_KINDS = ("gpu", "memfd", "shm", "dmabuf")


def at_attach(held: frozenset[tuple[int, int, int]], e: FdOpened | MappingSeen) -> frozenset:
    """The memory found held at attach (``present``: an fd that carries memory, a mapping),
    with ``e``'s: it came there unseen (who made it, how it came), so finding nothing wrong
    since is not "nothing wrong found" over it. A mapping seen again with another length is the
    same one (keyed by its file)."""
    if e.how != "present":
        return held
    if isinstance(e, MappingSeen):
        return held | {(e.pid, e.dev, e.ino)}
    return held | {(e.pid, -1, e.fd)} if e.kind in MEMORY_KINDS else held
