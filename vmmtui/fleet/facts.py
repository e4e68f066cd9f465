"""What a node agent reports: the run's world (``model.world``: who exported, sent, took,
imported and released what), read, and counts of the one event stream it is fed.

The world is the run's own, folded once by the trace session (``TraceSession(world=...)``): the
facts never fold it again, they read it. The findings are the stream's own (the trace session's,
as the end line and ``--json`` count them), never found a second time here. Polling's
events add what only a scan of ``/proc`` and ``/dev/shm`` can see (leaked shm and socket files,
NVML's charge). The exporters (Prometheus,
OpenTelemetry) read :class:`SharingFacts` and nothing else, so a recording replays into the same
numbers as the live agent. No Textual and no prometheus-client here: the numbers are plain data.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from vmmtui.model.findings import Weight
from vmmtui.model.gpu_ledger import of_world
from vmmtui.model.ledger import Allocation, Ledger
from vmmtui.model.policy import relation_of, weigh
from vmmtui.model.world import World
from vmmtui.stream.events import Event, FdOpened, Leak, ProcessSeen, ProcessUnreadable, SharedFile
from vmmtui.stream.names import shown
from vmmtui.stream.observed import (
    CallRefused,
    LedgerFinding,
    PinnedBytes,
    ProcessExec,
    ProcessExit,
    ProcessForked,
    TraceLost,
    TraceStarted,
)
from vmmtui.trace.identity import identity_of

#: the refusal reasons a label may take (a bounded set: anything else is "other")
REASONS = ("seccomp", "yama", "pid-namespace", "capability", "uid", "bad-fd", "cuda", "other")


@dataclass(frozen=True)
class ProcessLabel:
    """How a process is named in metrics: its host pid, its command name and the container (the
    cgroup it runs in), each read once, sanitised (a process names itself)."""

    pid: int
    comm: str
    container: str

    def labels(self) -> tuple[str, str, str]:
        return (str(self.pid), self.comm, self.container)


def container_of(pid: int, proc: Path = Path("/proc")) -> str:
    """The container of ``pid`` (``docker 3f2a1b4c5d6e``, ``pod <uid>/containerd 3f2a1b4c5d6e``:
    one value per container, bounded) or, where no runtime's cgroup is found, its cgroup path
    shortened to its last two parts (``system.slice/x.service``); ``""`` when unreadable."""
    who = identity_of(pid, proc)
    return shown(who.container.label(), 120) if who.container else who.cgroup


def refusal_reason(e: CallRefused) -> str:
    """One word of :data:`REASONS` for a refusal, from the first check that failed."""
    for check in e.checks:
        if check.ok is False:
            name = check.name.lower()
            for reason in ("seccomp", "yama", "capability", "uid"):
                if reason in name:
                    return reason
            if "namespace" in name or "pidns" in name:
                return "pid-namespace"
    if e.errno in ("EBADF", "ESRCH"):
        return "bad-fd"
    return "other"


@dataclass
class SharingFacts:
    """The node's sharing ledger as numbers. ``feed`` every event of the run's stream (after
    ``world`` folded it: the run's session feeds its sinks so), read the fields."""

    #: the run's world, folded by its session (a reader in another thread holds ``world.lock``)
    world: World = field(default_factory=World)
    mode: str = ""  # ebpf | polling
    events: int = 0
    lost: int = 0
    refused: Counter[tuple[str, str]] = field(default_factory=Counter)  # (call, reason)
    #: pid → received fds of memory (``model.findings.carries_memory``) held until exit
    never_closed: Counter[int] = field(default_factory=Counter)
    #: conclusions records lost could overturn, said as unknown (by the kind they would have been)
    unknown: int = 0
    #: fds sent and left queued when their socket was released (the kernel's word)
    in_flight: int = 0
    imports: Counter[int] = field(default_factory=Counter)  # importer pid → imports
    imported_bytes: Counter[int] = field(default_factory=Counter)
    leaked_files: Counter[str] = field(default_factory=Counter)  # shm-file | socket-file
    #: attach: fds kcmp proved to be another process's open file (how it travelled is not seen)
    polled_transfers: int = 0
    #: attach: open files polling proved shared by two or more processes (kcmp), by kind
    polled_shares: Counter[str] = field(default_factory=Counter)
    procs: dict[int, ProcessLabel] = field(default_factory=dict)
    proc_root: Path = Path("/proc")
    #: every finding of the run by kind (shares included): the stream's, and polling's leftover
    #: files and unreadable processes; the count ``TraceFinished.findings`` says
    findings: Counter[str] = field(default_factory=Counter)
    #: the same findings by weight (``model.findings.Weight``: good, problem, quiet): "problem"
    #: is the end line's "to look at", each problem once (``model.policy``: one per relation,
    #: however many pins it has)
    weights: Counter[str] = field(default_factory=Counter)
    problems: set = field(default_factory=set)
    #: exporter pid → the bytes its exported memory pins now (the stream's ``PinnedBytes``)
    pinned: dict[int, int] = field(default_factory=dict)

    def feed(self, e: Event) -> None:
        self.events += 1
        if isinstance(e, TraceStarted):
            self.mode = e.mode
        if isinstance(e, TraceLost):
            self.lost += e.count
        if isinstance(e, PinnedBytes):
            self.pinned[e.pid] = e.bytes
        elif isinstance(e, LedgerFinding):
            self._finding(e)
        elif isinstance(e, ProcessUnreadable):
            self.findings["unreadable"] += 1
            self.weights[Weight.QUIET] += 1  # a fact: nothing of it was judged
        elif isinstance(e, CallRefused):
            self.refused[(shown(e.call, 40), refusal_reason(e))] += 1
        elif isinstance(e, ProcessForked):
            self._label(e.child, e.comm)
        elif isinstance(e, ProcessExec | ProcessExit):
            self._label(e.pid, e.comm, refresh=isinstance(e, ProcessExec))
        elif isinstance(e, ProcessSeen):
            self.mode = self.mode or "polling"
            self._label(e.pid, e.name)
        elif isinstance(e, Leak):
            self.findings[str(e.kind)] += 1
            self._weigh(e)
            if e.kind in ("shm-file", "socket-file"):
                self.leaked_files[e.kind] += 1
        elif isinstance(e, FdOpened) and e.how == "arrived":
            self.polled_transfers += 1
        elif isinstance(e, SharedFile) and len({h.pid for h in e.holders}) >= 2:
            self.polled_shares[shown(e.kind, 16)] += 1

    @property
    def ledger(self) -> Ledger:
        """The world's ledger (read, never folded here)."""
        return self.world.ledger

    def finish(self) -> None:
        """The run ended: nothing to settle here (the run's session finished its world; the
        end's findings came in the stream)."""

    def lost_by_cpu(self) -> dict[int, int]:
        """Records lost on each CPU (-1: a loss whose CPU is not known)."""
        return dict(self.ledger.losses.by_cpu)

    def _weigh(self, f: LedgerFinding | Leak) -> None:
        w = weigh(f)
        if w is Weight.PROBLEM:
            rel = relation_of(f)
            if rel in self.problems:
                return  # another pin of a problem counted once
            self.problems.add(rel)
        self.weights[w] += 1

    def _finding(self, f: LedgerFinding) -> None:
        self.findings[f.kind] += 1
        self._weigh(f)
        if f.kind == "unknown":
            self.unknown += 1
        elif f.kind == "in-flight":
            self.in_flight += 1
        elif f.kind == "fd-never-closed":
            self.never_closed[f.pid] += 1
        elif f.kind == "imported":
            self.imports[f.pid] += 1
            a = self.ledger.allocation_of_file(f.file) if f.file else None
            self.imported_bytes[f.pid] += a.size if a else 0
        elif f.kind == "refused" and f.cuda is not None:
            self.refused[(shown(f.cuda.func, 40), "cuda")] += 1

    def _label(self, pid: int, comm: str, refresh: bool = False) -> ProcessLabel:
        known = self.procs.get(pid)
        if known is None or refresh or (comm and not known.comm):
            known = ProcessLabel(
                pid,
                shown(comm or (known.comm if known else ""), limit=32),
                known.container if known else container_of(pid, self.proc_root),
            )
            self.procs[pid] = known
        return known

    def label(self, pid: int) -> ProcessLabel:
        if pid in self.procs:
            return self.procs[pid]
        rec = self.ledger.procs.get(pid)
        return self._label(pid, rec.comm if rec else "")

    # -- the figures the exporters publish ------------------------------------------------------
    def allocations(self) -> list[Allocation]:
        return list(self.ledger.allocations.values())

    def exported(self) -> dict[int, tuple[int, int]]:
        """Exporter pid → (allocations exported, bytes), counted since the agent started."""
        out: dict[int, tuple[int, int]] = {}
        for a in self.allocations():
            if a.exported:
                n, b = out.get(a.pid, (0, 0))
                out[a.pid] = (n + 1, b + a.size)
        return out

    def imported(self) -> dict[int, tuple[int, int]]:
        """Importer pid → (imports, bytes of the allocations they imported), counted as they
        happen (VMM imports and legacy IPC opens; bytes only where the exporter was traced)."""
        return {pid: (n, self.imported_bytes[pid]) for pid, n in self.imports.items()}

    def live_importers(self) -> dict[int, int]:
        """Exporter pid → processes holding an unreleased import of its memory now."""
        out: dict[int, set[int]] = {}
        for a in self.allocations():
            for imp in a.imports:
                if imp.released_at is None:
                    out.setdefault(a.pid, set()).add(imp.pid)
        return {pid: len(s) for pid, s in out.items()}

    def orphaned_bytes(self) -> dict[int, int]:
        """Importer pid → bytes it holds of allocations whose exporter has exited."""
        out: dict[int, int] = {}
        for a in self.allocations():
            exporter = self.ledger.procs.get(a.pid)
            if exporter is None or exporter.alive:
                continue
            for imp in a.imports:
                if imp.released_at is None:
                    out[imp.pid] = out.get(imp.pid, 0) + a.size
        return out

    def transfers(self) -> Counter[str]:
        """fds moved between processes, by how: SCM_RIGHTS, pidfd_getfd (traced), or "polled"
        (an fd that polling found to be another process's open file, road unseen)."""
        out: Counter[str] = Counter({str(how): n for how, n in self.ledger.transfers.by.items()})
        if self.polled_transfers:
            out["polled"] = self.polled_transfers
        return out

    def gpu_pinned(self) -> dict[tuple[str, str, str, str], int]:
        """(gpu, holder, creator, creator alive) → bytes the holder pins of the creator's memory on
        that GPU now (the GPU ledger: VMM, legacy IPC; the creator "0" where it was not seen)."""
        out: Counter[tuple[str, str, str, str]] = Counter()
        for gpu, row in of_world(self.world).rows():
            for s in row.shares:
                alive = "true" if s.creator_alive else "false"
                out[(str(gpu.index), str(row.pid), str(s.creator), alive)] += s.bytes
        return dict(out)

    def gpu_charged(self) -> dict[tuple[str, str], int]:
        """(gpu, pid) → the bytes NVML charges the process there, in its newest reading."""
        return {
            (str(gpu.index), str(row.pid)): row.charged
            for gpu, row in of_world(self.world).rows()
            if row.charged is not None
        }
