"""The one policy every finding passes through: how much it weighs (good news, a problem, a quiet
fact), the rule that decided it and, for a problem, the relation it is about. The trace's end
line, ``--json``, the inspector, ``watch``, ``attach``, the fleet's exporters, ``vmmtui.tracing()``
and the pytest plugin all weigh here (``weight``, ``weigh``, ``counted_as``, ``tally``, once imported from ``model.findings``,
delegate to it), so one finding weighs the same wherever it is said.

The world (the ledger, its refcount book, polling) says *what* happened; this module says
whether it is a problem. A problem fails a test and is "to look at"; it is one of four:

- **growth**: one importer's pins on one exporter's memory rose round after round with nothing
  let go (``model/growth.py`` decides what a round is; a start-up that stops is not growth);
- **orphaned**: memory a process still pins after the process that made it ended, longer than
  one teardown window (``TEARDOWN_WINDOW_S``), whatever the memory (a memfd, a /dev/shm file, a
  VMM allocation, a legacy IPC mapping, a pool pointer): nothing can use what only the dead
  exporter knew how to use, and it is freed only when the holder lets go. A hold that ends
  inside the window is the undefined order of a healthy shutdown, a quiet fact;
- **over budget**: more bytes pinned across live processes than the user allowed, at a
  checkpoint the user names (a test's end, a ``tracing()`` block's end, ``trace --max-pinned``);
- **a broken rule**: what the CUDA driver or the kernel documents as an error or as undefined
  (each cited beside its kind in ``RULES``).

Everything else is a fact: true, counted, kept in ``--json`` and the inspector, never "to look
at". The commonest: memory kept until a normal exit. The kernel closes every fd and unmaps every
mapping of a process at its exit ("All of the file descriptors, directory streams, conversion
descriptors, and message catalog descriptors open in the calling process are closed", exit(2)
via _exit(2); "The region is also automatically unmapped when the process is terminated",
munmap(2)), and the CUDA driver frees a context's resources when the process ends, so a browser
renderer that keeps its shared regions for its life, or a server that keeps the latest bucket
until it exits, leaks nothing.

**One problem, one finding**: a problem is per relation, ``Relation(problem, holder, exporter)``
(for a broken rule the problem is the rule's kind). A later finding of the same relation is an
update of the same problem (``Problems``): its pins and bytes summed over the segments and pins
it names, its duration the newest, its peak kept. A killed client's 4 GiB pool held by a server in
205 segments is one orphaned problem of 4 GiB in 205 pins, each pin still listed in ``--json``.
No words here: ``words/`` says each rule and each problem.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

from vmmtui.model.findings import Counted, FindingKind, Relation, Tally, Weight, proof_of

#: seconds a process may go on pinning memory after its exporter ended before that is a problem
#: (orphaned), for every kind of memory alike. Healthy teardowns measured on real programs (issue
#: 48): headless Chromium's processes held regions after their exporter ended for 3.5 to 65 ms at
#: shutdown, at most 154.5 ms; fds passed over many sockets (the torture run) were let go 0.1 to
#: 8 ms after their sender ended; two NCCL ranks on two H200s freed and closed each other's
#: legacy IPC memory 0.41 s apart (``model/handles.py``). 2 s is 13 times the
#: longest of them and said within 3 s of the exporter's end (the trace's clock ticks once a
#: second), so a leak is still named while it lasts.
TEARDOWN_WINDOW_S = 2.0
TEARDOWN_WINDOW_NS = int(TEARDOWN_WINDOW_S * 1e9)
#: how a hold after its exporter ended that let go inside the window, with no end of its own to
#: say, is said (``model/orphans.py``)
LET_GO = "let go"


class Problem(StrEnum):
    """The four kinds of problem: what a finding that fails a test is."""

    GROWTH = "growth"
    ORPHANED = "orphaned"
    OVER_BUDGET = "over budget"
    BROKEN_RULE = "broken rule"


class Fact(StrEnum):
    """What a quiet fact is counted under (``Tally.quiet_by``), where it is no received fd of a
    file that carries no memory (those are counted by the kind of file: socket, pipe…)."""

    #: memory (a received fd, a dup, a mapping) kept until the process's normal exit
    HELD_UNTIL_EXIT = "held until exit"
    #: a CUDA import, IPC open, pool or pool pointer the process's exit released
    RELEASED_BY_EXIT = "released by exit"
    #: the end, in the past, of a hold after the exporter ended
    RELEASED_LATE = "released after its exporter died"
    #: a legacy free its importer closed within the teardown window
    TORN_DOWN = "freed at teardown"
    #: a hold after the exporter ended that ended inside the teardown window
    WITHIN_WINDOW = "let go within the teardown window"
    #: a hold after the exporter ended still inside its window when the trace ended
    WINDOW_OPEN = "within the teardown window at the end"
    #: an export no process opened: the exporter's own memory, pinned by its own handle
    NEVER_IMPORTED = "exported, never imported"
    #: a process that shared memory ended (its holders are judged on their own)
    EXPORTER_ENDED = "exporter ended"
    #: a process polling could not read: nothing of it was judged
    NOT_READ = "not read"
    #: a socket file left behind: a path, no memory
    STALE_SOCKET = "stale socket file"
    #: a conclusion that records lost could overturn, of no kind known
    UNDECIDED = "undecided"
    #: an fd still queued when its receiver exited: the exit released the socket, and the
    #: kernel closed the fd with it (unix(7)); nothing of it is held
    QUEUED_AT_EXIT = "queued when its receiver exited"


@dataclass(frozen=True)
class Rule:
    """How one kind of finding weighs: good news, a problem (of which kind), or a fact (counted
    under ``fact``). ``timed``: a problem only once the hold it is about has lasted one teardown
    window (``TEARDOWN_WINDOW_S``), a fact (``Fact.WITHIN_WINDOW``) before."""

    kind: str
    weight: Weight
    problem: Problem | None = None
    fact: str = ""
    timed: bool = False


def _good(kind: str) -> Rule:
    return Rule(kind, Weight.GOOD)


def _problem(kind: str, problem: Problem, timed: bool = False) -> Rule:
    return Rule(kind, Weight.PROBLEM, problem, timed=timed)


def _fact(kind: str, fact: str) -> Rule:
    return Rule(kind, Weight.QUIET, fact=fact)


K = FindingKind
#: the one list: every kind of finding and how it weighs, the reason beside it. docs/testing.md's
#: table of kinds is checked against it (tests/model/test_policy.py).
RULES: tuple[Rule, ...] = (
    # -- good news: a share or an import, proven by the kernel's struct file, kcmp or the bytes
    _good(K.SHARED),
    _good(K.IMPORTED),
    # -- growth: "Each time a recipient process imports a shareable handle, it needs to pair it
    # with cuMemRelease" (CUDA Driver API, cuMemRelease): pins that rise round after round and
    # are never paired are a loop keeping what it is sent (model/growth.py decides the rounds)
    _problem(K.GROWTH, Problem.GROWTH),
    # polling's: one process's pins (fds and mappings) on another's memory rose at four polls
    # with none let go (trace/procfs/mappings.py): the same loop, as the polls saw it
    _problem(K.POSSIBLE_GROWTH, Problem.GROWTH),
    # -- orphaned: the memory lives while any fd or mapping of it does ("the memory allocation
    # will be freed when all outstanding mappings to the memory are unmapped and when all
    # outstanding references to the handle ... are also released", cuMemRelease; a memfd's
    # pages go with its last reference, memfd_create(2)); after its exporter ended past one
    # teardown window nothing will use it and nothing but the holder can free it
    _problem(K.HELD_AFTER_EXPORTER_DIED, Problem.ORPHANED, timed=True),
    _problem(K.POSSIBLE_HELD_AFTER_EXPORTER_DIED, Problem.ORPHANED, timed=True),
    # polling's: an fd (or NVML's GPU memory) a live process holds after every peer it shared
    # with ended (trace/procfs/leaks.py: seen at a poll after the peers' exit)
    _problem("fd-after-peer", Problem.ORPHANED, timed=True),
    _problem("possible-fd-after-peer", Problem.ORPHANED, timed=True),
    _problem("gpu-memory-after-peer", Problem.ORPHANED),
    # a /dev/shm file of a dead owner, or made while watched and left held by no process: "POSIX
    # shared memory objects have kernel persistence: a shared memory object will exist until the
    # system is shut down, or until all processes have unmapped the object and it has been
    # deleted with shm_unlink(3)" (shm_overview(7)): memory orphaned by a name no one unlinked
    _problem("shm-file", Problem.ORPHANED),
    # -- broken rules, each what the driver or the kernel documents as an error or undefined:
    # cuMemRelease with no reference left: "If handle is not a valid handle the behavior is
    # undefined" (cuMemRelease); cuIpcCloseMemHandle of a pointer already closed
    _problem(K.RELEASED_TWICE, Problem.BROKEN_RULE),
    # "Calling cuMemFree on an exported memory region before calling cuIpcCloseMemHandle in the
    # importing context will result in undefined behavior" (cuIpcOpenMemHandle); the book says
    # it only past its teardown window (model/handles.py), freed-at-teardown before
    _problem(K.FREED_WHILE_MAPPED, Problem.BROKEN_RULE),
    # a share the kernel or the driver refused (pidfd_getfd(2): EPERM where the caller may not
    # ptrace the target; a driver call that returned an error not made by design): the memory
    # did not cross
    _problem(K.REFUSED, Problem.BROKEN_RULE),
    # an fd left queued in a socket when a live process closed it: "file descriptors ... that
    # are in-flight ... are closed" when the socket goes (unix(7)), so the share was lost
    # unreceived; where the release was the receiver's exit (``how`` "exit": a utility process
    # that ends with a message on its way, as Chromium's do at shutdown) it is a fact
    # (``Fact.QUEUED_AT_EXIT``, ``judge``): the kernel closed the fd with the socket, nothing is held
    _problem(K.IN_FLIGHT, Problem.BROKEN_RULE),
    # "The CUDA Virtual Memory Management API functions do not support the legacy interprocess
    # communication functions with their memory" (CUDA Programming Guide, 14.3.1 Shareable
    # Memory Allocations): cuIpcGetMemHandle of cuMemMap'ed memory is refused
    _problem(K.LEGACY_EXPORT_OF_VMM, Problem.BROKEN_RULE),
    # a second cuIpcOpenMemHandle of one handle refused CUDA_ERROR_ALREADY_MAPPED: "Memory
    # handles ... can only be opened once per context per device per other process"
    # (cuIpcOpenMemHandle); a re-open the driver grants is a counted reference, no finding
    _problem(K.OPENED_TWICE, Problem.BROKEN_RULE),
    # -- facts: kept until a normal exit, and released by it (exit(2), munmap(2): the kernel
    # closes every fd and unmaps every mapping; the driver tears down the process's context)
    _fact(K.FD_NEVER_CLOSED, Fact.HELD_UNTIL_EXIT),
    _fact(K.HELD_AT_EXIT, Fact.HELD_UNTIL_EXIT),
    _fact("held-until-exit", Fact.HELD_UNTIL_EXIT),
    _fact("possible-held-until-exit", Fact.HELD_UNTIL_EXIT),
    # a received fd of a file that carries no memory (a socket, a pipe): counted by its kind
    _fact(K.FD_CLOSED_BY_EXIT, ""),
    # an import, an IPC open, a pool and a pool pointer released by the importer's exit: the
    # driver frees "all resources" of a context destroyed with its process (cuCtxDestroy), and
    # the exporter's memory is freed once every reference is gone (cuMemRelease)
    _fact(K.IMPORT_NEVER_RELEASED, Fact.RELEASED_BY_EXIT),
    _fact(K.IPC_NEVER_CLOSED, Fact.RELEASED_BY_EXIT),
    _fact(K.POOL_NEVER_DESTROYED, Fact.RELEASED_BY_EXIT),
    _fact(K.POOL_POINTER_NEVER_FREED, Fact.RELEASED_BY_EXIT),
    # an export no one opened pins only its exporter's own memory, by its own fd, released with
    # it (model/handles.py says it only while a copy of the fd is open): no other process holds
    # anything
    _fact(K.EXPORTED_NEVER_IMPORTED, Fact.NEVER_IMPORTED),
    # a process that shared memory ended: an end, not a leak (its holders weigh on their own)
    _fact(K.EXPORTER_DIED, Fact.EXPORTER_ENDED),
    # the past of a hold after the exporter ended: the problem, if it lasted, was said once
    _fact(K.RELEASED_AFTER_EXPORTER_DIED, Fact.RELEASED_LATE),
    # a legacy free its importer closed within the teardown window (model/handles.py)
    _fact(K.FREED_AT_TEARDOWN, Fact.TORN_DOWN),
    _fact(K.UNREADABLE, Fact.NOT_READ),
    # a socket file no live socket is bound to: a path that makes the next bind fail, no memory
    _fact("socket-file", Fact.STALE_SOCKET),
    # the budget's own finding (``verdict.api``, ``trace --max-pinned``)
    _problem(K.PINNED_OVER_BUDGET, Problem.OVER_BUDGET),
    # a conclusion records lost could overturn: weighed as what it would be (``was``), below
    _fact(K.UNKNOWN, Fact.UNDECIDED),
)
del K

BY_KIND: dict[str, Rule] = {r.kind: r for r in RULES}
#: the kinds that fail a test (``vmmtui.tracing``, ``pytest --vmmtui``)
FAILING = frozenset(r.kind for r in RULES if r.weight is Weight.PROBLEM)


def rule_of(kind: str, was: str = "") -> Rule:
    """The rule of ``kind``. An ``unknown`` weighs as what it would be without the records lost
    (``was``), except that good news never rests on them: a share not proven is a fact. A kind
    no rule names is a problem (nothing new is cleared unseen)."""
    if kind == FindingKind.UNKNOWN:
        if not was or was == FindingKind.UNKNOWN:
            return BY_KIND[FindingKind.UNKNOWN]
        r = rule_of(was)
        return BY_KIND[FindingKind.UNKNOWN] if r.weight is Weight.GOOD else r
    return BY_KIND.get(kind) or Rule(kind, Weight.PROBLEM, Problem.BROKEN_RULE)


def held_ns(f: Any) -> int | None:
    """How long the hold a timed finding is about had lasted when it was said: from its
    exporter's end (``since``) to the finding (``ktime``); None where not known (a recording made
    before the ledger waited the window)."""
    since, at = getattr(f, "since", 0) or 0, getattr(f, "ktime", 0) or 0
    return at - since if since and at >= since else None


class Judged(NamedTuple):
    """A finding weighed: its weight, the rule that decided it, what a problem is and what a fact
    is counted under."""

    weight: Weight
    rule: Rule
    problem: Problem | None = None
    fact: str = ""


def judge(f: Any) -> Judged:
    """The policy on one finding (a ``LedgerFinding``, a polling ``Leak``, anything with a
    ``kind``): a timed rule's hold that had not lasted one teardown window is a fact."""
    kind = str(f.kind)
    r = rule_of(kind, getattr(f, "was", "") or "")
    if r.timed or r.kind == FindingKind.RELEASED_AFTER_EXPORTER_DIED:
        held = held_ns(f)
        if held is not None and held < TEARDOWN_WINDOW_NS:  # ended (or last seen) inside it
            ended = not r.timed or getattr(f, "how", "") == LET_GO
            return Judged(Weight.QUIET, r, None, Fact.WITHIN_WINDOW if ended else Fact.WINDOW_OPEN)
    if kind == FindingKind.IN_FLIGHT and getattr(f, "how", "") == "exit":
        return Judged(Weight.QUIET, r, None, Fact.QUEUED_AT_EXIT)  # released by the exit
    if kind == FindingKind.UNKNOWN and r.weight is Weight.QUIET:  # counted as undecided
        return Judged(Weight.QUIET, r, None, Fact.UNDECIDED)
    return Judged(r.weight, r, r.problem, r.fact)


