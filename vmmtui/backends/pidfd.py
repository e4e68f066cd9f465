"""The pidfd road's system calls: pidfd_open + pidfd_getfd, Yama's ptracer exception, a seccomp filter.

PyTorch's expandable segments, UCX ``cuda_ipc``, torchcomms and flashinfer send the exporter's pid and
fd number; the importer opens a pidfd of that pid and copies the fd out of its table. The kernel allows
that only with ptrace access (PTRACE_MODE_ATTACH_REALCREDS), which is where it fails in the field:
seccomp profiles (Docker's default refuses pidfd_getfd without CAP_SYS_PTRACE), Yama's
``ptrace_scope``, and PID namespaces, where the pid names nobody. Everything here is the real call.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import platform
import struct
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from vmmtui.stream.observed import ProcessFacts

#: pidfd_getfd's number in the generic syscall table (x86_64, aarch64, ppc64le, s390x, riscv64 alike)
SYS_PIDFD_GETFD = 438
#: Yama: let this pid (and its descendants) ptrace us, whatever ptrace_scope 1 says
PR_SET_PTRACER = 0x59616D61
PR_SET_NO_NEW_PRIVS = 38
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2
SECCOMP_RET_ALLOW = 0x7FFF0000
SECCOMP_RET_ERRNO = 0x00050000
CAP_SYS_PTRACE = 19
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
#: seccomp_data.arch for the machines vmmtui runs on (linux/audit.h)
AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# classic BPF opcodes (linux/filter.h)
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_RET_K = 0x06

_libc = ctypes.CDLL(None, use_errno=True)


class SyscallError(OSError):
    """A failed call, with the errno's name (``EPERM``) ready for the failure tables."""

    @property
    def code(self) -> str:
        return errno.errorcode.get(self.errno or 0, "OSERROR")


def _check(rc: int, what: str) -> int:
    if rc < 0:
        e = ctypes.get_errno()
        raise SyscallError(e, f"{what}: {os.strerror(e)}")
    return rc


def pidfd_open(pid: int) -> int:
    """A pidfd naming ``pid`` as this process's PID namespace sees it."""
    try:
        return os.pidfd_open(pid)
    except OSError as exc:
        raise SyscallError(exc.errno, f"pidfd_open({pid}): {exc.strerror}") from None


def pidfd_getfd(pidfd: int, fd: int) -> int:
    """A new fd here for the open file behind ``fd`` in the process of ``pidfd`` (close-on-exec)."""
    return _check(
        _libc.syscall(SYS_PIDFD_GETFD, ctypes.c_int(pidfd), ctypes.c_int(fd), ctypes.c_uint(0)),
        f"pidfd_getfd(pidfd {pidfd}, fd {fd})",
    )


def allow_ptracer(pid: int) -> str:
    """prctl(PR_SET_PTRACER, pid): under Yama ptrace_scope 1 only an ancestor may ptrace (and so take
    fds); this names ``pid`` as allowed too. Returns ``"0"`` or the errno's name (EINVAL: no Yama)."""
    rc = _libc.prctl(ctypes.c_int(PR_SET_PTRACER), ctypes.c_ulong(pid), 0, 0, 0)
    return "0" if rc == 0 else errno.errorcode.get(ctypes.get_errno(), "?")


