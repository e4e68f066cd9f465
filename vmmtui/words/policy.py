"""The policy in words (``model/policy.py``): what each kind of finding means, how it weighs and
whether it fails a test, as docs/testing.md's table of kinds says it. The table is made here from
the policy's one list (``RULES``); ``scripts/kinds-table.py`` writes it into the page, and
tests/model/test_policy.py fails when the page and the list differ."""

from __future__ import annotations

from vmmtui.model.findings import Weight
from vmmtui.model.policy import RULES, TEARDOWN_WINDOW_S, Problem, Rule

#: the markers around the table in docs/testing.md
BEGIN = "<!-- kinds: made from vmmtui/model/policy.py by scripts/kinds-table.py -->"
END = "<!-- /kinds -->"

#: what each kind of finding means, in one line (every kind of ``RULES`` has one)
MEANS: dict[str, str] = {
    "shared": "an fd of memory crossed processes (SCM_RIGHTS, pidfd_getfd, fork), proven",
    "imported": "a CUDA export was imported (VMM, legacy IPC, a pool or pool pointer), proven",
    "growth": "one importer's pins on one exporter's memory rose round after round, none let go: "
    "a loop that keeps what it is sent",
    "held-after-exporter-died": "memory another process still pins after the process that made "
    f"it ended; a problem once the hold outlasts the {TEARDOWN_WINDOW_S:g} s teardown window",
    "possible-growth": "polling's: a process's pins on another's memory (fds and mappings) rose "
    "at four polls, none let go",
    "possible-held-after-exporter-died": "the same, for memory shared before the trace began "
    "(kcmp, or its mapping: which of them made it was not seen), or polling's (a mapping still "
    "held after a poll found its peer gone)",
    "fd-after-peer": "polling's: a received memory fd still open after every other process seen "
    "holding that memory exited (a process that shared only a socket with it is no peer of it)",
    "possible-fd-after-peer": "polling's, where which process made the fd was not seen",
    "gpu-memory-after-peer": "polling's: GPU memory (NVML) held after every peer exited",
    "shm-file": "a /dev/shm file left after every process exited, held by none: kernel "
    "persistence, freed only by shm_unlink",
    "released-twice": "a cuMemRelease with no reference left, or cuIpcCloseMemHandle of a pointer "
    "already closed (undefined behaviour)",
    "freed-while-mapped": "a legacy cuMemFree while an importer still had it open, past the "
    "teardown window (undefined behaviour)",
    "refused": "a share the kernel or the driver refused (pidfd_getfd EPERM, a failed driver "
    "call): the memory did not cross",
    "in-flight": "an fd left queued in a socket a live process closed: lost, never received "
    "(a fact where the receiver's exit released the socket: the kernel closed the fd with it)",
    "legacy-export-of-vmm": "cuIpcGetMemHandle of cuMemMap'ed memory, which legacy IPC cannot "
    "export",
    "opened-twice": "a second cuIpcOpenMemHandle of one handle the driver refused as already "
    "mapped",
    "fd-never-closed": "a received fd of memory kept until the process's normal exit, which "
    "closed it",
    "held-at-exit": "memory that came from another process kept by a dup or a mapping until the "
    "exit, which released it",
    "held-until-exit": "polling's: a received memory fd still open at the last poll before its "
    "process exited",
    "possible-held-until-exit": "polling's: memory that came from another process (an fd, or a "
    "mapping kept after its fd closed) still held when last read before its exit",
    "fd-closed-by-exit": "a received socket, pipe or file (no memory) kept until exit",
    "import-never-released": "a VMM import the importer's exit released",
    "ipc-never-closed": "a legacy IPC open the importer's exit closed",
    "pool-never-destroyed": "an imported pool the importer's exit destroyed",
    "pool-pointer-never-freed": "an imported pool pointer the importer's exit freed",
    "exported-never-imported": "an export no process opened: the exporter's own memory, pinned "
    "by its own fd",
    "exporter-died": "a process that shared memory ended (its holders are weighed on their own)",
    "released-after-exporter-died": "the end of a hold after its exporter ended, in the past",
    "freed-at-teardown": "a legacy free its importer closed within the teardown window",
    "unreadable": "a process polling could not read: nothing of it was judged",
    "socket-file": "a socket file no live socket is bound to: a stale path, no memory",
    "pinned-over-budget": "more bytes pinned across live processes at a checkpoint (a test's end, "
    "a tracing() block's end, trace --max-pinned) than the budget",
    "unknown": "a conclusion records lost could overturn: weighs as what it would be",
}

#: how each problem is named in the table
PROBLEMS = {
    Problem.GROWTH: "growth",
    Problem.ORPHANED: "orphaned",
    Problem.OVER_BUDGET: "over budget",
    Problem.BROKEN_RULE: "a broken rule",
}


def weighs(r: Rule) -> str:
    """How a rule weighs, in the table's words."""
    if r.weight is Weight.GOOD:
        return "good news"
    if r.weight is Weight.QUIET:
        return "as what it would be" if r.kind == "unknown" else "a fact"
    said = PROBLEMS.get(r.problem, "a problem") if r.problem else "a problem"
    return f"{said}, past {TEARDOWN_WINDOW_S:g} s" if r.timed else said


def kinds_table() -> str:
    """docs/testing.md's table of kinds, between its markers: one row per rule, in the
    policy's order."""
    rows = [
        BEGIN,
        "",
        "| kind | weighs | fails a test | what it means |",
        "|---|---|---|---|",
    ]
    for r in RULES:
        fails = (
            "yes" if r.weight is Weight.PROBLEM else ("as `was`" if r.kind == "unknown" else "no")
        )
        rows.append(f"| `{r.kind}` | {weighs(r)} | {fails} | {MEANS[r.kind]} |")
    return "\n".join([*rows, "", END])
