"""A traced block's verdict in words: ``vmmtui.tracing``'s report (``verdict/api.py``), the pytest
plugin's failures, header and summary (``verdict/plugin.py``), the budget's finding. Made here
once from the verdict's facts; the findings themselves are worded by ``words.findings``."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from vmmtui.model.policy import Fact, FilePin, MappingPin, Pin, Problem, ProblemSeen
from vmmtui.stream.names import shown
from vmmtui.stream.sizes import format_size
from vmmtui.words.findings import Said

#: how each mode is named in a line
MODES = {"ebpf": "eBPF", "polling": "polling /proc"}


class Worded(Protocol):
    """A finding as the verdict lists it (``verdict.api.Finding``)."""

    @property
    def kind(self) -> str: ...

    @property
    def pid(self) -> int: ...

    @property
    def what(self) -> str: ...

    @property
    def detail(self) -> str: ...

    @property
    def fix(self) -> str: ...


def _n(n: int, one: str, many: str = "") -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def head(mode: str, problems: int, good: int, allowed: int, pinned: int, budget: int | None) -> str:
    """``vmmtui (eBPF): 3 problems to look at; 3 shares proven; 0 B pinned across processes at
    the end``: the verdict's first line."""
    return (
        f"vmmtui ({MODES.get(mode, mode)}): "
        + (
            f"{_n(problems, 'problem')} to look at"
            if problems
            # polling sees what is there at each poll, never the calls between two polls
            else ("nothing polling can see wrong" if mode == "polling" else "nothing wrong found")
        )
        + f"; {_n(good, 'share')} proven"
        + (f", {allowed} allowed" if allowed else "")
        + f"; {format_size(pinned)} pinned across processes at the end"
        + (f" (budget {format_size(budget)})" if budget is not None else "")
    )


def problem(f: Worded) -> str:
    """A problem in three lines: its kind, process and what; the detail; the fix."""
    who = f"pid {f.pid}: " if f.pid else ""
    fix = f"\n    fix: {f.fix}" if f.fix else ""
    return f"{f.kind} · {who}{f.what}\n    {f.detail}{fix}"


def one_problem(said: Said, p: ProblemSeen) -> Said:
    """One problem of many findings in one finding's words: its pins counted and their bytes
    summed (``pid 806 holds 4 GiB in 205 pins of pid 805's memory, 5.6 s after it ended``), each
    pin left to ``--json`` and the recording."""
    pins = len(p.pins)
    if pins <= 1 and p.findings <= 1:
        return said
    rel = p.relation
    size = f"{format_size(p.peak_bytes)} in " if p.peak_bytes else ""
    what = said.what
    if rel.problem == Problem.ORPHANED and rel.exporter:
        after = f", {p.held_ns / 1e9:.1f} s after pid {rel.exporter} ended" if p.held_ns else ""
        verb = "held" if p.ended is not None and p.released >= pins else "holds"
        what = f"{verb} {size}{_n(pins, 'pin')} of pid {rel.exporter}'s memory{after}"
    elif pins > 1:
        what = f"{said.what} ({size}{_n(pins, 'pin')})"
    more = p.findings - 1
    detail = said.detail + (
        f" (and {_n(more, 'more finding')} of the same relation: each pin is in --json and the "
        "recording)"
        if more
        else ""
    )
    return Said(what, detail, said.fix)


def more_problems(kind: str, n: int, recording: object | None) -> str:
    """The problems of a kind past those printed: ``+12 more growth (the recording has them)``."""
    where = f"the recording has them: vmmtui replay {recording}" if recording else "--json has them"
    return f"+{n} more {kind} ({where})"


def facts(found: Iterable[object]) -> str:
    """The quiet facts of a block as counts, never "to look at": ``facts: 33 held until exit,
    released by it``; "" where none."""
    from vmmtui.model.policy import quiet_file
    from vmmtui.words.findings import quiet_words

    by: dict[str, int] = {}
    for f in found:
        e = getattr(f, "event", None)
        if getattr(f, "weight", "") == "quiet" and e is not None:
            key = quiet_file(e)
            if key != Fact.RELEASED_LATE:  # the past of a problem listed above: not a fact apart
                by[key] = by.get(key, 0) + 1
    said = quiet_words(sum(by.values()), by)
    return f"facts (no problem): {said}" if said else ""


def polling(reason: str, unseen: Sequence[str]) -> str:
    """Why the block was polled, and what polling cannot see."""
    return f"polling ({reason}): " + "; ".join(unseen)


def recording(path: object) -> str:
    return f"recording: {path} (vmmtui replay {path})"


def lost(records: int) -> str:
    return (
        f"{_n(records, 'record')} of the kernel lost (the ring buffer overflowed): a finding they "
        "could overturn is said as unknown, none as a leak"
    )


def unread(processes: Sequence[tuple[int, str]]) -> str:
    """Processes of the block that could not be read, and why (nothing of theirs was judged)."""
    shown = "; ".join(f"pid {pid} ({why})" for pid, why in processes[:6])
    more = f"; {len(processes) - 6} more" if len(processes) > 6 else ""
    return f"not read, so not judged: {shown}{more}"


