"""Identity that cannot leak: an open file is named by its ``struct file`` address (keyed), and
the kernel reuses the address of a freed one for the next file it opens ("struct file" comes from
a slab cache, freed at the last ``fput``), so one key names a memfd, then, once that memfd is
gone, a pipe. What the ledger knew of the first (its memfd name, its maker, its size, the driver
export it carried) must not become the second's: a pipe on a reused address is no memory.

A key starts a new object when the kernel says so: ``memfd_create`` returns it (a new memfd), or
a send reads the file as a kind the old object cannot be (``trace.records.file_kind``: a memfd
read as a pipe, a socket, a regular file; a driver export read as a pipe or a socket). No words:
the ledger's fold only."""

from __future__ import annotations

from typing import TYPE_CHECKING

from vmmtui.model import kept
from vmmtui.model.entries import Allocation, Holding, Pool
from vmmtui.model.pins import made
from vmmtui.stream.observed import MEMORY_FILES

if TYPE_CHECKING:
    from vmmtui.model.ledger import Ledger
    from vmmtui.stream.observed import MemfdCreated

#: kinds a driver's export can never be read as (its fd is a device file, or a memfd)
NOT_AN_EXPORT = frozenset({"pipe", "socket", "pidfd", "directory"})


def new_object(ledger: Ledger, file: str) -> None:
    """``file`` names another open file from now: what was known of the old one goes (its
    name, its maker, its size, the driver exports that named it)."""
    ledger.memfd_names.pop(file, None)
    ledger.makers.pop(file, None)
    ledger.growth.forget(f"file:{file}")
    exports: list[Allocation | Pool] = [*ledger.allocations.values(), *ledger.pools.values()]
    for x in exports:
        if any(f == file for _, f in x.exported):
            x.exported = [(fd, "" if f == file else f) for fd, f in x.exported]


def sent_as(ledger: Ledger, file: str, said: str) -> None:
    """A send read ``file`` as ``said``: where the ledger knew the key as a memory file that
    cannot be read so, the old file was freed and its address reused."""
    if not file or not said or said in MEMORY_FILES:
        return
    memfd = file in ledger.memfd_names or file in ledger.makers
    export = said in NOT_AN_EXPORT and (
        (ledger.allocations and ledger.allocation_of_file(file) is not None)
        or (ledger.pools and ledger.pool_of_file(file) is not None)
    )
    if memfd or export:
        new_object(ledger, file)


def created(ledger: Ledger, e: MemfdCreated) -> None:
    """``memfd_create``: a new memfd, whatever its key named before."""
    if e.fd < 0:
        return
    if e.file in ledger.makers or e.file in ledger.memfd_names:
        new_object(ledger, e.file)
    kept.remember_name(ledger.memfd_names, e.file, e.name, ledger.holdings.values())
    made(ledger, e.file, e.pid)
    ledger._hold(Holding(e.pid, e.fd, e.file, "created", e.ktime))