def weight(kind: str, was: str = "") -> Weight:
    """The weight of a finding of ``kind`` taken alone (its hold's length not known)."""
    return rule_of(kind, was).weight


def weigh(f: Any) -> Weight:
    """The weight of a finding."""
    return judge(f).weight


def relation_of(f: Any, j: Judged | None = None) -> Relation | None:
    """The relation a problem is about; None for good news and facts."""
    j = j or judge(f)
    if j.weight is not Weight.PROBLEM:
        return None
    what = str(j.problem) if j.problem is not Problem.BROKEN_RULE else str(j.rule.kind)
    holder = int(getattr(f, "pid", 0) or 0)
    alone = "" if holder else str(getattr(f, "what", "") or getattr(f, "file", ""))
    return Relation(what, holder, int(getattr(f, "peer", 0) or 0), alone)


def quiet_file(f: Any) -> str:
    """What a quiet fact is counted under (``Tally.quiet_by``): the rule's fact, or for a received
    fd of a file that carries no memory the kind of file."""
    return judge(f).fact or getattr(f, "name", "") or "other"


def counted_as(f: Any) -> Counted:
    """What a finding is counted by (``tally``'s keys)."""
    j = judge(f)
    if j.weight is Weight.GOOD:
        return Counted(str(f.kind), str(proof_of(f)), j.weight)
    if j.weight is Weight.QUIET:
        return Counted(str(f.kind), "", j.weight, j.fact or getattr(f, "name", "") or "other")
    return Counted(str(f.kind), "", j.weight, "", relation_of(f, j))