def file_pin(pid: int, fd: int, size: int, how: str) -> str:
    """A memory file a live process still holds: ``pid 7's fd 3 (1 MiB, received)``."""
    return f"pid {pid}'s fd {fd} ({format_size(size)}, {how})"


def mapping_pin(pid: int, path: str, size: int, how: str) -> str:
    """A memory file a live process still maps, its fd closed: ``pid 7's mapping of
    /memfd:bucket (deleted) (2 MiB, arrived)``."""
    return f"pid {pid}'s mapping of {shown(path)} ({format_size(size)}, {how})"


def cuda_pin(exporter: int, thing: str, key: int, size: int, holders: Sequence[int]) -> str:
    """CUDA memory other processes still hold: ``pid 7's CUDA allocation 0x2 (1 MiB) by pid 9``."""
    return f"pid {exporter}'s CUDA {thing} {key:#x} ({format_size(size)}) by pid " + ", ".join(
        str(p) for p in holders
    )


def pin_words(p: Pin) -> str:
    """One pin of the budget's measure (``pipeline.pinned``), in words."""
    if isinstance(p, FilePin):
        return file_pin(p.pid, p.fd, p.size, p.how)
    if isinstance(p, MappingPin):
        return mapping_pin(p.pid, p.path, p.size, p.how)
    return cuda_pin(p.exporter, p.thing, p.key, p.size, p.holders)


def trace_over_budget(peak: int, budget: int, at_s: float, pins: Sequence[Pin]) -> str:
    """``vmmtui trace --max-pinned``'s one line when the run went over it (exit 1)."""
    listed = "; ".join(pin_words(p) for p in pins[:4]) + (" …" if len(pins) > 4 else "")
    return (
        f"over budget: {format_size(peak)} pinned across live processes at {at_s:.1f} s, over "
        f"--max-pinned {format_size(budget)} ({listed}); release what crosses processes sooner, "
        "or raise --max-pinned (exit 1)"
    )


def over_budget(pinned: int, budget: int, pins: Sequence[str]) -> Said:
    """The budget's finding: more bytes pinned across processes at the end than allowed."""
    return Said(
        f"{format_size(pinned)} pinned across processes at the end of the block, over the budget "
        f"of {format_size(budget)}",
        "still pinned: " + "; ".join(pins[:8]) + (" …" if len(pins) > 8 else ""),
        "release what the block shared (close received fds, munmap, cuMemRelease imports) "
        "before it ends, or raise max_pinned_bytes",
    )


def trace_failed(why: object, recording: object | None) -> str:
    return f"the trace failed: {why}; run `vmmtui doctor`, and report it with the recording" + (
        f" {recording}" if recording else ""
    )


def not_started(why: object) -> str:
    return (
        f"vmmtui could not start a trace: {why}; run `vmmtui doctor` for what this machine can run"
    )


def unwritable(path: object, why: str) -> str:
    return (
        f"cannot write the recording {path}: {why}; pass record= a writable path, or record=False"
    )


#: how a test run gets eBPF (docs/testing.md, "A GPU runner for it")
PRIVILEGES_FIX = (
    "run the tests as root, or give them CAP_BPF and CAP_PERFMON (ambient: "
    "`sudo setpriv --reuid=$(id -u) --regid=$(id -g) --init-groups --inh-caps=+bpf,+perfmon "
    '--ambient-caps=+bpf,+perfmon "$(command -v python)" -m pytest …`: this user\'s own '
    "interpreter, for this one run)"
)


def polled_because(lack: str) -> str:
    """Why a block was polled, where this process lacks the privileges, with the fix for a test
    run (not the trace command's)."""
    return f"{lack}: {PRIVILEGES_FIX}"


# -- the pytest plugin ---------------------------------------------------------------------------
def how_observed(reason: str | None, unseen: Sequence[str]) -> str:
    """The run's header (``--vmmtui``): eBPF, or polling with why and what it cannot see."""
    if not reason:
        return "vmmtui: every traced test is followed by eBPF (this process and every process it starts)"
    return f"vmmtui: polling /proc, not eBPF: {reason}. Polling cannot see: " + "; ".join(unseen)


def polled_tests(polled: int, traced: int, reason: str, unseen: Sequence[str]) -> str:
    """Said once in the summary where tests were polled."""
    return (
        f"{polled} of {traced} traced tests were followed by polling /proc, not eBPF ({reason}); "
        "polling cannot see: " + "; ".join(unseen)
    )


def tests_traced(traced: int, modes: Sequence[str], bad: int, failed: int) -> str:
    """``5 tests traced by eBPF, 2 with problems``."""
    return (
        f"{_n(traced, 'test')} traced"
        + (f" by {' and '.join(MODES.get(m, m) for m in modes)}" if modes else "")
        + f", {bad} with problems"
        + (f", {failed} whose trace failed" if failed else "")
    )


def failed_test(nodeid: str, kind: str, what: str, more: int) -> str:
    return f"FAILED {nodeid}: {kind}: {what}" + (f" (+{more} more)" if more else "")


def untraced_test(nodeid: str) -> str:
    return f"FAILED {nodeid}: the trace failed, no verdict (its report says why)"
