"""The verdicts about programs as data: their kinds, what proves each, how much each weighs (good
news, a problem to look at, or a quiet fact), and the one count of them that the end line,
``--json``, the screen and the metrics all give. No words here: a renderer words a finding where
it draws it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple, Protocol

from vmmtui.stream.observed import MEMORY_FILES


class FindingKind(StrEnum):
    """Every kind of finding: the good news (a share, an import) and the rest to look at."""

    SHARED = "shared"
    IMPORTED = "imported"
    REFUSED = "refused"
    IN_FLIGHT = "in-flight"
    #: a received fd of a file that carries memory (``MEMORY_FILES``, or a file of a kind not
    #: seen) held until the process exited: the memory lived as long as the process
    FD_NEVER_CLOSED = "fd-never-closed"
    #: a received fd of a file that carries no memory (a socket, a pipe, an eventfd, a file on
    #: disk) held until exit: a fact, what servers and browsers do with their channels
    FD_CLOSED_BY_EXIT = "fd-closed-by-exit"
    #: a memory file that came from another process, its received fd closed, still pinned at
    #: exit by another fd (a dup) or a mapping: the memory lived as long as the process
    HELD_AT_EXIT = "held-at-exit"
    #: an importer whose pins on one exporter's memory rose round after round (``growth.py``)
    GROWTH = "growth"
    #: the end, in the past, of a ``held-after-exporter-died``: its last pin went
    RELEASED_AFTER_EXPORTER_DIED = "released-after-exporter-died"
    IMPORT_NEVER_RELEASED = "import-never-released"
    HELD_AFTER_EXPORTER_DIED = "held-after-exporter-died"
    POSSIBLE_HELD_AFTER_EXPORTER_DIED = "possible-held-after-exporter-died"
    #: polling (``trace/procfs/``): memory that came from another process (an fd, or a mapping
    #: kept after its fd closed) still held when the process was last read before its exit; a
    #: close or an munmap after that read is not seen, so never definite (a fact, not a leak)
    POSSIBLE_HELD_UNTIL_EXIT = "possible-held-until-exit"
    #: polling: a received fd still open, unmapped, after every process it was shared with exited
    POSSIBLE_FD_AFTER_PEER = "possible-fd-after-peer"
    #: polling: pins on one process's memory (fds and mappings) rising poll after poll with
    #: none released; the bytes from fstat and the mappings' lengths (a growth, as polls see it)
    POSSIBLE_GROWTH = "possible-growth"
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
    #: a legacy free under an importer's open that the importer closed (or exited) within the
    #: teardown window (``model/handles.py``, ``TEARDOWN_S``): both sides tore down together
    FREED_AT_TEARDOWN = "freed-at-teardown"
    #: cuIpcGetMemHandle on memory mapped with cuMemMap (refused: legacy IPC cannot export it)
    LEGACY_EXPORT_OF_VMM = "legacy-export-of-vmm"
    #: a conclusion that records lost could overturn
    UNKNOWN = "unknown"
    #: a process polling could not read
    UNREADABLE = "unreadable"


#: the kinds that are good news: a share or an import, proven
GOOD = frozenset({FindingKind.SHARED, FindingKind.IMPORTED})


#: the kinds that are facts, not problems: counted and kept, never "to look at" (the end of a
#: hold after an exporter died is the past of a problem already counted once; a legacy free its
#: importer closed within the teardown window is the undefined order of a healthy teardown, no
#: access of the freed memory can be seen in it)
QUIET = frozenset(
    {
        FindingKind.FD_CLOSED_BY_EXIT,
        FindingKind.RELEASED_AFTER_EXPORTER_DIED,
        FindingKind.FREED_AT_TEARDOWN,
    }
)


def is_good(kind: str) -> bool:
    return kind in GOOD


def carries_memory(file_kind: str) -> bool:
    """Whether an open file of ``file_kind`` may carry memory: a kind not seen ("") may, so it
    is never cleared as a quiet fact."""
    return not file_kind or file_kind in MEMORY_FILES


class Weight(StrEnum):
    """How much a finding weighs: good news, a problem to look at, or a quiet fact."""

    GOOD = "good"
    PROBLEM = "problem"
    QUIET = "quiet"


def weight(kind: str, was: str = "") -> Weight:
    """The weight of a finding of ``kind`` (``was``: what an ``unknown`` would be without the
    records lost; a lost close can only make a quiet fact quieter)."""
    if kind in GOOD:
        return Weight.GOOD
    if kind in QUIET or (kind == FindingKind.UNKNOWN and was in QUIET):
        return Weight.QUIET
    return Weight.PROBLEM


def weigh(f: Any) -> Weight:
    """The weight of a finding (a ``LedgerFinding``, a polling ``Leak``, anything with a
    ``kind``)."""
    return weight(str(f.kind), getattr(f, "was", ""))


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
    """The one count of findings: every finding (shares and quiet facts included), the good
    among them by what proves them, the problems (``bad``: "to look at") and the quiet facts by
    the kind of file they are about."""

    good: int = 0
    bad: int = 0
    proven_by: dict[str, int] = field(default_factory=dict)
    quiet: int = 0
    quiet_by: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return self.good + self.bad + self.quiet


class Counted(NamedTuple):
    """What a finding is counted by: its kind, its proof (good news), its weight and, for a
    quiet fact, the kind of file it is about."""

    kind: str
    proof: str = ""
    weight: Weight = Weight.PROBLEM
    file: str = ""


def counted_as(f: Any) -> Counted:
    """What a finding is counted by (``tally``'s keys)."""
    w = weigh(f)
    if w is Weight.GOOD:
        return Counted(str(f.kind), str(proof_of(f)), w)
    return Counted(str(f.kind), "", w, quiet_file(f) if w is Weight.QUIET else "")


#: what a quiet fact that is no received fd is counted under (``Tally.quiet_by``)
RELEASED_LATE = "released after its exporter died"
#: what a legacy free closed by its importer within the teardown window is counted under
TORN_DOWN = "freed at teardown"


def quiet_file(f: Any) -> str:
    """The kind of file a quiet fact is counted under (``Tally.quiet_by``)."""
    if str(f.kind) == FindingKind.RELEASED_AFTER_EXPORTER_DIED:
        return RELEASED_LATE
    if str(f.kind) == FindingKind.FREED_AT_TEARDOWN or (
        str(f.kind) == FindingKind.UNKNOWN
        and getattr(f, "was", "") == FindingKind.FREED_AT_TEARDOWN
    ):
        return TORN_DOWN
    return getattr(f, "name", "") or "other"


def tally(found: Iterable[Counted], counted: Mapping[Any, int] | None = None) -> Tally:
    """The count of ``found``, and of those ``counted`` already (``Counted`` -> how many: a long
    run's findings, counted as they came and no longer all kept)."""
    good = bad = quiet = 0
    proofs: Counter[str] = Counter()
    files: Counter[str] = Counter()
    for c, n in [*((c, 1) for c in found), *(counted or {}).items()]:
        if c.weight is Weight.GOOD:
            good += n
            proofs[c.proof] += n
        elif c.weight is Weight.QUIET:
            quiet += n
            files[c.file] += n
        else:
            bad += n
    return Tally(good, bad, dict(proofs), quiet, dict(files))
