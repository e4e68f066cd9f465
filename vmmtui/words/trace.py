"""The words for the trace's events and the ledger's findings, written once (console, --json
readers' transcripts, the attach view's log). Names from the traced processes go through
``vmmtui.stream.names.shown``. No Textual: rich ``Text`` with semantic styles."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.text import Text

from vmmtui.model.ends import End
from vmmtui.model.findings import Weight
from vmmtui.model.policy import weigh
from vmmtui.model.probes import classify
from vmmtui.stream.events import AttachEvent, Event, Notice
from vmmtui.stream.names import shown
from vmmtui.stream.observed import (
    CallRefused,
    CapabilityProbe,
    CudaCall,
    FdCloseCall,
    FdDuplicated,
    FdsDropped,
    FdsReceived,
    FdsSent,
    FdTaken,
    FileSized,
    LedgerFinding,
    MemfdCreated,
    MemoryMapped,
    MemoryUnmapped,
    PidfdOpened,
    ProcessExec,
    ProcessExit,
    ProcessForked,
    ProcessIdentity,
    QueuedAtRelease,
    TraceCall,
    TraceEvent,
    TraceFinished,
    TraceLost,
    TraceStarted,
    base_name,
)
from vmmtui.stream.sizes import format_size
from vmmtui.words.cuda import CUDA_ERRORS
from vmmtui.words.programs import end_words, handle_type_names, road_words, socket_words
from vmmtui.words.refusals import worded as refusal_words

if TYPE_CHECKING:  # the demo's own record (view/kernel.py) is folded from these words' events
    from vmmtui.model.ledger import Ledger
    from vmmtui.view.kernel import KernelFact

FINDING_STYLES = {
    "shared": ("✓", "green"),
    "imported": ("✓", "green"),
    "refused": ("✗", "bold red"),
}


def _errno(v: int) -> str:
    import errno
    import os

    return f"-{errno.errorcode.get(-v, str(-v))} ({os.strerror(-v)})"


def _result(v: int) -> str:
    return _errno(v) if v < 0 else str(v)


def _file(f: str) -> str:
    return f" [file {f}]" if f else ""


def not_read(n: int) -> str:
    """Fds a record did not hold: said, and nothing is claimed about them."""
    return f"{n} more fd{'s' if n != 1 else ''} not read" if n > 0 else ""


def _more(n: int) -> str:
    return f" (+{not_read(n)})" if n > 0 else ""


def clock(t: int, t0: int) -> str:
    """A kernel timestamp as the trace's lines show it: seconds since the trace began."""
    return f"{(t - t0) / 1e9:.4f} s" if t0 and t >= t0 else f"{t / 1e9:.4f} s (kernel clock)"


def lost_words(count: int, first: int, last: int, t0: int = 0) -> str:
    """The one wording of a loss: how many records, and between when (the kernel's clock)."""
    n = f"{count} record{'s' if count != 1 else ''} lost"
    if not first:
        return f"{n} (when is not known)"
    return f"{n} between {clock(first, t0)} and {clock(last, t0)}"


