"""Why a call was refused, read from /proc of both processes the moment the trace sees it.

pidfd_getfd fails with EPERM where people least expect it (containers): the kernel's check is
ptrace access (PTRACE_MODE_ATTACH_REALCREDS), so the causes are the caller's capabilities, Yama's
ptrace_scope, a seccomp profile, uids, and namespaces: capabilities count only inside the caller's
own user namespace, and pids mean nothing across PID namespaces. Each check is a fact read from
the kernel; the cause names the first that explains the error, the fix says what changes it.
"""

from __future__ import annotations

import errno
import os

from vmmtui.stream.observed import CallRefused, RefusalCheck
from vmmtui.trace.procfs.preflight import NAMESPACES, SCM_ROAD, proc_status, ptrace_checks


def _ns(pid: int, kind: str) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/ns/{kind}")
    except OSError:
        return None


def _errname(err: int) -> str:
    return errno.errorcode.get(err, str(err))


def explain(
    call: str, pid: int, target: int, err: int, target_fd: int = -1, ktime: int = 0
) -> CallRefused:
    """The CallRefused event for ``call`` by ``pid`` on ``target`` failing with ``err`` (> 0)."""
    name = _errname(err)
    checks: list[RefusalCheck] = []
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
        checks = _eperm_checks(pid, target)
        causes = [c for c in checks if c.ok is False]
        cause = "pidfd_getfd needs ptrace access to the target; " + (
            "; ".join(c.finding for c in causes)
            if causes
            else "no cause readable in /proc (the processes are gone, or a seccomp/LSM policy refused it)"
        )
        fix = _eperm_fix(causes)
    return CallRefused(pid, call, name, target, cause, fix, ktime, checks)


def _eperm_checks(a: int, b: int) -> list[RefusalCheck]:
    out: list[RefusalCheck] = []
    try:
        pa, pb = proc_status(a), proc_status(b)
    except OSError:
        return [
            RefusalCheck("processes", None, f"pid {a} or {b} exited before /proc could be read")
        ]
    for kind in ("user", "pid"):
        na, nb = _ns(a, kind), _ns(b, kind)
        if na is None or nb is None:
            out.append(RefusalCheck(f"{kind} namespace", None, "unreadable"))
            continue
        same = na == nb
        if kind == "user":
            finding = (
                "same user namespace"
                if same
                else f"pid {a} is in another user namespace ({na}) than pid {b} ({nb}): its "
                "capabilities (CAP_SYS_PTRACE too) do not count for pid "
                f"{b}"
            )
        else:
            finding = (
                "same PID namespace"
                if same
                else f"pid {a} is in another PID namespace ({na}) than pid {b} ({nb}): "
                + NAMESPACES["pid"][0].split(":")[0]
            )
        out.append(RefusalCheck(f"{kind} namespace", same, finding))
    for c in ptrace_checks(a, b, pa, pb):
        ok = c.ok
        if c.name == "seccomp":
            ok = False
        out.append(
            RefusalCheck(
                c.name, ok, c.finding + (f": {c.cause}" if c.cause and ok is False else "")
            )
        )
    if pa.uid[1] != pb.uid[1]:
        out.append(
            RefusalCheck(
                "uids", False, f"pid {a} runs as uid {pa.uid[1]}, pid {b} as uid {pb.uid[1]}"
            )
        )
    return out


def _eperm_fix(causes: list[RefusalCheck]) -> str:
    names = {c.name for c in causes}
    if "user namespace" in names or "pid namespace" in names:
        return (
            "run both in one PID and user namespace (docker --pid=host, or --pid=container:A), or "
            + SCM_ROAD
        )
    if "seccomp" in names:
        return (
            "docker --cap-add=SYS_PTRACE, or a seccomp profile that allows pidfd_getfd, or "
            + SCM_ROAD
        )
    return (
        "give the caller CAP_SYS_PTRACE (docker --cap-add=SYS_PTRACE) or lower kernel.yama.ptrace_scope, or "
        + SCM_ROAD
    )
