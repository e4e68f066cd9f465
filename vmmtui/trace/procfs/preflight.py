"""``vmmtui attach --can A B``: can process A hand process B a GPU allocation, and by which road?

Each check reads the kernel's own word (/proc/PID/ns, /proc/PID/status, Yama's ptrace_scope) or
makes the real call (pidfd_open + pidfd_getfd on one of B's fds, kcmp). A check is a code and the
facts it found (``PreflightCheck.code``, ``facts``); every "no" is worded with the cause and the
fix for the failure people actually meet (EPERM in containers, PID namespaces, NCCL's silent
change of transport, leaked fds, memory kept after a peer died, nvidia-smi's accounting) in
``vmmtui/words/preflight.py``, where it is drawn.
"""

from __future__ import annotations

import ctypes
import errno
import glob
import os
import platform
from dataclasses import dataclass

from vmmtui.backends.pidfd import CAP_SYS_PTRACE, creds_of, is_ancestor, ptrace_rules, ptrace_scope
from vmmtui.stream.events import PreflightCheck
from vmmtui.system.fdtable import kcmp_same_file

_PIDFD = {"x86_64": (434, 438), "aarch64": (434, 438), "ppc64le": (434, 438), "s390x": (434, 438)}
_libc = ctypes.CDLL(None, use_errno=True)
#: the namespaces two processes that share memory should share (their words: words/preflight.py)
NAMESPACES = ("pid", "net", "ipc", "mnt")
Fact = str | int | bool | None


@dataclass
class Proc:
    pid: int
    uid: tuple[int, ...]
    cap_eff: int
    seccomp: int
    ppid: int
    dumpable: bool | None


def proc_status(pid: int) -> Proc:
    """What /proc/PID/status says of a process's uids, capabilities, seccomp and namespaces."""
    fields: dict[str, str] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            fields[k] = v.strip()
    uid = tuple(int(x) for x in fields.get("Uid", "0 0 0 0").split())
    owner = os.stat(f"/proc/{pid}").st_uid
    dumpable = None if uid[0] == 0 else owner == uid[1]  # non-dumpable: /proc/PID belongs to root
    return Proc(
        pid,
        uid,
        int(fields.get("CapEff", "0"), 16),
        int(fields.get("Seccomp", "0")),
        int(fields.get("PPid", "0")),
        dumpable,
    )


def _syscall(index: int, *args: int) -> tuple[int, int]:
    nr = _PIDFD.get(platform.machine(), (None, None))[index]
    if nr is None:
        return -1, errno.ENOSYS
    rc = _libc.syscall(nr, *args)
    return rc, (ctypes.get_errno() if rc < 0 else 0)


def preflight(a: int, b: int, device: bool = True) -> list[PreflightCheck]:
    """Every check, in order; the first says whether both processes are there to ask."""

    def check(name: str, ok: bool | None, code: str, **facts: Fact) -> None:
        out.append(PreflightCheck(a, b, name, ok, code=code, facts=facts))

    out: list[PreflightCheck] = []
    procs = {}
    for pid in dict.fromkeys((a, b)):  # one check, and one message, when A and B are one pid
        try:
            procs[pid] = proc_status(pid)
        except FileNotFoundError:
            check("processes", False, "no-such-process", pid=pid)
        except OSError as exc:
            check("processes", False, "no-permission", pid=pid, error=exc.strerror or str(exc))
    if len(procs) < 2:
        return out
    pa, pb = procs[a], procs[b]
    check("processes", True, "both-there")
    check("same uid", pa.uid[1] == pb.uid[1], "same-uid", uid_a=pa.uid[1], uid_b=pb.uid[1])
    for ns in NAMESPACES:
        try:
            ia, ib = (os.stat(f"/proc/{p}/ns/{ns}").st_ino for p in (a, b))
        except OSError as exc:
            check(f"{ns} namespace", None, "namespace-unread", ns=ns, error=exc.strerror or "")
            continue
        check(f"{ns} namespace", ia == ib, "namespace", ns=ns, ino_a=ia, ino_b=ib)
    out += _ptrace_checks(a, b)
    out += _real_tries(a, b)
    if device:
        out += _device_checks(a, b)
    check("after sharing", None, "after-sharing")
    return out