def call_words(e: Event) -> str | None:
    """What the call did, in one phrase (None: not a call)."""
    if isinstance(e, FdsSent):
        kinds = [f" {k}" if k else "" for k in e.kinds] or [""] * len(e.fds)
        fds = ", ".join(
            f"{fd}{k}{_file(f)}" for fd, f, k in zip(e.fds, e.files, kinds, strict=False)
        )
        return (
            f"{e.call} over {shown(socket_words(e.sock))}: SCM_RIGHTS fd {fds}"
            f"{_more(e.fds_not_read)} → {_result(e.result)}"
        )
    if isinstance(e, FdsReceived):
        fds = ", ".join(f"{fd}{_file(f)}" for fd, f in zip(e.fds, e.files, strict=False))
        return (
            f"{e.call} over {shown(socket_words(e.sock))}: SCM_RIGHTS → new fd {fds}"
            f"{_more(e.fds_not_read)}"
        )
    if isinstance(e, QueuedAtRelease):
        files = ", ".join(e.files)
        return (
            f"socket released with {e.count} SCM_RIGHTS fd{'s' if e.count != 1 else ''} still "
            f"queued (never received): file {files}{_more(e.count - len(e.files))}"
        )
    if isinstance(e, FdsDropped):
        files = ", ".join(e.files)
        return (
            f"{e.call}() on a unix socket (inode {e.sock.ino}) took a message carrying "
            f"{e.count} SCM_RIGHTS fd{'s' if e.count != 1 else ''} and had no room for them: the "
            f"kernel closed them (never received): file {files}{_more(e.count - len(e.files))}"
        )
    if isinstance(e, PidfdOpened):
        return f"pidfd_open({e.target}) → {'pidfd ' + str(e.fd) if e.fd >= 0 else _errno(e.fd)}"
    if isinstance(e, FdTaken):
        got = f"fd {e.fd}{_file(e.file)}" if e.fd >= 0 else _errno(e.fd)
        return f"pidfd_getfd(pidfd {e.pidfd} = pid {e.target or '?'}, fd {e.target_fd}) → {got}"
    if isinstance(e, FdCloseCall):
        if e.call == "close_range":
            return f"close_range({e.fd}, {e.last}) → {_result(e.result)}"
        if e.call == "exec":
            return f"exec closed fd {e.fd}{_file(e.file)} (close-on-exec)"
        return f"close({e.fd}){_file(e.file)} → {_result(e.result)}"
    if isinstance(e, MemoryMapped):
        what = f" {shown(e.kind)}" if e.kind else ""
        how = _SHARING.get(e.flags & 3, "")
        got = f"{e.addr:#x}" if e.result == 0 else _errno(e.result)
        return f"mmap(fd {e.fd}{what}{_file(e.file)}, {format_size(e.length)}{how}) → {got}"
    if isinstance(e, MemoryUnmapped):
        return _unmap_words(e)
    if isinstance(e, FileSized):
        return f"ftruncate(fd {e.fd}{_file(e.file)}, {format_size(e.size)}) → {_result(e.result)}"
    if isinstance(e, FdDuplicated):
        return (
            f"{e.call}({e.old}) → {'fd ' + str(e.fd) if e.fd >= 0 else _errno(e.fd)}{_file(e.file)}"
        )
    if isinstance(e, MemfdCreated):
        got = f"fd {e.fd}{_file(e.file)}" if e.fd >= 0 else _errno(e.fd)
        return f'memfd_create("{shown(e.name)}") → {got}'
    if isinstance(e, ProcessForked):
        return f"fork → pid {e.child} (followed)"
    if isinstance(e, ProcessExec):
        return f"exec {shown(e.filename)}"
    if isinstance(e, ProcessExit):
        return f"exit: {end_words(End.of_status(e.code))}"
    if isinstance(e, CudaCall):
        return cuda_words(e)
    return None


#: mmap's sharing type (flags & 3)
_SHARING = {1: ", shared", 2: ", private", 3: ", shared"}


def _unmap_words(e: MemoryUnmapped) -> str:
    """munmap, mremap, or an mmap(MAP_FIXED) landing on what was mapped (the kernel unmaps it)."""
    if e.call == "mremap":
        got = f"{e.new_addr:#x}, {format_size(e.new_length)}" if e.result == 0 else _errno(e.result)
        return f"mremap({e.addr:#x}, {format_size(e.length)}) → {got}"
    if e.call == "mmap":
        return f"mmap(MAP_FIXED) over {e.addr:#x}, {format_size(e.length)}: what was mapped there is unmapped"
    return f"{e.call}({e.addr:#x}, {format_size(e.length)}) → {_result(e.result)}"