def tally(found: Iterable[Counted], counted: Mapping[Any, int] | None = None) -> Tally:
    """The count of ``found``, and of those ``counted`` already (``Counted`` -> how many: a long
    run's findings, counted as they came and no longer all kept). Problems are counted by
    relation: a hundred pins of one orphaned pool are one problem."""
    good = quiet = 0
    proofs: Counter[str] = Counter()
    files: Counter[str] = Counter()
    problems: set[object] = set()
    anonymous = 0
    for c, n in [*((c, 1) for c in found), *(counted or {}).items()]:
        if c.weight is Weight.GOOD:
            good += n
            proofs[c.proof] += n
        elif c.weight is Weight.QUIET:
            quiet += n
            files[c.file] += n
        elif getattr(c, "relation", None) is not None:
            problems.add(c.relation)
        else:
            anonymous += n
    return Tally(good, len(problems) + anonymous, dict(proofs), quiet, dict(files))


def problems_by_kind(counted: Mapping[Any, int]) -> dict[str, int]:
    """The problems among ``counted`` (``Counted`` -> how many), by kind, each relation once."""
    seen: dict[str, set[object]] = {}
    anonymous: Counter[str] = Counter()
    for c, n in counted.items():
        if c.weight is not Weight.PROBLEM:
            continue
        if c.relation is None:
            anonymous[c.kind] += n
        else:
            seen.setdefault(c.kind, set()).add(c.relation)
    out = {k: len(v) for k, v in seen.items()}
    for k, n in anonymous.items():
        out[k] = out.get(k, 0) + n
    return out


