"""The verdicts about programs as data: their kinds, what proves each, and the one count of them
that the end line, ``--json``, the screen and the metrics all give. No words here: a renderer
words a finding where it draws it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class FindingKind(StrEnum):
    """Every kind of finding: the good news (a share, an import) and the rest to look at."""

    SHARED = "shared"
    IMPORTED = "imported"
    REFUSED = "refused"
    IN_FLIGHT = "in-flight"
    FD_NEVER_CLOSED = "fd-never-closed"
    IMPORT_NEVER_RELEASED = "import-never-released"
    HELD_AFTER_EXPORTER_DIED = "held-after-exporter-died"
    POSSIBLE_HELD_AFTER_EXPORTER_DIED = "possible-held-after-exporter-died"
    IPC_NEVER_CLOSED = "ipc-never-closed"
    POOL_POINTER_NEVER_FREED = "pool-pointer-never-freed"
    POOL_NEVER_DESTROYED = "pool-never-destroyed"
    EXPORTER_DIED = "exporter-died"
    #: the refcount book (``model/handles.py``): an importer holds two opens of one export
    OPENED_TWICE = "opened-twice"
    #: an export no process opened (after the threshold, at its exporter's exit, or at the end)
    EXPORTED_NEVER_IMPORTED = "exported-never-imported"
    #: a handle released (or a pointer closed) a second time
    RELEASED_TWICE = "released-twice"
    #: the exporter released or freed while an importer still holds or maps the memory
    FREED_WHILE_MAPPED = "freed-while-mapped"
    #: cuIpcGetMemHandle on memory mapped with cuMemMap (refused: legacy IPC cannot export it)
    LEGACY_EXPORT_OF_VMM = "legacy-export-of-vmm"
    #: a conclusion that records lost could overturn
    UNKNOWN = "unknown"
    #: a process polling could not read
    UNREADABLE = "unreadable"


#: the kinds that are good news: a share or an import, proven
GOOD = frozenset({FindingKind.SHARED, FindingKind.IMPORTED})


def is_good(kind: str) -> bool:
    return kind in GOOD


class Proof(StrEnum):
    """What makes a finding true: which fact of the kernel or the driver matched the two sides."""

    #: eBPF read the kernel's ``struct file`` on both sides: one open file
    STRUCT_FILE = "struct file"
    #: kcmp(KCMP_FILE) said the two fds are one open file description (polling, ``trace -p``)
    KCMP = "kcmp"
    #: legacy IPC: the 64 bytes of ``CUipcMemHandle`` the exporter made and the importer opened
    HANDLE_BYTES = "handle bytes"
    #: a pool pointer: the 64 bytes of ``CUmemPoolPtrExportData``
    EXPORT_DATA = "export data"
    #: nothing matched the other side (a process not traced), or nothing to match (a leak)
    NONE = ""


class Memory(StrEnum):
    """What memory a finding is about: how it is named between the processes."""

    #: a VMM allocation (cuMemCreate), shared as an fd
    ALLOCATION = "allocation"
    #: legacy IPC: a device pointer shared as 64 handle bytes
    IPC = "ipc"
    #: a memory pool, shared as an fd
    POOL = "pool"
    #: a pool's allocation, shared as 64 export bytes
    POOL_POINTER = "pool pointer"
    #: an open file (a memfd, a /dev/shm file, a dma-buf)
    FILE = "file"


class HasProof(Protocol):
    @property
    def file(self) -> str: ...

    @property
    def proof(self) -> str: ...


def proof_of(f: HasProof) -> Proof:
    """The proof a finding names; a finding recorded before proofs were kept is proven by its
    ``file`` where it has one (the keyed hash of the kernel's ``struct file``)."""
    if f.proof:
        return Proof(f.proof)
    if f.file.startswith("kcmp:"):
        return Proof.KCMP
    return Proof.STRUCT_FILE if f.file else Proof.NONE


@dataclass(frozen=True)
class Tally:
    """The one count of findings: every finding (shares included), the good among them, and the
    good by what proves them."""

    good: int = 0
    bad: int = 0
    proven_by: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.good + self.bad


def kind_and_proof(f: Any) -> tuple[str, str]:
    """What a finding is counted by (``tally``'s pairs)."""
    return (str(f.kind), str(proof_of(f)))


def tally(found: Iterable[tuple[str, str]], counted: Mapping[Any, int] | None = None) -> Tally:
    """The count of ``(kind, proof)`` pairs, and of those ``counted`` already (pair -> how many:
    a long run's findings, counted as they came and no longer all kept)."""
    good = bad = 0
    proofs: Counter[str] = Counter()
    for (kind, proof), n in [*((pair, 1) for pair in found), *(counted or {}).items()]:
        if kind in GOOD:
            good += n
            proofs[proof] += n
        else:
            bad += n
    return Tally(good, bad, dict(proofs))