def cuda_words(e: CudaCall) -> str:
    f = base_name(e.func)
    res = "CUDA_SUCCESS" if e.result == 0 else CUDA_ERRORS.get(e.result, f"CUresult {e.result}")
    args = ""
    if f == "cuMemCreate":
        args = f"{format_size(e.size)}, device {e.device}, {'+'.join(handle_type_names(e.handle_types))} → handle {e.handle:#x}"
    elif f == "cuMemExportToShareableHandle":
        out = f"fd {e.fd}" if e.fd >= 0 else (f"fabric {e.ipc[:16]}…" if e.ipc else "-")
        args = f"handle {e.handle:#x}, {'+'.join(handle_type_names(e.handle_types))} → {out}"
    elif f == "cuMemImportFromShareableHandle":
        args = f"fd {e.fd} → handle {e.handle:#x}"
    elif f == "cuMemMap":
        args = f"{e.ptr:#x}, {format_size(e.size)}, handle {e.handle:#x}"
    elif f in ("cuMemUnmap", "cuMemSetAccess"):
        args = f"{e.ptr:#x}, {format_size(e.size)}" + (
            f", device {e.device}, flags {e.flags}" if f == "cuMemSetAccess" else ""
        )
    elif f == "cuMemRelease":
        args = f"handle {e.handle:#x}"
    elif f == "cuMemRetainAllocationHandle":
        args = f"{e.ptr:#x} → handle {e.handle:#x} (one more reference)"
    elif f == "cuIpcGetMemHandle":
        args = f"{e.ptr:#x} → handle {e.ipc[:16]}…"
    elif f == "cuIpcOpenMemHandle":
        args = f"handle {e.ipc[:16]}… → {e.ptr:#x}"
    elif f in ("cuIpcCloseMemHandle", "cuMemFree"):
        args = f"{e.ptr:#x}"
    elif f == "cuMemAlloc":
        args = f"{format_size(e.size)} → {e.ptr:#x}"
    elif f == "cuMemPoolCreate":
        args = (
            f"device {e.device}, {'+'.join(handle_type_names(e.handle_types))} → pool {e.handle:#x}"
        )
    elif f == "cuMemAllocFromPoolAsync":
        args = f"{format_size(e.size)}, pool {e.handle:#x} → {e.ptr:#x}"
    elif f == "cuMemPoolExportToShareableHandle":
        out = f"fd {e.fd}" if e.fd >= 0 else "-"
        args = f"pool {e.handle:#x}, {'+'.join(handle_type_names(e.handle_types))} → {out}"
    elif f == "cuMemPoolImportFromShareableHandle":
        args = f"fd {e.fd} → pool {e.handle:#x}"
    elif f == "cuMemPoolExportPointer":
        args = f"{e.ptr:#x} → export data {e.ipc[:16]}…"
    elif f == "cuMemPoolImportPointer":
        args = f"pool {e.handle:#x}, export data {e.ipc[:16]}… → {e.ptr:#x}"
    elif f == "cuMemFreeAsync":
        args = f"{e.ptr:#x}"
    elif f == "cuMemPoolDestroy":
        args = f"pool {e.handle:#x}"
    return f"{e.func}({args}) → {res} ({e.duration_ns / 1e3:.0f} µs)"


#: what a probe found, by (capability, found): ``vmmtui.model.probes`` decides which
PROBE_FOUND = {
    ("fabric-handles", "no-imex-channel"): "fabric handles unavailable here: no IMEX channel",
    ("fabric-handles", "imex-refused"): (
        "fabric handles unavailable here: an IMEX channel is there but the IMEX daemon refused "
        "(is nvidia-imex running?)"
    ),
    ("fabric-handles", "not-supported"): (
        "fabric handles unavailable here: this driver or GPU has none"
    ),
}
PROBE_ASKED = {"fabric-handles": "asked for a fabric-handle allocation"}


def probe_words(e: CapabilityProbe) -> str:
    """A probe in one phrase: what the call asked, the driver's answer, what that tells."""
    res = CUDA_ERRORS.get(e.result, f"CUresult {e.result}")
    asked = PROBE_ASKED.get(e.capability, f"probed {shown(e.capability, 40)}")
    found = PROBE_FOUND.get((e.capability, e.found), shown(e.found, 80))
    return (
        f"{shown(e.call, 40)} {asked} → {res}: {found} (a capability probe, as PyTorch and NCCL "
        "make before falling back to POSIX fds; nothing to fix)"
    )


def who(pid: int, comm: str = "") -> str:
    return f"{shown(comm, 16)}[{pid}]" if comm else f"[{pid}]"


