"""The words for every event, written once: the console, the transcript, the event log and the
app's status line all say what happened through these functions.

Each function returns a ``rich.text.Text`` whose styles are semantic (green: proven, red: wrong,
yellow: the kernel or a note, dim: routine); a renderer without colour uses ``.plain``. Values that
change from run to run (pids, addresses, timings) pass through a ``Masks`` so that the inspector's
``--stable`` mode can hide them; ``PLAIN`` shows them as they are. No Textual here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from rich.text import Text

from vmmtui.plan.config import SEED_SHAPE, Mechanism
from vmmtui.plan.steps import CONSUMER, PRODUCER, kind
from vmmtui.stream.events import (
    FdRow,
    FdSnapshot,
    KcmpVerdict,
    Notice,
    ScenarioOutcome,
    SessionClosed,
    SessionFailed,
    SessionFinished,
    SessionStarted,
    WorkerExited,
    WorkerStarted,
)
from vmmtui.stream.names import shown
from vmmtui.stream.sizes import format_size
from vmmtui.stream.values import Ack, Call, Verification
from vmmtui.view.model import Flight, How, PanelState, PanelView, Peer
from vmmtui.words.notices import text_of
from vmmtui.words.troubleshooting import close_fix, said, with_words, worded

VERIFIED = "VERIFIED"
NOT_VERIFIED = "NOT VERIFIED"
#: who speaks when the line is the kernel's (kcmp), not a worker's
KERNEL = "kernel"
ROLE_STYLES = {PRODUCER: "cyan", CONSUMER: "medium_purple1", KERNEL: "yellow"}
SIGNS = {True: "≡", False: "≢", None: "?"}
KCMP_STYLES = {True: "bold green", False: "bold red", None: "yellow"}
CLEAN = "Closed cleanly: no workers, no socket directory left"


class Masks(Protocol):
    """How volatile values are shown (the TUI's ``Display`` masks them in ``--stable`` mode)."""

    def text(self, s: str) -> str: ...

    def pid(self, pid: int | None) -> str: ...

    def ms(self, ns: int | None) -> str: ...


class Plain:
    """Every value as it is: the console and the transcript."""

    def text(self, s: str) -> str:
        return s

    def pid(self, pid: int | None) -> str:
        return "-" if pid is None else str(pid)

    def ms(self, ns: int | None) -> str:
        return "" if ns is None else f"{ns / 1e6:.3f} ms"


PLAIN = Plain()


# -- who ---------------------------------------------------------------------------------------------
def role_style(role: str) -> str:
    """A role's colour: ``consumer-2`` … are coloured like ``consumer``."""
    return ROLE_STYLES.get(kind(role), "")


# -- the verdicts ------------------------------------------------------------------------------------
def verdict(verified: bool, failed: SessionFailed | None = None) -> Text:
    """The session's one result: ``VERIFIED``, ``FAILED at consumer cleanup (FD_LEAK)`` or ``NOT
    VERIFIED``. A session that failed says where, once: its data may have verified before (the
    consumer's "verification PASSED" is the step's, not the session's)."""
    if failed is not None:
        return Text(f"{failed_at(failed)} ({failed.failure.code})", "bold red")
    return Text(VERIFIED, "bold green") if verified else Text(NOT_VERIFIED, "bold red")


def verification(v: Verification) -> Text:
    """A check's result in short: ``PASSED 262144 integers verified`` or what differed."""
    if v.passed:
        return Text.assemble(("PASSED ", "bold green"), f"{v.checked} integers verified")
    text = Text.assemble(("FAILED ", "bold red"), f"{v.mismatches} of {v.checked} differ")
    if v.first_index is not None:
        text.append(
            f"\nfirst at index {v.first_index}: expected 0x{v.first_expected:08x}, "
            f"got 0x{v.first_got:08x}"
        )
    return text


def verification_word(v: Verification) -> str:
    return "PASSED" if v.passed else "FAILED"


#: when kcmp answered, where the words cannot name the step (a session's end: the plan's cleanup
#: steps closed the fds after the last answer)
BEFORE_CLEANUP = "before cleanup"


def kcmp_when(step: int | None) -> str:
    """When kcmp answered a claim about fds closed since: ``at step 21`` or ``before cleanup``."""
    return BEFORE_CLEANUP if step is None else f"at step {step}"


def kcmp_verdict(
    v: KcmpVerdict, past: bool = False, step: int | None = None, terse: bool = False
) -> Text:
    """The kernel's answer on one exported/received pair: ``producer fd 5 ≡ consumer fd 5: …``.

    ``past``: either fd has closed since kcmp answered, so the answer is said as what it was and
    when (``step``, see ``kcmp_when``): "are" would be a claim about fds no process holds. Where
    the words stand beside a "kcmp" label (the wire, the end lines); ``terse``: the status line's,
    which has no label and no room (``… ≡ consumer fd 5 at step 21 (kcmp; closed)``).
    """
    pair = f"producer fd {v.producer_fd} {SIGNS[v.same]} {v.consumer} fd {v.consumer_fd}"
    if not past or v.same is None:  # "unavailable" says nothing of the fds now
        return Text(f"{pair}: {v.detail}", KCMP_STYLES[v.same])
    if terse:
        return Text(f"{pair} {kcmp_when(step)} (kcmp; closed)", KCMP_STYLES[v.same])
    what = "the same open file description" if v.same else "different open file descriptions"
    return Text(f"{pair} were {what} ({kcmp_when(step)})", KCMP_STYLES[v.same])


def kcmp_pair_note(v: KcmpVerdict, role: str) -> str:
    """The note beside ``role``'s fd of the pair in its fd table (`` ≡ producer 5``), or ''."""
    sign = SIGNS[v.same]
    if role == PRODUCER:
        return f" {sign} {v.consumer} {v.consumer_fd}"
    if role == v.consumer:
        return f" {sign} {PRODUCER} {v.producer_fd}"
    return ""


def kcmp_line(v: KcmpVerdict) -> Text:
    return Text(f"kcmp(KCMP_FILE): {kcmp_verdict(v).plain}", "bold")


def kcmp_summary(
    verdicts: Iterable[KcmpVerdict],
    mechanism: str = Mechanism.VMM,
    consumers: int | None = None,
    past: bool = False,
    step: int | None = None,
) -> Text:
    """What kcmp proved for the whole session, from ``SessionFinished.kcmp`` or the verdicts seen so far.

    One verdict: the verdict itself; several: how many consumers' fds are the producer's open file
    description, out of ``consumers`` (or the verdicts given); legacy IPC: why there is nothing to
    compare. ``past`` and ``step``: as ``kcmp_verdict``'s, once any of the fds has closed.
    """
    found = list(verdicts)
    if mechanism == Mechanism.LEGACY:
        return Text(
            "no fd travelled (legacy IPC handle: 64 plain bytes), so there is nothing for kcmp to compare",
            "dim",
        )
    if not found:
        return Text("not checked", "dim")
    if len(found) == 1:
        return kcmp_verdict(found[0], past, step)
    same = sum(1 for v in found if v.same)
    total = max(consumers or 0, len(found))
    style = "bold green" if same == total else "bold red"
    if past:
        return Text(
            f"{same}/{total} consumers' fds were the producer's open file description "
            f"({kcmp_when(step)})",
            style,
        )
    return Text(f"{same}/{total} consumers' fds are the producer's open file description", style)


class Repeats:
    """Remembers the last kcmp wording per consumer so that the 4 Hz refresh is told once."""

    def __init__(self) -> None:
        self.last: dict[str, str] = {}

    def new(self, v: KcmpVerdict) -> bool:
        text = kcmp_verdict(v).plain
        if self.last.get(v.consumer) == text:
            return False
        self.last[v.consumer] = text
        return True

    def clear(self) -> None:
        self.last.clear()


# -- one function per event --------------------------------------------------------------------------
def started(e: SessionStarted, m: Masks = PLAIN) -> list[Text]:
    lines = [
        Text(f"backend: {e.reason}", "bold"),
        Text(f"socket: {m.text(shown(e.socket_path))} (private directory, mode 0700)", "dim"),
    ]
    if (e.mechanism, len(e.consumers), e.direction) != SEED_SHAPE:
        devices = (
            ", ".join(f"{n} on device {d}" for n, d in e.devices.items())
            if e.backend == "cuda"
            else ""
        )
        lines.append(
            Text(
                f"mechanism: {e.mechanism} · {len(e.consumers)} consumer(s) · {e.direction}"
                + (f" · {devices}" if devices else ""),
                "bold",
            )
        )
    if e.transport == "pidfd":
        lines.append(
            Text(
                "transport: pidfd — the producer sends its pid and the fd's number; the consumer "
                "takes the fd with pidfd_open + pidfd_getfd (PyTorch's expandable segments' road)",
                "bold",
            )
        )
    return lines


def worker_started(e: WorkerStarted, m: Masks = PLAIN) -> Text:
    return Text(f"worker started, pid {m.pid(e.pid)}", "dim")


def notice(e: Notice, m: Masks = PLAIN) -> Text:
    """``note: …``, with the cause and fix of the failed call it is about, if any."""
    return Text(m.text(f"note: {with_words(text_of(e), e.failure)}"), "yellow")


#: a recvmsg result of recordings made before the message's own size was kept: the number is the
#: allocation's size, which never travelled over the socket
_OLD_RECVMSG = re.compile(r"^fds (\[[\d, ]*\]), (\d+) bytes$")


def call_result(c: Call) -> str:
    """A call's result as a student should read it (an old recording's recvmsg reworded)."""
    old = _OLD_RECVMSG.match(c.result) if c.name == "recvmsg" else None
    if old is None:
        return c.result
    return f"fds {old[1]} + metadata naming a {old[2]}-byte allocation (message size not recorded)"


def call(c: Call, m: Masks = PLAIN) -> Text:
    """One driver or system call: ``cuMemCreate(size=…) → 0x…  0.123 ms``."""
    args = ", ".join(f"{k}={v}" for k, v in c.args.items())
    line = Text(c.name, "bold" if c.ok else "bold red")
    line.append(m.text(f"({args}) → {call_result(c)}"), "" if c.ok else "red")
    line.append(f"  {m.ms(c.duration_ns)}", "dim")
    return line


def log_line(line: str, m: Masks = PLAIN) -> Text:
    """A worker's own log line (the seed's wording, real values)."""
    return Text(m.text(line), "red" if line.startswith("ERROR") else "green")


def fd_problem(role: str, r: FdRow) -> Text:
    return Text(f"fd check: {role} fd {r.fd} {r.check}: {shown(r.detail, 400)}", "red")


def fd_table(e: FdSnapshot, m: Masks = PLAIN) -> Text:
    """One fd table in a line: how many fds, how many the worker declared, what did not match."""
    if e.error:
        return Text(f"{e.role} fd table unavailable: {m.text(e.error)}", "yellow")
    declared = [r for r in e.rows if r.check]
    bad = e.problems
    head = f"{e.role} (pid {m.pid(e.pid)}) fd table: {len(e.rows)} fds, {len(declared)} declared, "
    if not bad:
        return Text(head + "all match /proc")
    return Text(
        head
        + f"{len(bad)} PROBLEM(S): "
        + "; ".join(f"fd {r.fd} {r.check} {shown(r.detail, 400)}" for r in bad),
        "red",
    )


def failed_at(e: SessionFailed) -> str:
    """``FAILED at consumer cleanup``: where a session failed, in the words of every place."""
    return f"FAILED at {e.role} {e.step}"


def failed(e: SessionFailed, m: Masks = PLAIN) -> list[Text]:
    """The failed step, the real error, its cause and its fix."""
    f = e.failure
    lines = [
        Text(
            m.text(f"{failed_at(e)}: {f.call} → {f.code} ({said(f)})"),
            "bold red",
        )
    ]
    cause, fix = worded(f)
    lines.append(Text(m.text(f"  cause: {cause}")))
    lines.append(Text(m.text(f"  fix:   {fix}")))
    return lines


def exited(e: WorkerExited, m: Masks = PLAIN) -> Text:
    """``consumer (pid 123) killed by SIGKILL`` or ``… exited with code 1``: a worker's end in
    the words of a traced program's (``words.programs.end_words``)."""
    how = _ended(e.returncode, e.signal)
    return Text(m.text(f"{e.role} (pid {e.pid}) {how}"), "dim" if e.expected else "bold red")


def exit_state(e: WorkerExited) -> str:
    """The process panel's state after an exit: ``killed by SIGKILL``, ``exited with code 1``."""
    return _ended(e.returncode, e.signal)


def log_tail(e: WorkerExited, m: Masks = PLAIN) -> list[Text]:
    return [Text(m.text(f"log: {line}"), "dim") for line in e.log_tail]


def fd_cross_check(checks: int, problems: int) -> Text:
    """The end lines' count of the declared fds checked against /proc."""
    if problems:
        return Text(f"fd cross-check: {problems} problem(s) in {checks} checks", "red")
    return Text(f"fd cross-check: {checks}/{checks} match /proc")


def finished(e: SessionFinished, consumers: int | None = None) -> Text:
    """The result: VERIFIED or not, how much, the fd cross-check and kcmp's summary."""
    line = verdict(e.verified)
    if e.verified:
        line.append(f" {e.integers} integers ({format_size(e.integers * 4)})", "")
    line.append(f" · {fd_cross_check(e.fd_checks, e.fd_problems).plain} · kcmp: ", "")
    # the plan's cleanup steps have run: the fds kcmp compared are closed
    line.append(kcmp_summary(e.kcmp, e.mechanism, consumers, past=True).plain, "")
    return line


def closing(mechanism: str, plan: Iterable[tuple[str, str]], transport: str = "scm-rights") -> str:
    """What a plan that ran to its end showed, true to that plan: a scenario that kills a worker
    drops its cleanup, and then the kernel, not the worker, released what it held."""
    how = (
        "The 64-byte IPC handle went producer → socket → consumer as plain bytes (no fd), "
        if mechanism == Mechanism.LEGACY
        else "The consumer took the producer's fd with pidfd_getfd (only a pid and a number "
        "travelled), "
        if transport == "pidfd"
        else "The pool's fd went producer → SCM_RIGHTS → consumer with the pointer's 64 bytes, "
        if mechanism == Mechanism.POOL
        else "The fd went producer → SCM_RIGHTS → consumer, "
    )
    plan = list(plan)
    order = [role for role, step in plan if step == "cleanup"]
    if order and order[0] == PRODUCER and len(order) > 1:  # importer-pins: the exporter went first
        return (
            how
            + "both mapped the same physical memory; the producer released everything first and "
            "the memory lived on in the consumer until its own release."
        )
    roles = list(dict.fromkeys(role for role, _ in plan))
    cleaned = {role for role, step in plan if step == "cleanup"}
    skipped = [role for role in roles if role not in cleaned]
    if not skipped:
        return (
            how
            + "both mapped the same physical memory, and every resource was released in reverse order."
        )
    them = " and ".join(skipped)
    rest = " and ".join(r for r in roles if r in cleaned)
    return (
        how
        + f"both mapped the same physical memory. The {them} ran no cleanup: the kernel released "
        f"what {'it' if len(skipped) == 1 else 'each'} held (fds, mappings) when it died"
        + (
            f"; the {rest} released {'its' if len(roles) - len(skipped) == 1 else 'their'} own in reverse order."
            if rest
            else "."
        )
    )


def closed(e: SessionClosed, m: Masks = PLAIN) -> Text:
    return (
        Text(CLEAN, "dim")
        if e.clean
        else Text(m.text("left behind: " + "; ".join(e.leftovers)), "bold red")
    )


def outcome(e: ScenarioOutcome) -> Text:
    """How a scenario ended against its promise."""
    where = f" at {e.at}" if e.at else ""
    judged = (
        "as expected" if e.as_expected else f"NOT as expected (expected {', '.join(e.expected)})"
    )
    return Text(
        f"scenario {e.name}: ended with {e.outcome}{where}: {judged}",
        "bold green" if e.as_expected else "bold red",
    )


# -- attach and watch --------------------------------------------------------------------------------
from vmmtui.stream.events import (  # noqa: E402  (attach's events, added after the session's)
    AttachEvent,
    Event,
    FdClosed,
    FdOpened,
    GpuMemory,
    Leak,
    MappingGone,
    MappingSeen,
    PreflightCheck,
    ProcessGone,
    ProcessSeen,
    ProcessUnreadable,
    SharedFile,
    SocketPair,
    WatchFinished,
)

#: what each kind of shared file is, for people
#: (a /dev/nvidia* fd is a driver file; only kcmp against another process can say it is a shared one)
KIND_LABELS = {
    "gpu": "NVIDIA device fd",
    "memfd": "memfd",
    "shm": "/dev/shm file",
    "socket": "socket",
    "dmabuf": "dma-buf",
    "pidfd": "pidfd",
}
CHECK_MARKS = {True: ("✓", "green"), False: ("✗", "bold red"), None: ("–", "dim")}


def _mib(n: int) -> str:
    return f"{n / (1 << 20):.0f} MiB" if n >= 1 << 20 else f"{n} B"


def identity_words(container: str, pod: str, inner_pid: int | None) -> str:
    """Where a process runs, as /proc/PID/cgroup and NSpid say: "" when neither says anything."""
    parts = []
    if pod:
        parts.append(f"pod {shown(pod, 40)}")
    if container:
        parts.append(f"container {shown(container, 80)}")
    if inner_pid is not None:
        parts.append(f"pid {inner_pid} in its own PID namespace")
    return ", ".join(parts)


def process_seen(e: ProcessSeen, m: Masks = PLAIN) -> Text:
    who = identity_words(e.container, e.pod, e.inner_pid)
    return Text(
        m.text(
            f"{e.at:6.2f}s  pid {e.pid} {shown(e.name)} started or first seen (parent {e.ppid}"
            f"{'; ' + who if who else ''}): {shown(e.cmdline, 120)}"
        ),
        "dim",
    )


def process_gone(e: ProcessGone, m: Masks = PLAIN) -> Text:
    how = _ended(e.returncode, e.signal)
    return Text(m.text(f"{e.at:6.2f}s  pid {e.pid} {shown(e.name)} {how}"), "dim")


def unreadable(e: ProcessUnreadable) -> Text:
    return Text(f"pid {e.pid}: {e.reason}", "yellow")


def fd_opened(e: FdOpened, m: Masks = PLAIN) -> Text:
    line = Text(
        m.text(
            f"{e.at:6.2f}s  pid {e.pid} fd {e.fd} → {shown(e.target)} ({KIND_LABELS.get(e.kind, e.kind)}) "
        )
    )
    if e.how == "arrived" and e.source is not None:
        src = f"pid {e.source.pid}" + (f" fd {e.source.fd}" if e.source.fd >= 0 else "")
        line.append(m.text(f"ARRIVED from {src}"), "bold green")
        if e.via:
            line.append(m.text(f" — {e.via}"), "dim")
    elif e.how == "inherited" and e.source is not None:
        line.append(m.text(f"inherited from its parent {e.source.pid} fd {e.source.fd}"), "cyan")
    elif e.source is not None:  # unknown, or present at attach: shared, origin not seen
        src = f"pid {e.source.pid}" + (f" fd {e.source.fd}" if e.source.fd >= 0 else "")
        said = "direction unknown" if e.how == "unknown" else "found at attach"
        what = "open file" if e.source.fd >= 0 else "memory"
        line.append(m.text(f"{e.how}: the same {what} as {src}"), "yellow")
        line.append(m.text(f" — {e.via or said}"), "dim")
    else:
        line.append(e.how, "dim")
    return line


def mapping_seen(e: MappingSeen, m: Masks = PLAIN) -> Text:
    label = KIND_LABELS.get(e.kind, e.kind)
    line = Text(
        m.text(f"{e.at:6.2f}s  pid {e.pid} maps {shown(e.path)} ({label}, {format_size(e.size)}) ")
    )
    if e.how == "arrived" and e.source is not None:
        line.append(m.text(f"ARRIVED from pid {e.source}"), "bold green")
    elif e.how == "inherited" and e.source is not None:
        line.append(m.text(f"inherited from its parent {e.source}"), "cyan")
    elif e.source is not None:
        said = "direction unknown" if e.how == "unknown" else "found at attach"
        line.append(m.text(f"{e.how}: the same memory as pid {e.source}"), "yellow")
        line.append(m.text(f" — {said}"), "dim")
    elif e.how == "opened":
        line.append("its own, as far as the polls saw (no other process held it first)", "dim")
    else:
        line.append(str(e.how), "dim")
    if e.via:
        from vmmtui.words.polling import via_words

        line.append(m.text(f" — {via_words(e)}"), "dim")
    return line


def mapping_gone(e: MappingGone, m: Masks = PLAIN) -> Text:
    return Text(m.text(f"{e.at:6.2f}s  pid {e.pid} unmapped {shown(e.path)}"), "dim")


def fd_closed(e: FdClosed, m: Masks = PLAIN) -> Text:
    return Text(m.text(f"{e.at:6.2f}s  pid {e.pid} fd {e.fd} → {shown(e.target)} closed"), "dim")


def shared_file(e: SharedFile, m: Masks = PLAIN) -> Text:
    label = KIND_LABELS.get(e.kind, e.kind)
    if e.kind == "gpu":
        # an exported VMM allocation reads /dev/nvidiactl like the driver's own fds; one open file in two
        # processes is either that, or a driver fd inherited across fork: kcmp cannot tell which
        label = (
            "GPU fd, one open file in both (an exported allocation, or a driver fd inherited across fork)"
            if e.same_description
            else "GPU driver file"
        )
    sign = {True: " ≡ ", False: " ~ ", None: " ? "}[e.same_description]
    who = sign.join(f"pid {h.pid} fd {h.fd}" for h in e.holders) or "no fd left"
    line = Text(m.text(f"SHARED {label} {shown(e.target)}: {who}"), KCMP_STYLES[e.same_description])
    if e.mapped_by:
        line.append(m.text(f"; mapped by pid {', '.join(map(str, e.mapped_by))}"), "")
    line.append(f" ({e.proof})", "dim")
    return line


def socket_pair(e: SocketPair, m: Masks = PLAIN) -> Text:
    return Text(
        m.text(
            f"pid {e.a.pid} fd {e.a.fd} ⇄ pid {e.b.pid} fd {e.b.fd}: Unix {e.type} socket "
            f"{shown(e.path) if e.path else '(unnamed pair)'}"
        ),
        "dim",
    )


def gpu_memory(e: GpuMemory, m: Masks = PLAIN) -> Text:
    if e.error:
        return Text(f"pid {m.pid(e.pid)} GPU memory: {e.error}", "yellow")
    used = (
        ", ".join(
            f"GPU {d}{' ' + shown(e.uuids[d], 60) if d in e.uuids else ''}: {_mib(b)}"
            for d, b in sorted(e.used.items())
        )
        or "none charged"
    )
    return Text(f"pid {m.pid(e.pid)} GPU memory (NVML): {used}", "")


def preflight(e: PreflightCheck) -> list[Text]:
    from vmmtui.words.preflight import worded

    mark, style = CHECK_MARKS[e.ok]
    finding, cause, fix = worded(e)
    lines = [Text.assemble((f"{mark} ", style), (f"{e.name}: ", "bold"), finding)]
    if cause:
        lines.append(Text(f"    cause: {cause}"))
    if fix:
        lines.append(Text(f"    fix:   {fix}"))
    return lines


def leak(e: Leak) -> list[Text]:
    from vmmtui.model.findings import Weight
    from vmmtui.model.policy import Fact, judge
    from vmmtui.words.findings import words_of

    said = words_of(e)
    j = judge(e)
    if j.weight is Weight.QUIET:  # a fact (``model/policy.py``): nothing to act on, said dim
        if j.fact in (Fact.HELD_UNTIL_EXIT, Fact.RELEASED_BY_EXIT, ""):
            return [
                Text(
                    f"· {e.kind}: {said.what}: {said.detail} (a fact: the exit released it)", "dim"
                )
            ]
        fact = Text(f"· {e.kind}: {said.what}: {said.detail} (a fact: {j.fact}, no memory)", "dim")
        return [fact, Text(f"    fix: {said.fix}", "dim")] if said.fix else [fact]
    if e.kind.startswith("possible-"):  # polling's: what it cannot see may overturn it
        head = Text(f"POSSIBLE LEAK ({e.kind[9:]}) {said.what}: {said.detail}", "yellow")
    else:
        head = Text(f"LEAK ({e.kind}) {said.what}: {said.detail}", "bold red")
    return [head, Text(f"    fix: {said.fix or close_fix(e.memory)}")]


def watch_finished(e: WatchFinished) -> list[Text]:
    how = _ended(e.returncode, e.signal)
    what = f"{shown(' '.join(e.command), 100)}: {how}" if e.command else "polling ended"
    lines = [
        Text(
            f"{what} after {e.seconds:.2f} s · {e.processes} process(es) · "
            f"{e.shared} shared file(s) · {e.leaks} possible leak(s)",
            "bold yellow" if e.leaks else "bold",
        )
    ]
    lines += [Text(f"  not visible from outside: {u}", "yellow") for u in e.unseen]
    return lines


def attach_lines(e: Event, m: Masks = PLAIN) -> list[Text]:
    """Any event attach or watch emits, in words (one or more lines)."""
    simple: dict[type[Event], Callable[[Any, Masks], Text]] = {
        ProcessSeen: process_seen,
        ProcessGone: process_gone,
        FdOpened: fd_opened,
        FdClosed: fd_closed,
        MappingSeen: mapping_seen,
        MappingGone: mapping_gone,
        SharedFile: shared_file,
        SocketPair: socket_pair,
        GpuMemory: gpu_memory,
    }
    many: dict[type[Event], Callable[[Any, Masks], list[Text]]] = {
        PreflightCheck: lambda x, _m: preflight(x),
        Leak: lambda x, _m: leak(x),
        WatchFinished: lambda x, _m: watch_finished(x),
    }
    if type(e) in simple:
        return [simple[type(e)](e, m)]
    if type(e) in many:
        return many[type(e)](e, m)
    if isinstance(e, ProcessUnreadable):
        return [unreadable(e)]
    if isinstance(e, Notice):
        return [notice(e)]
    if isinstance(e, FdSnapshot):
        head = Text(
            m.text(
                f"{shown(e.role)} (pid {e.pid}): {len(e.rows)} fd(s) that can carry memory or fds"
            ),
            "bold",
        )
        return [head] + [
            Text(
                m.text(
                    f"    fd {r.fd:>4} {r.kind:<6} {shown(r.target)}  {r.note}  {r.detail}".rstrip()
                )
            )
            for r in e.rows
        ]
    if isinstance(e, KcmpVerdict):
        return [
            Text(
                f"kcmp(KCMP_FILE): pid {e.producer_pid} fd {e.producer_fd} {SIGNS[e.same]} pid {e.consumer_pid} "
                f"fd {e.consumer_fd}: {e.detail}",
                KCMP_STYLES[e.same],
            )
        ]
    return [Text(f"{type(e).__name__}", "dim")] if not isinstance(e, AttachEvent) else []


def _ended(returncode: int | None, signal: str | None) -> str:
    """How a worker or a polled process ended, in the one wording of a process's end
    (``words.programs.end_words``; imported when the first process ends, not for the first
    frame)."""
    from vmmtui.model.ends import End
    from vmmtui.words.programs import end_words

    return end_words(End.of_exit(returncode, signal))


# -- the wire of the demo ---------------------------------------------------------------------------
def wire_peer(p: Peer | None, m: Masks = PLAIN) -> str:
    """``consumer pid 123 (SO_PEERCRED uid 1000); refused 2 intruder(s)``, or ``-``."""
    if p is None:
        return "-"
    text = f"{p.name} pid {m.pid(p.pid)} (SO_PEERCRED uid {p.uid})"
    return text + (f"; refused {p.refused} intruder(s)" if p.refused else "")


def wire_flight(f: Flight | None, m: Masks = PLAIN) -> str:
    """Where the fd (or the handle bytes) is on its way, as the last send or receive left it."""
    if f is None:
        return "-"
    match f.how:
        case How.HANDLE_SENT:
            return f"no fd: 64 handle bytes in the message → {f.consumer}"
        case How.PIDFD_SENT:
            return (
                f"no fd in the message: pid {m.pid(f.pid)} and fd number {f.fd} → {f.consumer}; "
                "it takes the fd with pidfd_getfd …"
            )
        case How.SENT:
            return f"producer fd {f.fd} → SCM_RIGHTS → {f.consumer} …"
        case How.HANDLE_ARRIVED:
            return f"handle bytes arrived; no new fd in {f.consumer}"
        case How.TAKEN:
            return f"taken by {f.consumer} with pidfd_open + pidfd_getfd: fd {f.fd} there"
    return f"arrived as {f.consumer} fd {f.fd}"


def _ack_what(ack: Ack | None) -> str:
    if ack is not None and ack.slice:
        return f"slice {ack.slice[0]}–{ack.slice[1]} written"
    return f"{ack.checked if ack else 0} integers"


def wire_ack(acks: dict[str, Ack | None]) -> str:
    """The consumers' verdicts: ``verified (262144 integers)`` for one; for several, how many
    acknowledged and the newest: ``2/3 consumers acknowledged; last: consumer-3 ok (…)``."""
    if not acks:
        return "-"
    ok = {peer: bool(a and a.verified) for peer, a in acks.items()}
    last = next(reversed(acks))
    if len(acks) == 1:
        return f"{'verified' if ok[last] else 'FAILED'} ({_ack_what(acks[last])})"
    said = f"{'ok' if ok[last] else 'FAILED'} ({_ack_what(acks[last])})"
    return f"{sum(ok.values())}/{len(acks)} consumers acknowledged; last: {last} {said}"


def panel_state(p: PanelView) -> str:
    """A worker panel's head line: ``running export``, ``failed at import``, ``killed by
    SIGKILL`` (how it ended, once it has), ``waiting``, ``done``…"""
    if p.ended is not None:
        return exit_state(p.ended)
    match p.state:
        case PanelState.RUNNING:
            return f"running {p.running}"
        case PanelState.FAILED:
            return f"failed at {p.failed_at}"
        case PanelState.NOT_STARTED:
            return "failed to start (see below)"
        case PanelState.STOPPED:
            return "stopped: the session did not start"
    return str(p.state)