# -- over budget: its evidence (measured by ``pipeline.pinned``) ----------------------------------
@dataclass(frozen=True)
class FilePin:
    """A memory file a live process still holds: its fd, size and how it came."""

    pid: int
    fd: int
    size: int
    how: str


@dataclass(frozen=True)
class CudaPin:
    """CUDA memory of ``exporter`` that live importers still hold."""

    exporter: int
    thing: str
    key: int
    size: int
    holders: tuple[int, ...]


@dataclass(frozen=True)
class MappingPin:
    """A memory file a live process still maps (polling saw it arrive), its fd closed or not:
    mmap(2) says closing the fd does not unmap; the size is the mapping's length now."""

    pid: int
    path: str
    size: int
    how: str


Pin = FilePin | CudaPin | MappingPin


# -- one problem, one finding ----------------------------------------------------------------------
def _pin_of(f: Any) -> tuple:
    """What one pin of a problem is, so that a piece of memory said twice (its import, then its
    mapping; live, then again) is summed once: the exporter's own name for it where the finding
    has one (its allocation handle, its pointer), else the file, else the holder's handle,
    pointer and fd."""
    memory = str(getattr(f, "memory", ""))
    theirs = getattr(f, "peer_handle", 0) or getattr(f, "peer_ptr", 0)
    if theirs:
        return (memory, "exporter's", theirs)
    if file := getattr(f, "file", ""):
        return (memory, "file", file)
    return (memory, getattr(f, "handle", 0), getattr(f, "ptr", 0), getattr(f, "fd", -1))