def lines(e: Event, t0: int = 0, comm: str = "") -> list[Text]:
    """The lines for one event (a call, a finding, the start or the end)."""
    if isinstance(e, TraceStarted):
        how = "eBPF" if e.mode == "ebpf" else "polling /proc"
        out = [
            Text(
                f"vmmtui trace: {how}, {'every process' if e.everything else 'pids ' + ', '.join(map(str, e.targets)) if e.targets else shown(' '.join(e.command))}",
                "bold",
            )
        ]
        out += [Text(f"  probes: {shown(p, 400)}", "dim") for p in e.probes]
        out += [Text(f"  not probed: {shown(p, 400)}", "yellow") for p in e.unprobed]
        return out
    if isinstance(e, ProcessIdentity):
        from vmmtui.words.narration import identity_words

        where = identity_words(e.container, e.pod, e.inner_pid)
        return [Text(f"    pid {e.pid}: {where}", "dim")] if where else []
    if isinstance(e, CapabilityProbe):
        return [Text(f"    · probe: pid {e.pid} {probe_words(e)}", "dim")]
    if isinstance(e, LedgerFinding):
        from vmmtui.words.findings import finding_words

        mark, style = FINDING_STYLES.get(e.kind, ("⚠", "yellow"))
        w = finding_words(e)
        if weigh(e) is Weight.QUIET and e.kind != "unknown":  # a fact: dim
            return [Text(f"    · {e.kind}: pid {e.pid} {w.what}: {shown(w.detail, 400)}", "dim")]
        if e.kind == "unknown":
            text = Text(
                f"    ? unknown: {lost_words(e.lost, e.lost_first_ns, e.lost_last_ns, t0)}: "
                f"pid {e.pid} {w.what}: {shown(w.detail, 400)}",
                "yellow",
            )
        else:
            text = Text(f"    {mark} {e.kind}: pid {e.pid} {w.what}: {shown(w.detail, 400)}", style)
        if e.road or e.exported_as:
            text.append(f" · {road_words(e.road, e.exported_as, e.imported_as)}", "cyan")
        if w.fix:
            text.append(f" — fix: {w.fix}", "dim")
        return [text]
    if isinstance(e, CallRefused):  # said once: by the ledger's ``refused`` finding it brings
        return []
    if isinstance(e, TraceLost):
        cpu = f" on CPU {e.cpu}" if e.cpu >= 0 else ""
        return [
            Text(
                f"⚠ {lost_words(e.count, e.t_first_ns, e.t_last_ns, t0)}{cpu} (the ring buffer was "
                "full): what they may have changed is said as unknown, never as a leak",
                "bold yellow",
            )
        ]
    if isinstance(e, TraceFinished):
        how = (
            f"signal {e.signal}"
            if e.signal
            else (f"exit {e.returncode}" if e.returncode is not None else "")
        )
        counted = (
            f"{e.events} calls in {e.seconds:.1f} s, {e.lost} lost"
            if e.mode == "ebpf"
            else f"{e.events} events from polling in {e.seconds:.1f} s"
        )
        return [
            Text(
                f"vmmtui trace: {counted}, "
                f"{e.findings} finding{'s' if e.findings != 1 else ''}"
                + _weighed(e.problems, e.quiet, e.quiet_by)
                + (f"; the command ended with {how}" if how else ""),
                "bold",
            )
        ]
    if isinstance(e, AttachEvent | Notice) and not isinstance(e, TraceEvent):
        from vmmtui.words.narration import (
            attach_lines,
        )  # what polling (and the trace's frame 0) saw

        return attach_lines(e)
    words = call_words(e)
    if words is None or not isinstance(e, TraceCall):
        return []
    t = (e.ktime - t0) / 1e9 if t0 and e.ktime >= t0 else 0.0
    style = "red" if _failed(e) else ""
    return [Text(f"{t:9.4f} {who(e.pid, comm):>24} {words}", style)]


def _failed(e: Event) -> bool:
    if isinstance(e, CudaCall):  # a probe failed by design: not shown as a failure
        return e.result != 0 and classify(e.func, e.handle_types, e.result) is None
    for name in ("fd", "result"):
        v = getattr(e, name, 0)
        if isinstance(v, int) and v < 0 and not (name == "fd" and isinstance(e, FdCloseCall)):
            return True
    return False


def _weighed(problems: int, quiet: int, quiet_by: dict[str, int]) -> str:
    """The end line's weights: `` (3 to look at; 45 other received fds held until exit (…))``."""
    from vmmtui.words.findings import quiet_words

    said = [f"{problems} to look at" if problems else "", quiet_words(quiet, quiet_by)]
    said = [x for x in said if x]
    return f" ({'; '.join(said)})" if said else ""


