"""A refused call in words: its cause, with the processes by pid, name and role (the importer
calls pidfd_getfd, the exporter holds the fd), and one fix consistent with it.

The tracer records the refusal as a code and its facts (``CallRefused.reason``, both processes'
facts as the kernel read them at the call, Yama's ptrace_scope, each rule checked on them:
``vmmtui/trace/refusals.py``); the sentences are made here, where it is drawn, so that a
recording replayed by a later vmmtui reads in that version's words. An older recording's refusal
carries its words (``cause``, ``fix``, each check's ``finding``): those are shown as they are.
The rules are the kernel's ptrace access check (kernel/ptrace.c ``__ptrace_may_access``, Yama's
``yama_ptrace_access_check``; docs: Documentation/admin-guide/LSM/Yama.rst), read from
``vmmtui.backends.pidfd.ptrace_rules``.
"""

from __future__ import annotations

import errno
import os

from vmmtui.backends.pidfd import CAP_SYS_PTRACE, PtraceRules, creds_of_facts, ptrace_rules
from vmmtui.stream.observed import CallRefused, ProcessFacts, RefusalCheck, RefusalReason

#: the other road, which needs no ptrace access
SCM_ROAD = "send the fd over a Unix socket with SCM_RIGHTS instead: it needs no ptrace access"

#: said where the ptrace rules alone refused: SCM_RIGHTS needs none of them
SCM_WORKS = "SCM_RIGHTS over a Unix socket would work here: it needs no ptrace access"
#: the rule a seccomp profile of a container runtime applies
DOCKER_SECCOMP = (
    "a container's default seccomp profile refuses it the same way (Docker's allows pidfd_getfd "
    "only to a process with CAP_SYS_PTRACE)"
)


def who(f: ProcessFacts) -> str:
    """``pid 812 (python3, importer)``: a process by pid, name and role, never "A"/"B"."""
    return f"pid {f.pid} ({f.comm[:16] or '?'}, {f.role})"  # escaped where it is shown


def _ids(f: ProcessFacts) -> str:
    uid = f"uid {f.uid}" if f.uid == f.euid == f.suid else f"uids {f.uid}/{f.euid}/{f.suid}"
    gid = f"gid {f.gid}" if f.gid == f.egid == f.sgid else f"gids {f.gid}/{f.egid}/{f.sgid}"
    return f"{uid}, {gid}"


def _has_cap(f: ProcessFacts) -> bool:
    return bool(f.cap_eff >> CAP_SYS_PTRACE & 1)


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


def worded(e: CallRefused) -> tuple[str, str]:
    """(cause, fix) of a refusal: from its reason and facts; an older recording's own words."""
    if not e.reason:
        return e.cause, e.fix
    match e.reason:
        case RefusalReason.NO_SUCH_PROCESS:
            return (
                f"no process {e.target} exists in pid {e.pid}'s PID namespace (it exited, or its "
                "pid was read in another namespace)",
                "pass pids only within one PID namespace (docker --pid=host), or " + SCM_ROAD,
            )
        case RefusalReason.FD_NOT_OPEN:
            return (
                f"fd {e.target_fd} is not open in pid {e.target} (closed before it was taken), or "
                "the pidfd is not a pidfd",
                "keep the fd open until the receiver says it took it (an ACK), or send it with "
                "SCM_RIGHTS",
            )
        case RefusalReason.EXPORTER_GONE:
            return (
                f"pid {e.target} exited before its fd could be taken",
                "keep the exporter alive until every importer has taken and imported the fd",
            )
        case RefusalReason.PTRACE_UNREAD:
            return _unread(e), SCM_ROAD
        case RefusalReason.PTRACE if e.caller is not None and e.exporter is not None:
            c, x = e.caller, e.exporter
            scope = None if e.yama in ("not loaded", "") else int(e.yama)
            rules = ptrace_rules(creds_of_facts(c), creds_of_facts(x), scope, e.ancestor)
            return _words(c, x, rules, e.yama)
    number = getattr(errno, e.errno, None)
    said = f" ({os.strerror(number)})" if isinstance(number, int) else ""
    return f"{e.call} failed with {e.errno}{said}", ""


def _unread(e: CallRefused) -> str:
    gone = ", ".join(
        f"pid {p}" for p, f in ((e.pid, e.caller), (e.target, e.exporter)) if f is None
    )
    return (
        "pidfd_getfd needs ptrace access to the exporter; the kernel record of the call "
        f"carried no facts (lost) and {gone} exited before /proc could be read"
    )


def finding(e: CallRefused, check: RefusalCheck) -> str:
    """What the facts say of one rule of the refusal (an older recording's words, as it has them)."""
    c, x = e.caller, e.exporter
    if check.finding or not e.reason:
        return check.finding
    if check.name == "processes" or c is None or x is None:
        return _unread(e)
    return _FINDINGS.get(check.name, lambda *_: "")(c, x, e, check)


def _seccomp(c: ProcessFacts) -> str:
    if c.seccomp == 2:
        return f"seccomp filter mode, {c.filters} filter{'s' if c.filters != 1 else ''}"
    return "strict seccomp" if c.seccomp == 1 else "no seccomp filter"


def _yama(e: CallRefused) -> str:
    if e.yama == "not loaded":
        return "Yama is not loaded"
    ancestor = f"; the importer is {'' if e.ancestor else 'not '}the exporter's ancestor"
    return f"Yama's ptrace_scope is {e.yama}" + (ancestor if e.yama == "1" else "")


_DUMPABLE = {1: "dumpable", 0: "not dumpable", 2: "dumpable by root only"}
#: each check's finding, from the importer's (c) and the exporter's (x) facts
_FINDINGS = {
    "uid and gid": lambda c, x, e, k: f"{who(c)}: {_ids(c)}; {who(x)}: {_ids(x)}",
    "capability CAP_SYS_PTRACE": lambda c, x, e, k: (
        f"{who(c)} {'holds' if _has_cap(c) else 'lacks'} CAP_SYS_PTRACE (CapEff {c.cap_eff:016x})"
        + (
            ", but in another user namespace than the exporter's: it does not count there"
            if _has_cap(c) and c.userns != x.userns
            else ""
        )
    ),
    "dumpable": lambda c, x, e, k: (
        f"{who(x)} is {_DUMPABLE.get(x.dumpable, 'of unknown dumpability')}"
    ),
    "capabilities": lambda c, x, e, k: (
        f"permitted: importer {c.cap_prm:016x}, exporter {x.cap_prm:016x}"
        + ("" if k.ok is not False else ": the exporter holds more")
    ),
    "yama": lambda c, x, e, k: _yama(e),
    "seccomp": lambda c, x, e, k: f"{who(c)}: {_seccomp(c)}",
    "user namespace": lambda c, x, e, k: (
        f"importer in user:[{c.userns}], exporter in user:[{x.userns}]"
    ),
    "pid namespace": lambda c, x, e, k: (
        f"importer in pid:[{c.pidns}], exporter in pid:[{x.pidns}]"
        + (" (different)" if c.pidns != x.pidns else "")
    ),
    "facts": lambda c, x, e, k: (
        "read by the kernel at the call" if c.source == "kernel" else "read from /proc after"
    ),
}
