"""What the kernel says about each worker's fds, checked against what the worker says it holds.

Nothing here trusts a worker: fd tables come from /proc, the pair's identity from kcmp, and the
leak check after cleanup looks for any shared-memory fd still open, declared or not.
"""

from __future__ import annotations

from collections.abc import Sequence

from vmmtui.plan.steps import PRODUCER
from vmmtui.session.processes import WorkerProcess
from vmmtui.stream.events import (
    FdCheck,
    FdClass,
    FdRow,
    FdSnapshot,
    KcmpVerdict,
    Notice,
    NoticeCode,
)
from vmmtui.stream.failures import Failure
from vmmtui.stream.state import HeldKind
from vmmtui.system.fdtable import FdTable, kcmp_same_file, target_class

#: /proc targets that are shared memory whoever opened them (memfd's allocation, /dev/shm files)
SHARED_TARGETS = ("/memfd:vmmtui-alloc",)


#: how the inspector's fd table names the fds no worker declared, by target class
UNDECLARED = {
    "nvidia": FdClass.DRIVER,
    "socket": FdClass.SOCKET,
    "pipe": FdClass.PIPE,
    "pidfd": FdClass.ANON,
    "dmabuf": FdClass.ANON,
    "anon": FdClass.ANON,
}


def classify(target: str) -> FdClass:
    """What an fd that no worker declared is, from its /proc target."""
    return UNDECLARED.get(target_class(target), FdClass.OTHER)


def fd_snapshot(w: WorkerProcess) -> FdSnapshot:
    """``w``'s fd table from /proc, each fd it declared marked ok, mismatch or missing."""
    table = FdTable.read(w.pid)
    if table.error:
        return FdSnapshot(w.role, w.pid, table.status, error=table.error)
    rows: list[FdRow] = []
    declared = {h.fd: h for h in w.held}
    for fd, entry in sorted(table.entries.items()):
        held = declared.get(fd)
        if held is None:
            rows.append(FdRow(fd, entry.target, classify(entry.target)))
            continue
        same = entry.dev == held.dev and entry.ino == held.ino and entry.target == held.target
        detail = (
            ""
            if same
            else f"worker says {held.target} (ino {held.ino}), kernel shows {entry.target} (ino {entry.ino})"
        )
        check = FdCheck.OK if same else FdCheck.MISMATCH
        rows.append(FdRow(fd, entry.target, held.kind, held.note, check, detail))
    for fd, held in sorted(declared.items()):
        if fd not in table.entries:
            rows.append(
                FdRow(
                    fd,
                    held.target,
                    held.kind,
                    held.note,
                    FdCheck.MISSING,
                    f"worker says it holds fd {fd} ({held.target}); /proc/{w.pid}/fd has no fd {fd}",
                )
            )
    closed: list[FdRow] = []
    for fd in w.closed:
        now = table.entries.get(fd)
        if now is None:
            closed.append(
                FdRow(fd, "", FdClass.CLOSED, check=FdCheck.CLOSED, detail="gone from /proc")
            )
            continue
        detail = (
            "the number was reused by a new fd the worker declared"
            if fd in declared
            else f"the number now refers to {now.target} (opened since)"
        )
        closed.append(FdRow(fd, now.target, FdClass.CLOSED, check=FdCheck.REUSED, detail=detail))
    return FdSnapshot(w.role, w.pid, table.status, rows, closed)


def kcmp_pair(producer: WorkerProcess | None, consumer: WorkerProcess | None) -> KcmpVerdict | None:
    """The kernel's verdict on the producer's exported fd and this consumer's received fd, if both exist."""
    if not producer or not consumer or not producer.alive or not consumer.alive:
        return None
    pfd = next((h.fd for h in producer.held if h.kind == HeldKind.EXPORTED), None)
    cfd = next((h.fd for h in consumer.held if h.kind == HeldKind.RECEIVED), None)
    if pfd is None or cfd is None:
        return None
    r = kcmp_same_file(producer.pid, pfd, consumer.pid, cfd)
    if r.same is None and "EBADF" in r.detail:
        return None  # one side closed its fd while we looked (a live refresh during cleanup): no pair now
    return KcmpVerdict(producer.pid, pfd, consumer.pid, cfd, r.same, r.detail, consumer.role)


def read_all(
    workers: dict[str, WorkerProcess], roles: list[str], consumers: list[str]
) -> tuple[list[FdSnapshot], list[KcmpVerdict]]:
    """Every worker's fd table and the kcmp verdict of each consumer's received fd."""
    snaps = [fd_snapshot(workers[r]) for r in roles if r in workers]
    verdicts = [
        v for c in consumers if (v := kcmp_pair(workers.get(PRODUCER), workers.get(c))) is not None
    ]
    return snaps, verdicts


def leak_check(w: WorkerProcess, exporters: Sequence[tuple[int, int]] = ()) -> Failure | None:
    """After cleanup: any shared-memory fd still open in ``w``, whether it declared it or not.

    Found three ways: an fd it once declared (same number, device and inode); an fd whose target is
    shared memory by name (a memfd allocation); an fd that kcmp says is one of ``exporters``'
    (pid, fd) open files, which is how an undeclared GPU allocation fd (it reads /dev/nvidiactl) shows.
    """
    table = FdTable.read(w.pid)
    if table.error:
        return None
    leaks: dict[int, str] = {}
    for fd, h in w.shared.items():
        e = table.entries.get(fd)
        if e is not None and (e.dev, e.ino) == (h.dev, h.ino):
            leaks[fd] = e.target
    control = {h.fd for h in w.held if h.kind == HeldKind.CONTROL}
    for fd, e in table.entries.items():
        if fd in leaks or fd in control:
            continue
        if (
            e.target.startswith(SHARED_TARGETS)
            or e.target.startswith("/dev/nvidia")
            and any(kcmp_same_file(pid, xfd, w.pid, fd).same for pid, xfd in exporters)
        ):
            leaks[fd] = e.target
    if not leaks:
        return None
    return Failure(
        "FD_LEAK", f"{w.role} cleanup", f"/proc/{w.pid}/fd", fds=dict(sorted(leaks.items()))
    )


def fd_delta(w: WorkerProcess, before: FdTable, legacy: bool, taken: bool = False) -> Notice:
    """What receiving did to the consumer's fd table, as /proc shows it: the lesson of legacy vs VMM,
    and of pidfd_getfd (``taken``), where the fd appears although no message carried it."""
    after = FdTable.read(w.pid)
    new = sorted(set(after.entries) - set(before.entries))
    via = "legacy" if legacy else "pidfd" if taken else "scm"
    facts: dict[str, str | int] = {
        "role": w.role, "before": len(before.entries), "after": len(after.entries), "via": via,
    }  # fmt: skip
    facts |= {f"fd.{fd}": after.entries[fd].target for fd in new}
    return Notice(code=NoticeCode.FD_DELTA, facts=facts)