def worth_a_line(e: Event, ledger: Ledger) -> bool:
    """Plain output, as the view, leaves out closes and dups of fds of no interest (the ledger's
    one rule: ``Ledger.matters``) and the quiet facts (counted on the end line) but the end of a
    hold after its exporter died (the line that puts the warning above it in the past), and says
    the close of a pidfd too; --json and --record keep every call and finding. ``ledger`` is the
    state before ``e``."""
    if isinstance(e, LedgerFinding):  # the end of a hold after its exporter died: its past tense
        from vmmtui.model.policy import Fact, judge

        j = judge(e)  # a hold let go inside the teardown window had no warning to end; what
        # records lost leave undecided is said where it falls
        return j.weight is not Weight.QUIET or j.fact in (Fact.RELEASED_LATE, Fact.UNDECIDED)
    if not isinstance(e, TraceCall):
        return True
    if isinstance(e, FdCloseCall) and e.call != "close_range" and (e.pid, e.fd) in ledger.pidfds:
        return True
    return ledger.matters(e)


@dataclass
class ProcessNames:
    """The trace's clock origin and the name it knows for each process, from the forks, execs and
    exits it saw: the live trace and the replay of its recording name processes alike."""

    t0: int = 0
    comms: dict[int, str] = field(default_factory=dict)

    def see(self, e: Event) -> None:
        if isinstance(e, TraceStarted):
            self.t0 = e.ktime0
        elif isinstance(e, ProcessForked):
            self.comms[e.child] = e.comm
        elif isinstance(e, ProcessExec):
            self.comms[e.pid] = e.comm
        elif isinstance(e, ProcessExit) and not self.comms.get(e.pid):
            self.comms[e.pid] = e.comm  # gone from /proc by now: the kernel's name at exit


@dataclass
class OncePerProblem:
    """The text says each problem once (``model.policy``: one per relation): a later finding of a
    relation already said (another segment of one orphaned pool, a growth that grew on) and
    every end but the first of its pins are left to ``--json`` and counted at the end, where the
    problem is said whole (``problems_words``)."""

    said: set = field(default_factory=set)
    folded: int = 0

    def first(self, e: Event) -> bool:
        if not isinstance(e, LedgerFinding):
            return True
        from vmmtui.model.policy import relation_of

        key = (
            ("released", e.pid, e.peer)
            if e.kind == "released-after-exporter-died"
            else relation_of(e)
        )
        if key is None:
            return True
        if key in self.said:
            self.folded += 1
            return False
        self.said.add(key)
        return True


def problems_words(found: Sequence[LedgerFinding], per_kind: int = 5) -> list[str]:
    """The end's line for each problem of many findings, whole: ``held-after-exporter-died ·
    pid 806: holds 4 GiB in 205 pins of pid 805's memory, 5.6 s after pid 805 ended`` (at most
    ``per_kind`` of a kind, then how many more)."""
    from vmmtui.model.policy import Problems
    from vmmtui.words.findings import words_of
    from vmmtui.words.verdict import one_problem

    out: list[str] = []
    shown: dict[str, int] = {}
    for p in Problems().extend(found):
        if p.findings <= 1:
            continue  # said whole where it came
        kind = str(p.first.kind)
        shown[kind] = shown.get(kind, 0) + 1
        if shown[kind] <= per_kind:
            w = one_problem(words_of(p.newest), p)
            out.append(f"  {kind} · pid {p.relation.holder}: {w.what} ({p.findings} findings)")
    for kind, n in shown.items():
        if n > per_kind:
            out.append(f"  +{n - per_kind} more {kind} (--json has them)")
    return out


