"""Why a call was refused, from what decided it at the moment of the call: its facts, as codes.

pidfd_getfd fails with EPERM where people least expect it (containers): the kernel's check is
ptrace access (PTRACE_MODE_ATTACH_REALCREDS), so what decides is both processes' ids and
capabilities, the exporter's dumpable flag, Yama's ptrace_scope, the caller's seccomp filter, and
their namespaces. The kernel record of a refused pidfd_getfd carries both processes' facts, read
in the kernel at the call (a process may exit a microsecond later): ``explain`` uses those, falls
back to /proc (and says so) only where the record has none, and checks each rule on them. The
event it makes carries the reason as a code (``RefusalReason``), the facts and which rule refuses;
``vmmtui/words/refusals.py`` names the first rule that refuses with one fix consistent with it,
where the refusal is drawn. The rules themselves are ``vmmtui.backends.pidfd.ptrace_rules``, the
one copy that ``attach --can`` also asks.
"""

from __future__ import annotations

import errno
import os

from vmmtui.backends.pidfd import PtraceRules, creds_of_facts, is_ancestor, ptrace_rules
from vmmtui.backends.pidfd import creds_of as _creds_of
from vmmtui.backends.pidfd import ptrace_scope as _ptrace_scope
from vmmtui.stream.observed import CallRefused, ProcessFacts, RefusalCheck, RefusalReason


def _errname(err: int) -> str:
    return errno.errorcode.get(err, str(err))


def yama_now() -> str:
    """Yama's ptrace_scope as a fact: "0".."3", or "not loaded"."""
    scope = _ptrace_scope()
    return "not loaded" if scope is None else str(scope)


def from_proc(pid: int, role: str) -> ProcessFacts | None:
    """A process's facts from /proc, now (None: gone or unreadable)."""
    try:
        c = _creds_of(pid)
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as f:
            comm = f.read().rstrip("\n")
        pidns = os.stat(f"/proc/{pid}/ns/pid").st_ino
    except OSError:
        return None
    dumpable = -1 if c.dumpable is None else int(c.dumpable)
    return ProcessFacts(
        pid, role, comm, *c.uid, *c.gid, c.cap_eff, c.cap_prm, c.userns, pidns, c.seccomp,
        c.filters, dumpable, "/proc",
    )  # fmt: skip


#: the refusals whose reason is their call and errno alone
_BY_ERRNO = {
    ("pidfd_open", errno.ESRCH): RefusalReason.NO_SUCH_PROCESS,
    ("pidfd_getfd", errno.EBADF): RefusalReason.FD_NOT_OPEN,
    ("pidfd_getfd", errno.ESRCH): RefusalReason.EXPORTER_GONE,
}


def explain(
    call: str,
    pid: int,
    target: int,
    err: int,
    target_fd: int = -1,
    ktime: int = 0,
    kernel: tuple[ProcessFacts, ProcessFacts | None] | None = None,
) -> CallRefused:
    """The CallRefused event for ``call`` by ``pid`` on ``target`` failing with ``err`` (> 0);
    ``kernel``: the (importer, exporter) facts of the call's kernel record, when it had them."""
    if call == "pidfd_getfd" and err == errno.EPERM:
        return eperm(pid, target, ktime, kernel)
    reason = _BY_ERRNO.get((call, err), RefusalReason.ERRNO)
    return CallRefused(
        pid, call, _errname(err), target, ktime=ktime, reason=reason, target_fd=target_fd
    )


def eperm(
    pid: int,
    target: int,
    ktime: int = 0,
    kernel: tuple[ProcessFacts, ProcessFacts | None] | None = None,
) -> CallRefused:
    """A pidfd_getfd refused with EPERM: the facts (the kernel's, else /proc's) and each rule
    checked on them, the refusing ones first."""
    caller, exporter = kernel if kernel is not None else (None, None)
    caller = caller or from_proc(pid, "importer")
    exporter = exporter or (from_proc(target, "exporter") if target > 0 else None)
    yama = yama_now()
    if caller is None or exporter is None:
        return CallRefused(
            pid, "pidfd_getfd", "EPERM", target, ktime=ktime,
            checks=[RefusalCheck("processes", None)], caller=caller, exporter=exporter, yama=yama,
            reason=RefusalReason.PTRACE_UNREAD,
        )  # fmt: skip
    scope = None if yama == "not loaded" else int(yama)
    ancestor = is_ancestor(caller.pid, exporter.pid) if scope == 1 else None
    rules = ptrace_rules(creds_of_facts(caller), creds_of_facts(exporter), scope, ancestor)
    return CallRefused(
        pid, "pidfd_getfd", "EPERM", target, ktime=ktime, checks=checks(caller, exporter, rules),
        caller=caller, exporter=exporter, yama=yama, reason=RefusalReason.PTRACE,
        ancestor=ancestor,
    )  # fmt: skip


def checks(c: ProcessFacts, e: ProcessFacts, rules: PtraceRules) -> list[RefusalCheck]:
    """Every rule checked on the facts, each with whether it lets the call through (False: it
    refuses), the refusing ones first."""
    out = [
        RefusalCheck("uid and gid", rules.same_ids),
        RefusalCheck("capability CAP_SYS_PTRACE", rules.cap_sys_ptrace),
        RefusalCheck("dumpable", rules.dumpable),
        RefusalCheck("capabilities", rules.caps_subset),
        RefusalCheck("yama", rules.yama),
        # a seccomp filter may refuse (None: not known); only when nothing else refuses, it did
        RefusalCheck(
            "seccomp", (False if rules.allowed is True else None) if c.seccomp == 2 else True
        ),
        RefusalCheck("user namespace", c.userns == e.userns),
        # a fact, not a cause of EPERM: the ids and capabilities decide
        RefusalCheck("pid namespace", None),
        RefusalCheck("facts", None),
    ]
    return sorted(out, key=lambda x: x.ok is not False)  # the refusing ones first
