"""Why a call was refused, from what decided it at the moment of the call.

pidfd_getfd fails with EPERM where people least expect it (containers): the kernel's check is
ptrace access (PTRACE_MODE_ATTACH_REALCREDS), so what decides is both processes' ids and
capabilities, the exporter's dumpable flag, Yama's ptrace_scope, the caller's seccomp filter, and
their namespaces. The kernel record of a refused pidfd_getfd carries both processes' facts, read
in the kernel at the call (a process may exit a microsecond later): ``explain`` uses those, falls
back to /proc (and says so) only where the record has none, and names the first rule that refuses
with one fix that is consistent with it. Processes are named by pid, name and role (the importer
calls pidfd_getfd, the exporter holds the fd). The rules themselves are
``vmmtui.backends.pidfd.ptrace_rules``, the one copy that ``attach --can`` also asks.
"""

from __future__ import annotations

import errno
import os

from vmmtui.backends.pidfd import CAP_SYS_PTRACE, Creds, PtraceRules, is_ancestor, ptrace_rules
from vmmtui.backends.pidfd import creds_of as _creds_of
from vmmtui.backends.pidfd import ptrace_scope as _ptrace_scope
from vmmtui.stream.observed import CallRefused, ProcessFacts, RefusalCheck
from vmmtui.trace.procfs.preflight import SCM_ROAD

#: said where the ptrace rules alone refused: SCM_RIGHTS needs none of them
SCM_WORKS = "SCM_RIGHTS over a Unix socket would work here: it needs no ptrace access"
#: the rule a seccomp profile of a container runtime applies
DOCKER_SECCOMP = (
    "a container's default seccomp profile refuses it the same way (Docker's allows pidfd_getfd "
    "only to a process with CAP_SYS_PTRACE)"
)