@dataclass
class Bystanders:
    """The text leaves out processes that only fork, exec and exit (a shell, a pyenv shim, a
    wrapper script): their lifecycle lines wait until the process does something worth a line,
    and are then shown first (the fork, and only the program it runs now: the last exec); a
    process that exits having done nothing else is counted, not shown. --json and recordings keep
    every event."""

    waiting: dict[int, list[Event]] = field(default_factory=dict)
    shown: set[int] = field(default_factory=set)
    #: the processes traced by name (the command, -p pids): their program and exit are shown
    targets: set[int] = field(default_factory=set)
    #: processes that came and went without a line
    hidden: int = 0

    def see(self, e: Event) -> list[Event]:
        """The events to show now for ``e`` (none, ``e``, or the lines that waited, then ``e``).

        The command's own program (a target's last exec) goes out before any later line of
        another process, so that the text keeps the kernel's order: it waited for the command's
        exit, and an exec at 0.14 s came after another process's exit at 3.15 s."""
        out = self._see(e)
        if not out or isinstance(e, TraceStarted | TraceFinished):
            return out
        early: list[Event] = []
        for pid in sorted(self.targets):
            if pid not in self.shown and self.waiting.get(pid):
                early += self.waiting.pop(pid)
                self.shown.add(pid)
        return [*early, *out]

    def _see(self, e: Event) -> list[Event]:
        if isinstance(e, TraceStarted):
            self.targets = set(e.targets)
            return [e]
        if isinstance(e, ProcessExit) and e.pid in self.targets and e.pid not in self.shown:
            return [*self.waiting.pop(e.pid, []), e]
        if isinstance(e, TraceFinished):  # the targets still running: the program they run
            return [x for p in sorted(self.targets) for x in self.waiting.pop(p, [])] + [e]
        if isinstance(e, ProcessIdentity) and e.pid not in self.shown:  # said with its calls
            self.waiting.setdefault(e.pid, []).append(e)
            return []
        if isinstance(e, ProcessForked):
            if e.child not in self.shown:
                self.waiting.setdefault(e.child, []).append(e)
                return []
            return [e]
        if isinstance(e, ProcessExec | ProcessExit) and e.pid not in self.shown:
            waits = self.waiting.setdefault(e.pid, [])
            if isinstance(e, ProcessExec):
                waits[:] = [x for x in waits if not isinstance(x, ProcessExec)] + [e]
            else:
                del self.waiting[e.pid]
                self.hidden += 1
            return []
        pid = getattr(e, "pid", None)
        if not isinstance(e, TraceCall | CallRefused) or pid is None or pid in self.shown:
            return [e]
        self.shown.add(pid)
        return [*self.waiting.pop(pid, []), e]

    def words(self) -> str:
        n = self.hidden
        if not n:
            return ""
        return (
            f"{n} process{'es' if n != 1 else ''} only forked, ran a program and exited (a shell, "
            "a wrapper): not shown; --json shows every call"
        )


# -- the demo's own workers: the kernel's record beside each step ------------------------------------
#: the calls a step's kernel line shows first: an fd arriving (with where it came from) tells most
_TELLING = (FdsReceived, FdTaken, FdsSent, MemfdCreated, CudaCall, PidfdOpened, CallRefused)


def _whose(role: str, pid: int) -> str:
    return role or f"pid {pid}"


def kernel_fact(fact: KernelFact) -> Text:
    """One fact of the kernel's record of a demo worker (``vmmtui.view.kernel.KernelFact``):
    ``kernel: producer sendmsg SCM_RIGHTS fd 5 → consumer fd 5 (recvmsg), same struct file``.
    "same struct file" is said only where the kernel's file identity matched, never by number."""
    e, role = fact.event, fact.role
    pid = getattr(e, "pid", 0)
    me = _whose(role, pid)
    if isinstance(e, FdsReceived) and fact.sources and all(fact.sources):
        parts = []
        rehearsal = False
        for fd, src in zip(e.fds, fact.sources, strict=False):
            assert src is not None  # all() above
            to = "itself as fd" if src.pid == pid else f"{me} fd"
            rehearsal = rehearsal or src.pid == pid
            parts.append(
                f"{_whose(src.role, src.pid)} {src.call} SCM_RIGHTS fd {src.fd} → {to} {fd} "
                f"({e.call}), same struct file"
            )
        # a worker that sends an fd to itself is rehearsing the share on a socketpair of its
        # own (the round trip the step times) before any peer is involved: said, so that it does
        # not read as the share itself
        why = (
            " (the worker's rehearsal of the send, on a socketpair of its own)" if rehearsal else ""
        )
        return Text("kernel: " + "; ".join(parts) + why + _more(e.fds_not_read), "yellow")
    if isinstance(e, FdsReceived):
        return Text(
            f"kernel: {me} {e.call}: SCM_RIGHTS → new fd {', '.join(map(str, e.fds))}"
            f"{_more(e.fds_not_read)} (its send was not seen)",
            "yellow",
        )
    if isinstance(e, FdTaken) and e.fd >= 0 and fact.sources and fact.sources[0] is not None:
        src = fact.sources[0]
        return Text(
            f"kernel: {me} pidfd_getfd({_whose(src.role, src.pid)} fd {e.target_fd}) → fd "
            f"{e.fd}, same struct file",
            "yellow",
        )
    if isinstance(e, FdsSent):
        fds = ", ".join(map(str, e.fds))
        refused = f" → {_errno(e.result)}" if e.result < 0 else ""
        return Text(
            f"kernel: {me} {e.call} SCM_RIGHTS fd {fds}{_more(e.fds_not_read)} over "
            f"{shown(socket_words(e.sock))}{refused}",
            "red" if refused else "yellow",
        )
    if isinstance(e, TraceLost):
        return Text("kernel: ") + lines(e)[0]
    if isinstance(e, CallRefused):  # its own line is the ledger's finding, which a step has not
        return Text(
            f"kernel: {me} {e.call} refused ({e.errno}): {shown(refusal_words(e)[0])}", "red"
        )
    words = call_words(e)
    return Text(f"kernel: {me} {words or type(e).__name__}", "red" if _failed(e) else "yellow")