@dataclass
class ProblemSeen:
    """One problem, as its findings have told it so far: its relation, the kinds of finding that
    made it, its pins (each once) and their bytes, when it began and when it was last said, and
    the peak of its bytes and pins. ``first`` is its first finding, ``newest`` the latest."""

    relation: Relation
    first: Any
    newest: Any
    kinds: Counter[str] = field(default_factory=Counter)
    pins: dict[tuple, int] = field(default_factory=dict)
    #: pins let go since (a released-after-exporter-died of the same relation), the last of them
    released: int = 0
    ended: Any = None
    since: int = 0
    until: int = 0
    peak_bytes: int = 0
    peak_pins: int = 0
    findings: int = 0

    @property
    def bytes(self) -> int:
        return sum(self.pins.values())

    @property
    def held_ns(self) -> int:
        return max(0, self.until - self.since) if self.since else 0


class Problems:
    """Every problem of a run, one per relation, folded from its findings in order: a finding of a
    relation already seen updates it (its pins and bytes summed, its duration the newest, its
    peak kept); the end of a hold after the exporter died (``released-after-exporter-died``, a
    fact) ends its pins."""

    def __init__(self) -> None:
        self.by: dict[Relation, ProblemSeen] = {}

    def __len__(self) -> int:
        return len(self.by)

    def __iter__(self) -> Iterator[ProblemSeen]:
        return iter(self.by.values())

    def add(self, f: Any) -> ProblemSeen | None:
        """Fold one finding: the problem it made or updated, or None (good news, a fact)."""
        kind = str(getattr(f, "kind", ""))
        if kind == FindingKind.RELEASED_AFTER_EXPORTER_DIED:
            return self._released(f)
        j = judge(f)
        rel = relation_of(f, j)
        if rel is None:
            return None
        p = self.by.get(rel)
        if p is None:
            p = self.by[rel] = ProblemSeen(rel, f, f)
        p.newest = f
        p.findings += 1
        p.kinds[kind] += 1
        size = int(getattr(f, "size", 0) or 0)
        pin = _pin_of(f)
        p.pins[pin] = max(size, p.pins.get(pin, 0))
        since = int(getattr(f, "since", 0) or 0)
        if since and (not p.since or since < p.since):
            p.since = since
        at = int(getattr(f, "ktime", 0) or 0)
        p.until = max(p.until, at)
        p.peak_bytes = max(p.peak_bytes, p.bytes)
        p.peak_pins = max(p.peak_pins, len(p.pins))
        return p

    def _released(self, f: Any) -> ProblemSeen | None:
        rel = Relation(Problem.ORPHANED, int(getattr(f, "pid", 0)), int(getattr(f, "peer", 0)))
        p = self.by.get(rel)
        if p is None:
            return None
        p.released += 1
        p.ended = f
        p.until = max(p.until, int(getattr(f, "ktime", 0) or 0))
        return p

    @staticmethod
    def over(p: ProblemSeen) -> bool:
        """Whether every pin of the problem has been let go since (its end said in the past)."""
        return p.ended is not None and p.released >= len(p.pins)

    def extend(self, found: Iterable[Any]) -> Problems:
        for f in found:
            self.add(f)
        return self