def _ns(pid: int, kind: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


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


def _creds(f: ProcessFacts) -> Creds:
    # the kernel's dumpable value: 1 is SUID_DUMP_USER, what ptrace access asks
    dumpable = None if f.dumpable < 0 else f.dumpable == 1
    return Creds(
        f.pid,
        (f.uid, f.euid, f.suid),
        (f.gid, f.egid, f.sgid),
        f.cap_eff,
        f.cap_prm,
        f.userns,
        dumpable,
        f.seccomp,
        f.filters,
    )


def who(f: ProcessFacts) -> str:
    """``pid 812 (python3, importer)``: a process by pid, name and role, never "A"/"B"."""
    return f"pid {f.pid} ({f.comm[:16] or '?'}, {f.role})"  # escaped where it is shown


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
    name = _errname(err)
    cause, fix = f"{call} failed with {name} ({os.strerror(err)})", ""
    if call == "pidfd_open" and err == errno.ESRCH:
        cause = f"no process {target} exists in pid {pid}'s PID namespace (it exited, or its pid was read in another namespace)"
        fix = "pass pids only within one PID namespace (docker --pid=host), or " + SCM_ROAD
    elif call == "pidfd_getfd" and err == errno.EBADF:
        cause = f"fd {target_fd} is not open in pid {target} (closed before it was taken), or the pidfd is not a pidfd"
        fix = "keep the fd open until the receiver says it took it (an ACK), or send it with SCM_RIGHTS"
    elif call == "pidfd_getfd" and err == errno.ESRCH:
        cause = f"pid {target} exited before its fd could be taken"
        fix = "keep the exporter alive until every importer has taken and imported the fd"
    elif call == "pidfd_getfd" and err == errno.EPERM:
        return eperm(pid, target, ktime, kernel)
    return CallRefused(pid, call, name, target, cause, fix, ktime, [])


def eperm(
    pid: int,
    target: int,
    ktime: int = 0,
    kernel: tuple[ProcessFacts, ProcessFacts | None] | None = None,
) -> CallRefused:
    """A pidfd_getfd refused with EPERM: the facts (the kernel's, else /proc's), the checks, the
    first rule that refuses as the cause, and one fix consistent with it."""
    caller, exporter = kernel if kernel is not None else (None, None)
    caller = caller or from_proc(pid, "importer")
    exporter = exporter or (from_proc(target, "exporter") if target > 0 else None)
    yama = yama_now()
    if caller is None or exporter is None:
        gone = ", ".join(f"pid {p}" for p, f in ((pid, caller), (target, exporter)) if f is None)
        cause = (
            "pidfd_getfd needs ptrace access to the exporter; the kernel record of the call "
            f"carried no facts (lost) and {gone} exited before /proc could be read"
        )
        checks = [RefusalCheck("processes", None, cause)]
        return CallRefused(
            pid, "pidfd_getfd", "EPERM", target, cause, SCM_ROAD, ktime, checks, caller, exporter,
            yama,
        )  # fmt: skip
    scope = None if yama == "not loaded" else int(yama)
    ancestor = is_ancestor(caller.pid, exporter.pid) if scope == 1 else None
    rules = ptrace_rules(_creds(caller), _creds(exporter), scope, ancestor)
    checks = _checks(caller, exporter, rules, yama, ancestor)
    cause, fix = _words(caller, exporter, rules, yama)
    return CallRefused(
        pid, "pidfd_getfd", "EPERM", target, cause, fix, ktime, checks, caller, exporter, yama
    )  # fmt: skip


def _ids(f: ProcessFacts) -> str:
    uid = f"uid {f.uid}" if f.uid == f.euid == f.suid else f"uids {f.uid}/{f.euid}/{f.suid}"
    gid = f"gid {f.gid}" if f.gid == f.egid == f.sgid else f"gids {f.gid}/{f.egid}/{f.sgid}"
    return f"{uid}, {gid}"


def _has_cap(f: ProcessFacts) -> bool:
    return bool(f.cap_eff >> CAP_SYS_PTRACE & 1)


def _checks(
    c: ProcessFacts, e: ProcessFacts, rules: PtraceRules, yama: str, ancestor: bool | None
) -> list[RefusalCheck]:
    """Every fact read, each with whether it lets the call through (False: it refuses)."""
    seen = "read by the kernel at the call" if c.source == "kernel" else "read from /proc after"
    out = [
        RefusalCheck("uid and gid", rules.same_ids, f"{who(c)}: {_ids(c)}; {who(e)}: {_ids(e)}"),
        RefusalCheck(
            "capability CAP_SYS_PTRACE",
            rules.cap_sys_ptrace,
            f"{who(c)} {'holds' if _has_cap(c) else 'lacks'} CAP_SYS_PTRACE (CapEff "
            f"{c.cap_eff:016x})"
            + (
                ", but in another user namespace than the exporter's: it does not count there"
                if _has_cap(c) and c.userns != e.userns
                else ""
            ),
        ),
        RefusalCheck(
            "dumpable",
            rules.dumpable,
            f"{who(e)} is "
            + {1: "dumpable", 0: "not dumpable", 2: "dumpable by root only"}.get(
                e.dumpable, "of unknown dumpability"
            ),
        ),
        RefusalCheck(
            "capabilities",
            rules.caps_subset,
            f"permitted: importer {c.cap_prm:016x}, exporter {e.cap_prm:016x}"
            + ("" if rules.caps_subset is not False else ": the exporter holds more"),
        ),
        RefusalCheck(
            "yama",
            rules.yama,
            "Yama is not loaded"
            if yama == "not loaded"
            else f"Yama's ptrace_scope is {yama}"
            + (
                f"; the importer is {'' if ancestor else 'not '}the exporter's ancestor"
                if yama == "1"
                else ""
            ),
        ),
        RefusalCheck(
            "seccomp",
            None if c.seccomp == 2 else True,
            f"{who(c)}: "
            + (
                f"seccomp filter mode, {c.filters} filter{'s' if c.filters != 1 else ''}"
                if c.seccomp == 2
                else "strict seccomp"
                if c.seccomp == 1
                else "no seccomp filter"
            ),
        ),
        RefusalCheck(
            "user namespace",
            c.userns == e.userns,
            f"importer in user:[{c.userns}], exporter in user:[{e.userns}]",
        ),
        RefusalCheck(
            "pid namespace",
            None if c.pidns == e.pidns else False,
            f"importer in pid:[{c.pidns}], exporter in pid:[{e.pidns}]",
        ),
        RefusalCheck("facts", None, f"{seen}"),
    ]
    if c.pidns != e.pidns:  # a fact, not a cause of EPERM: the ids and capabilities decide
        out[-2] = RefusalCheck("pid namespace", None, out[-2].finding + " (different)")
    if rules.allowed is True and c.seccomp == 2:  # nothing else refuses: the filter did
        out[5] = RefusalCheck("seccomp", False, out[5].finding)
    return sorted(out, key=lambda x: x.ok is not False)  # the refusing ones first


def _words(c: ProcessFacts, e: ProcessFacts, rules: PtraceRules, yama: str) -> tuple[str, str]:
    """The cause (the facts that refuse, named) and one fix consistent with them."""
    importer, exporter = who(c), who(e)
    facts: list[str] = []
    fix = ""
    scm = SCM_WORKS
    if rules.allowed is True or (rules.allowed is None and c.seccomp == 2):
        if c.seccomp == 2:
            facts.append(
                f"{importer} runs under a seccomp filter ({c.filters} filter"
                f"{'s' if c.filters != 1 else ''}) that refused it, since its ids, capabilities "
                f"and Yama allow the call; {DOCKER_SECCOMP}"
            )
            fix = (
                f"allow pidfd_getfd in the seccomp profile of {importer} (Docker: "
                "--cap-add=SYS_PTRACE, with which its default profile allows it)"
            )
            scm = "or " + SCM_ROAD
        else:
            facts.append(
                "its ids, capabilities, dumpable flag and Yama allow the call, and there is no "
                "seccomp filter: a Linux security module (AppArmor, SELinux, Landlock) refused it"
            )
            fix = "find the refusal in the security module's log (dmesg, the audit log)"
            scm = "or " + SCM_ROAD
    elif rules.yama is False and (rules.allowed is False and _ordinary_allows(rules)):
        facts.append(_yama_words(c, yama))
        fix = _yama_fix(c, e, yama)
    else:
        if not rules.same_ids:
            facts.append(
                f"{importer} runs as {_ids(c)}, {exporter} as {_ids(e)}: ptrace access wants "
                "the importer's uid and gid to equal all of the exporter's"
            )
        elif rules.dumpable is False:
            facts.append(
                f"{exporter} is not dumpable (it changed credentials or executed a set-id "
                "program, or called prctl(PR_SET_DUMPABLE, 0))"
            )
        elif rules.caps_subset is False:
            facts.append(f"{exporter} holds permitted capabilities that {importer} lacks")
        if _has_cap(c) and c.userns != e.userns:
            facts.append(
                f"{importer} holds CAP_SYS_PTRACE in another user namespace (user:[{c.userns}]) "
                f"than {exporter}'s (user:[{e.userns}]): it does not count there"
            )
        else:
            facts.append(f"{c.pid} lacks CAP_SYS_PTRACE")
        if rules.yama is False:
            facts.append(_yama_words(c, yama))
        if c.userns != e.userns:
            fix = (
                f"run both in one user namespace, or give {importer} CAP_SYS_PTRACE in "
                f"{exporter}'s (docker --cap-add=SYS_PTRACE, both in one container)"
            )
        elif not rules.same_ids:
            fix = (
                f"run {importer} as the exporter's user (uid {e.euid}, gid {e.egid}) or give it "
                "CAP_SYS_PTRACE (docker --cap-add=SYS_PTRACE)"
            )
        elif rules.dumpable is False:
            fix = f"make {exporter} dumpable again (prctl(PR_SET_DUMPABLE, 1)) once it has set its ids"
        else:
            fix = f"give {importer} CAP_SYS_PTRACE (docker --cap-add=SYS_PTRACE)"
        if c.seccomp == 2:
            facts.append(f"{importer} also runs under a seccomp filter, which may refuse it too")
    if c.pidns != e.pidns:
        facts.append(f"the two are in different PID namespaces (pid:[{c.pidns}], pid:[{e.pidns}])")
    if c.source != "kernel":
        facts.append("(read from /proc after the call: the kernel record had no facts)")
    cause = "pidfd_getfd needs ptrace access to the exporter: " + "; ".join(facts)
    return cause, f"{fix}; {scm}"


def _ordinary_allows(rules: PtraceRules) -> bool:
    return rules.cap_sys_ptrace or (
        rules.same_ids and rules.dumpable is not False and rules.caps_subset is not False
    )


def _yama_words(c: ProcessFacts, yama: str) -> str:
    return {
        "1": f"Yama's ptrace_scope is 1: only the exporter's ancestor (or a pid it names with "
        f"prctl(PR_SET_PTRACER)) or a holder of CAP_SYS_PTRACE may, and pid {c.pid} is neither",
        "2": f"Yama's ptrace_scope is 2: only a holder of CAP_SYS_PTRACE may, and pid {c.pid} lacks it",
        "3": "Yama's ptrace_scope is 3: no process may, whatever it holds",
    }.get(yama, f"Yama's ptrace_scope is {yama}")


def _yama_fix(c: ProcessFacts, e: ProcessFacts, yama: str) -> str:
    if yama == "1":
        return (
            f"in {who(e)}, name the importer with prctl(PR_SET_PTRACER, {c.pid}) before it "
            "takes the fd, or start the importer from the exporter"
        )
    if yama == "2":
        return f"give {who(c)} CAP_SYS_PTRACE (docker --cap-add=SYS_PTRACE)"
    return "nothing allows it until the machine restarts with a lower kernel.yama.ptrace_scope"
