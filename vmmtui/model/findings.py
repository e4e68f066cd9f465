"""The verdicts about programs as data: their kinds, what proves each, and the one count of them
that the end line, ``--json``, the screen and the metrics all give. How much each weighs (good
news, a problem to look at, or a quiet fact) is the policy's: ``weight``, ``weigh``,
``counted_as``, ``quiet_file`` and ``tally`` are ``model/policy.py``'s, the one place that weighs.
No words here: a renderer words a finding where it draws it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import NamedTuple, Protocol

from vmmtui.stream.observed import MEMORY_FILES


class FindingKind(StrEnum):
    """Every kind of finding: the good news (a share, an import), the problems and the facts
    (``model/policy.py``'s ``RULES`` weighs each)."""

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
    #: more bytes pinned across live processes at a checkpoint than the budget allows
    #: (``vmmtui.tracing(max_pinned_bytes=)``, ``pytest --vmmtui-max-pinned``, ``trace
    #: --max-pinned``)
    PINNED_OVER_BUDGET = "pinned-over-budget"


#: the kinds that are good news: a share or an import, proven
GOOD = frozenset({FindingKind.SHARED, FindingKind.IMPORTED})


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


class Relation(NamedTuple):
    """What one problem is about (``model/policy.py``): its kind (the rule's kind for a broken
    rule), the process that holds and the process whose memory it is (0 where none or not
    known)."""

    problem: str
    holder: int
    exporter: int


class Counted(NamedTuple):
    """What a finding is counted by: its kind, its proof (good news), its weight, for a quiet fact
    what it is counted under, and for a problem its relation (problems are counted by relation,
    not by pin: ``policy.tally``)."""

    kind: str
    proof: str = ""
    weight: Weight = Weight.PROBLEM
    file: str = ""
    relation: Relation | None = None


#: what the end of a hold after its exporter died is counted under (``Tally.quiet_by``)
RELEASED_LATE = "released after its exporter died"
#: what a legacy free closed by its importer within the teardown window is counted under
TORN_DOWN = "freed at teardown"