def _ptrace_checks(a: int, b: int) -> list[PreflightCheck]:
    """Whether pid ``a`` may take pid ``b``'s fds with pidfd_getfd, by the kernel's ptrace access
    rules (``vmmtui.backends.pidfd.ptrace_rules``, the one copy, which a traced refusal asks too):
    the facts they read and each rule's verdict, from which the fix is worded."""
    try:
        ca, cb = creds_of(a), creds_of(b)
    except OSError as exc:
        error = exc.strerror or str(exc)
        return [
            PreflightCheck(
                a, b, "ptrace policy", None, code="ptrace-unread", facts={"error": error}
            )
        ]
    scope = ptrace_scope()
    ancestor = is_ancestor(a, b)
    rules = ptrace_rules(ca, cb, scope, ancestor)
    facts: dict[str, Fact] = {
        "scope": scope, "uid_a": ca.uid[0], "uid_b": cb.uid[1], "saved_b": cb.uid[2],
        "cap": bool(ca.cap_eff >> CAP_SYS_PTRACE & 1), "ancestor": ancestor,
        "dumpable": rules.dumpable, "yama_ok": rules.yama, "cap_ok": rules.cap_sys_ptrace,
        "same_ids": rules.same_ids,
    }  # fmt: skip
    out = [PreflightCheck(a, b, "ptrace policy", rules.allowed, code="ptrace", facts=facts)]
    if ca.seccomp == 2:
        out.append(
            PreflightCheck(a, b, "seccomp", None, code="seccomp", facts={"filters": ca.filters})
        )
    return out


def _real_tries(a: int, b: int) -> list[PreflightCheck]:
    out: list[PreflightCheck] = []
    me = os.getpid()
    rc, e = _syscall(0, me, 0)
    if rc >= 0:
        os.close(rc)
    support = rc >= 0
    out.append(
        PreflightCheck(a, b, "kernel pidfd support", support, code="pidfd", facts={"errno": e})
    )
    try:
        fds = sorted(int(n) for n in os.listdir(f"/proc/{b}/fd"))
    except OSError as exc:
        fds, why = [], exc.strerror or str(exc)
    else:
        why = ""  # B has no open fd to try
    name = "pidfd_getfd try (from vmmtui)"
    if support and fds:
        pidfd, e = _syscall(0, b, 0)
        tried: dict[str, Fact] = {"fd": fds[0], "euid": os.geteuid()}
        if pidfd < 0:
            tried.update(call="pidfd_open", errno=e)
        else:
            got, e = _syscall(1, pidfd, fds[0], 0)
            os.close(pidfd)
            if got >= 0:
                os.close(got)
            tried.update(call="pidfd_getfd", errno=0 if got >= 0 else e)
        ok = tried["errno"] == 0
        out.append(PreflightCheck(a, b, name, ok, code="getfd-tried", facts=tried))
    elif support:
        out.append(PreflightCheck(a, b, name, None, code="getfd-not-tried", facts={"error": why}))
    try:
        fa = sorted(int(n) for n in os.listdir(f"/proc/{a}/fd"))
        k = kcmp_same_file(a, fa[0], b, fds[0]) if fa and fds else None
    except OSError:
        k = None
    if k is not None:
        answers = k.same is not None
        out.append(PreflightCheck(a, b, "kcmp", answers, code="kcmp", facts={"detail": k.detail}))
    return out


def _device_checks(a: int, b: int) -> list[PreflightCheck]:
    from vmmtui.backends.probe import probe

    out: list[PreflightCheck] = []
    info = probe()
    if not info.driver or info.error:
        error = info.error or ""
        out.append(PreflightCheck(a, b, "device", None, code="no-device", facts={"error": error}))
        return out
    for d in info.devices:
        facts: dict[str, Fact] = {
            "vmm": bool(d.vmm),
            "fd": bool(d.posix_fd),
            "fabric": bool(d.fabric),
        }
        name = f"GPU {d.index} ({d.name})"
        out.append(PreflightCheck(a, b, name, bool(d.vmm and d.posix_fd), code="gpu", facts=facts))
    channels = sorted(glob.glob("/dev/nvidia-caps-imex-channels/channel*"))
    shown = ", ".join(channels[:3])
    out.append(
        PreflightCheck(
            a,
            b,
            "IMEX channel",
            bool(channels) or None,
            code="imex",
            facts={"channels": len(channels), "shown": shown},
        )  # fmt: skip
    )
    return out