def deny_filter(arch: int, nr: int = SYS_PIDFD_GETFD, err: int = errno.EPERM) -> bytes:
    """A seccomp BPF program (``struct sock_filter[]``): ``nr`` returns -``err``, every other call runs.

    A call made under another ABI than ``arch`` is let through: this teaches one refusal, it is not a
    sandbox (Docker's profile also handles x32 and the rest)."""
    insns = [
        (BPF_LD_W_ABS, 0, 0, 4),  # A = seccomp_data.arch
        (BPF_JEQ_K, 1, 0, arch),  # our ABI: go on to the number
        (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
        (BPF_LD_W_ABS, 0, 0, 0),  # A = seccomp_data.nr
        (BPF_JEQ_K, 0, 1, nr),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | err),
        (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
    ]
    return b"".join(struct.pack("=HBBI", *i) for i in insns)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def deny_pidfd_getfd() -> int:
    """Install, in this process and for good, a seccomp filter that refuses pidfd_getfd with EPERM, as
    Docker's default profile does for a container without CAP_SYS_PTRACE. No root needed: no_new_privs
    first. Returns the filter's length in instructions."""
    arch = AUDIT_ARCH.get(platform.machine())
    if arch is None:
        raise SyscallError(errno.ENOSYS, f"no seccomp arch value known for {platform.machine()}")
    program = deny_filter(arch)
    buf = ctypes.create_string_buffer(program, len(program))
    prog = _SockFprog(len(program) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _check(_libc.prctl(PR_SET_NO_NEW_PRIVS, ctypes.c_ulong(1), 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
    _check(
        _libc.prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(prog), 0, 0),
        "PR_SET_SECCOMP",
    )
    return prog.len


_LINUX_CAPABILITY_VERSION_3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [
        ("effective", ctypes.c_uint32),
        ("permitted", ctypes.c_uint32),
        ("inheritable", ctypes.c_uint32),
    ]


def drop_effective_cap_sys_ptrace() -> bool:
    """Clear CAP_SYS_PTRACE from this process's effective set (capset), keeping the permitted set.

    Yama lets a process with an effective CAP_SYS_PTRACE take any fd; the kernel's own ptrace check
    compares permitted sets, which stay as they were. So a root worker meets Yama as an unprivileged
    program does, and nothing else changes. Returns whether the capability was there to drop."""
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    _check(_libc.capget(ctypes.byref(header), data), "capget")
    if not data[0].effective >> CAP_SYS_PTRACE & 1:
        return False
    data[0].effective &= ~(1 << CAP_SYS_PTRACE)
    _check(_libc.capset(ctypes.byref(header), data), "capset")
    return True


# -- what this host allows ------------------------------------------------------------------------------
def ptrace_scope() -> int | None:
    """Yama's /proc/sys/kernel/yama/ptrace_scope (None: no Yama here): the one reader of it."""
    try:
        with open("/proc/sys/kernel/yama/ptrace_scope") as f:
            return int(f.read())
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class Creds:
    """What the kernel's ptrace access check (PTRACE_MODE_ATTACH_REALCREDS: pidfd_getfd) reads
    of one process: ids (real, effective, saved), capability sets, its user namespace, whether it
    is dumpable (None: not known), and its seccomp mode and filters (-1: not known)."""

    pid: int
    uid: tuple[int, int, int]
    gid: tuple[int, int, int]
    cap_eff: int
    cap_prm: int
    userns: int
    dumpable: bool | None
    seccomp: int = 0
    filters: int = 0


def creds_of(pid: int) -> Creds:
    """``Creds`` of a live process from /proc (OSError when it is gone or unreadable). Dumpable is
    read from the owner of /proc/PID, which the kernel makes root for a non-dumpable process: so
    it is not known for a process running as root."""
    s = _status(pid)
    uid = tuple(int(x) for x in s.get("Uid", "0 0 0 0").split()[:3])
    gid = tuple(int(x) for x in s.get("Gid", "0 0 0 0").split()[:3])
    owner = os.stat(f"/proc/{pid}").st_uid
    return Creds(
        pid,
        (uid[0], uid[1], uid[2]),
        (gid[0], gid[1], gid[2]),
        int(s.get("CapEff", "0"), 16),
        int(s.get("CapPrm", "0"), 16),
        os.stat(f"/proc/{pid}/ns/user").st_ino,
        None if uid[1] == 0 else owner == uid[1],
        int(s.get("Seccomp", "0")),
        int(s.get("Seccomp_filters", "-1")),
    )


def is_ancestor(a: int, b: int) -> bool | None:
    """Whether ``a`` is an ancestor of ``b`` (/proc's PPid chain); None when ``b`` is gone."""
    pid, seen = b, set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        try:
            pid = int(_status(pid).get("PPid", "0"))
        except (OSError, ValueError):
            return None if pid == b else False
        if pid == a:
            return True
    return False


@dataclass(frozen=True)
class PtraceRules:
    """The kernel's ptrace access check, rule by rule, for ``caller`` on ``target``: each True
    (lets it through), False (refuses) or None (not known). ``allowed``: what they add up to."""

    cap_sys_ptrace: bool
    same_ids: bool
    dumpable: bool | None
    caps_subset: bool | None
    yama: bool | None
    scope: int | None

    @property
    def allowed(self) -> bool | None:
        ordinary: bool | None
        if self.cap_sys_ptrace:
            ordinary = True
        elif not self.same_ids or self.dumpable is False or self.caps_subset is False:
            ordinary = False
        elif self.dumpable is None or self.caps_subset is None:
            ordinary = None
        else:
            ordinary = True
        if ordinary is False or self.yama is False:
            return False
        return True if ordinary and self.yama else None


def creds_of_facts(f: ProcessFacts) -> Creds:
    """A refusal's process facts (as the kernel or /proc read them at the call) as the ptrace
    check reads them: the kernel's dumpable value 1 is SUID_DUMP_USER, what ptrace access asks."""
    dumpable = None if f.dumpable < 0 else f.dumpable == 1
    return Creds(
        f.pid, (f.uid, f.euid, f.suid), (f.gid, f.egid, f.sgid), f.cap_eff, f.cap_prm, f.userns,
        dumpable, f.seccomp, f.filters,
    )  # fmt: skip


def ptrace_rules(
    caller: Creds, target: Creds, scope: int | None, ancestor: bool | None
) -> PtraceRules:
    """kernel/ptrace.c's __ptrace_may_access with commoncap and Yama, as facts allow: the caller's
    real uid and gid must equal all three of the target's, the target be dumpable, and (commoncap)
    the target's permitted capabilities be within the caller's, unless the caller holds
    CAP_SYS_PTRACE in the target's user namespace; then Yama: scope 1 wants an ancestor (or a
    ptracer exception, which /proc does not show) or CAP_SYS_PTRACE, 2 CAP_SYS_PTRACE, 3 nothing."""
    cap = bool(caller.cap_eff >> CAP_SYS_PTRACE & 1) and caller.userns == target.userns
    same = set(target.uid) == {caller.uid[0]} and set(target.gid) == {caller.gid[0]}
    subset = (target.cap_prm & ~caller.cap_prm) == 0 if caller.userns == target.userns else None
    yama: bool | None = {
        None: True,
        0: True,
        1: True if cap or ancestor else (None if ancestor is None else False),
        2: cap,
        3: False,
    }.get(scope)
    return PtraceRules(cap, same, target.dumpable, subset, yama, scope)


def _status(pid: int | str = "self") -> dict[str, str]:
    out: dict[str, str] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


def seccomp_mode(pid: int | str = "self") -> tuple[int, int]:
    """(mode, filters) from /proc/PID/status: 0 none, 1 strict, 2 filter."""
    s = _status(pid)
    return int(s.get("Seccomp", "0")), int(s.get("Seccomp_filters", "0"))


def has_cap_sys_ptrace(pid: int | str = "self") -> bool:
    return bool(int(_status(pid).get("CapEff", "0"), 16) >> CAP_SYS_PTRACE & 1)


def yama_blocks_siblings() -> str | None:
    """Why Yama would refuse a sibling's pidfd_getfd here (None: it would not)."""
    scope = ptrace_scope()
    me = creds_of(os.getpid())
    if ptrace_rules(me, me, scope, ancestor=False).yama is not False:  # a sibling: no ancestor
        return None
    if scope is None:
        return None
    if scope >= 3:
        return f"ptrace_scope is {scope}: no process may ptrace another, whatever it holds"
    if scope == 2 and not has_cap_sys_ptrace():
        return "ptrace_scope is 2: only CAP_SYS_PTRACE may ptrace"
    if scope == 1 and not has_cap_sys_ptrace():
        return "ptrace_scope is 1: only an ancestor, or a pid named with PR_SET_PTRACER, may ptrace"
    return None


# -- a process in another PID namespace -----------------------------------------------------------------
def _fork() -> int:
    with (
        warnings.catch_warnings()
    ):  # a worker may hold driver threads; the child only makes syscalls
        warnings.simplefilter("ignore", DeprecationWarning)
        return os.fork()


def open_from_new_pidns(pid: int) -> dict:
    """pidfd_open(``pid``) made by a process in a new PID namespace (unshare(CLONE_NEWPID), with a new
    user namespace when not root: as a container's process would make it).

    Returns ``{"unshare": "0" | errno name, "my_pid": its pid there, "errno": name or "", "names": ...}``.
    A child forks, unshares, and forks again (the grandchild is the namespace's first process); nothing
    it opens comes back here."""
    r, w = os.pipe()
    child = _fork()
    if child == 0:  # pragma: no cover - runs in the forked child, which only makes syscalls
        code = 1
        try:
            os.close(r)
            flags = CLONE_NEWPID | (CLONE_NEWUSER if os.geteuid() != 0 else 0)
            if _libc.unshare(ctypes.c_int(flags)) != 0:
                e = ctypes.get_errno()
                os.write(w, json.dumps({"unshare": errno.errorcode.get(e, "?")}).encode())
                os._exit(0)
            inner = os.fork()
            if inner == 0:
                report = {"unshare": "0", "my_pid": os.getpid(), "errno": "", "names": ""}
                try:
                    os.close(os.pidfd_open(pid))
                    # /proc is still the outer namespace's mount: do not read names from it
                    report["names"] = (
                        "itself" if pid == os.getpid() else "another process of this namespace"
                    )
                except OSError as exc:
                    report["errno"] = errno.errorcode.get(exc.errno or 0, "?")
                os.write(w, json.dumps(report).encode())
                os._exit(0)
            _, status = os.waitpid(inner, 0)
            code = 0 if os.waitstatus_to_exitcode(status) == 0 else 1
        finally:
            os._exit(code)
    os.close(w)
    try:
        with os.fdopen(r, "rb") as f:
            data = f.read(4096)
    finally:
        os.waitpid(child, 0)
    try:
        return json.loads(data)
    except ValueError:
        return {"unshare": "?", "errno": "", "detail": "the namespace's process said nothing"}


def new_pidns_allowed() -> str | None:
    """Why a new PID namespace cannot be made here (None: it can), tried for real."""
    got = open_from_new_pidns(os.getpid())
    if got.get("unshare") != "0":
        return (
            f"unshare(CLONE_NEWPID{'' if os.geteuid() == 0 else '|CLONE_NEWUSER'}) is refused here "
            f"({got.get('unshare')}): unprivileged user namespaces are off, or a seccomp/AppArmor "
            "profile forbids them"
        )
    return None


# -- the doctor's question ------------------------------------------------------------------------------
def check_on_child() -> tuple[bool | None, str]:
    """Whether this process can take an fd from its own child with pidfd_getfd (the easiest case Yama
    allows): the child holds a pipe end; we take it and kcmp nothing, the call's success is the answer."""
    r, w = os.pipe()
    ready_r, ready_w = os.pipe()
    child = _fork()
    if child == 0:  # pragma: no cover - the child waits to be read from, then exits
        os.close(ready_r)
        os.write(ready_w, b"r")
        os.read(r, 1)
        os._exit(0)
    os.close(ready_w)
    try:
        os.read(ready_r, 1)
        pidfd = pidfd_open(child)
        try:
            got = pidfd_getfd(pidfd, r)
            os.close(got)
            return True, f"works (took fd {r} from child pid {child})"
        finally:
            os.close(pidfd)
    except SyscallError as exc:
        return False, f"{exc.code}: {exc.strerror}"
    finally:
        os.write(w, b"x")
        for fd in (r, w, ready_r):
            os.close(fd)
        os.waitpid(child, 0)