def kernel_step_line(facts: Sequence[KernelFact]) -> Text | None:
    """The line beside a step: its most telling fact, and how many more the log holds."""
    kept = kernel_step_facts(facts)
    if not kept:
        return None
    text = kernel_fact(kept[0])
    if len(kept) > 1:
        text.append(f" (+{len(kept) - 1} more in the log)", "dim")
    return text


def plumbing_left_out(count: int, backend: str = "cuda", start: bool = False) -> str:
    """A step's lines without the driver's and the runtime's own churn (``KernelFact.plumbing``:
    the files it opens and closes, the mappings of its device files, the helpers it runs): how
    many, whose, and where they are. ``start``: the worker's first step, where the driver starts."""
    calls = "call" if count == 1 else "calls"
    if backend == "cuda":
        whose = "the CUDA driver's start-up" if start else "the CUDA driver"
        return f"kernel: +{count} {calls} of {whose} on its own files, in --json"
    whose = "the worker's runtime starting up" if start else "the worker's runtime"
    return (
        f"kernel: +{count} {calls} of {whose} (Python, its libraries) on its own files, in --json"
    )


def kernel_line_left_out(step: int) -> str:
    """The teaching panel's border where the kernel's line of ``step`` had no row: where it is."""
    return f"+ kernel's record of step {step} (in the event log)"


def kernel_step_facts(facts: Sequence[KernelFact]) -> list[KernelFact]:
    """The facts a step's line shows, the most telling first: a send whose struct file arrived
    in the same step is told by its receive."""
    arrived = {
        file
        for f in facts
        if isinstance(f.event, FdsReceived) and f.sources and all(f.sources)
        for file in f.event.files
    }
    kept = [
        f
        for f in facts
        if not f.plumbing
        and not (isinstance(f.event, FdsSent) and f.event.files and set(f.event.files) <= arrived)
    ]

    def rank(f: KernelFact) -> int:
        kinds = [k for k, cls in enumerate(_TELLING) if isinstance(f.event, cls)]
        return kinds[0] if kinds else len(_TELLING)

    return sorted(kept, key=rank)


def kernel_started(e: TraceStarted, roles: dict[int, str]) -> Text:
    """The record's start in the demo: which workers it follows, and what it cannot see."""
    who_ = ", ".join(f"{roles.get(p, 'pid')} pid {p}" for p in e.targets) or "no worker yet"
    text = Text(
        f"kernel: eBPF follows {who_} from here on (calls before this line were not recorded)",
        "yellow",
    )
    for p in e.unprobed:
        text.append(f"; not probed: {shown(p, 200)}", "dim")
    return text


def kernel_finished(e: TraceFinished) -> Text:
    lost = f", {e.lost} lost: what they showed is not known" if e.lost else ", none lost"
    return Text(f"kernel: {e.events} calls of the workers recorded{lost}; probe detached", "yellow")
