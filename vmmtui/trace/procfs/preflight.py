"""``vmmtui attach --can A B``: can process A hand process B a GPU allocation, and by which road?

Each check reads the kernel's own word (/proc/PID/ns, /proc/PID/status, Yama's ptrace_scope) or
makes the real call (pidfd_open + pidfd_getfd on one of B's fds, kcmp); every "no" carries the cause
and the fix for the failure people actually meet (EPERM in containers, PID namespaces, NCCL's silent
change of transport, leaked fds, memory kept after a peer died, nvidia-smi's accounting).
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

#: Yama's ptrace_scope values, in words
YAMA_RULES = {
    0: "0 (classic: same uid and dumpable, or CAP_SYS_PTRACE)",
    1: "1 (restricted: only an ancestor, or CAP_SYS_PTRACE)",
    2: "2 (admin only: CAP_SYS_PTRACE)",
    3: "3 (no attach at all)",
}
_PIDFD = {"x86_64": (434, 438), "aarch64": (434, 438), "ppc64le": (434, 438), "s390x": (434, 438)}
_libc = ctypes.CDLL(None, use_errno=True)
SCM_ROAD = "send the fd over a Unix socket with SCM_RIGHTS instead: it needs no ptrace access"
NAMESPACES = {
    "pid": (
        "B's pid as A sees it is another number or none: pidfd_open of a pid sent over the wire opens the "
        "wrong process or fails with ESRCH, so pidfd_getfd (PyTorch expandable segments, UCX cuda_ipc) fails",
        "share the PID namespace (docker --pid=host or --pid=container:A; Kubernetes shareProcessNamespace: "
        "true), or " + SCM_ROAD,
    ),
    "net": (
        "abstract Unix socket names (NCCL's nccl-socket-<rank>-<hash> is abstract by default) exist per "
        "network namespace: B cannot connect, and NCCL then silently uses another transport (NCCL_DEBUG=INFO "
        "shows 'via SHM' or 'via NET/Socket' where it would show 'via P2P/CUMEM')",
        "share the network namespace (docker --network=host, one pod), or bind socket files in a directory "
        "both see",
    ),
    "ipc": (
        "legacy CUDA IPC handles (cudaIpcOpenMemHandle, PyTorch's default CUDA tensor sharing) and System V "
        "shared memory need the same IPC namespace; opening fails with an invalid-handle error",
        "share the IPC namespace (docker --ipc=host or --ipc=container:A)",
    ),
    "mnt": (
        "/dev/shm files and socket paths may differ between mount namespaces",
        "mount the same /dev/shm and socket directory into both (docker -v /dev/shm:/dev/shm)",
    ),
}


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


def _err(e: int) -> str:
    return f"{errno.errorcode.get(e, e)} ({os.strerror(e)})"


def preflight(a: int, b: int, device: bool = True) -> list[PreflightCheck]:
    """Every check, in order; the first says whether both processes are there to ask."""

    def check(name: str, ok: bool | None, finding: str, cause: str = "", fix: str = "") -> None:
        out.append(PreflightCheck(a, b, name, ok, finding, cause, fix))

    out: list[PreflightCheck] = []
    procs = {}
    for pid in dict.fromkeys((a, b)):  # one check, and one message, when A and B are one pid
        try:
            procs[pid] = proc_status(pid)
        except FileNotFoundError:
            check(
                "processes",
                False,
                f"pid {pid} does not exist",
                "it exited or the number is wrong",
                "give the pids of two running processes (ps -eo pid,cmd)",
            )
        except OSError as exc:
            check(
                "processes",
                False,
                f"pid {pid}: no permission ({exc.strerror})",
                "its /proc entries are not readable by this user",
                "run vmmtui as that user or as root",
            )
    if len(procs) < 2:
        return out
    pa, pb = procs[a], procs[b]
    check("processes", True, f"A = pid {a}, B = pid {b}")
    same_uid = pa.uid[1] == pb.uid[1]
    check(
        "same uid",
        same_uid,
        f"A runs as uid {pa.uid[1]}, B as uid {pb.uid[1]}",
        "" if same_uid else "ptrace access (pidfd_getfd) across users needs CAP_SYS_PTRACE",
        "" if same_uid else "run both as one user, or " + SCM_ROAD,
    )
    for ns, (cause, fix) in NAMESPACES.items():
        try:
            ia, ib = (os.stat(f"/proc/{p}/ns/{ns}").st_ino for p in (a, b))
        except OSError as exc:
            check(f"{ns} namespace", None, f"unknown: {exc.strerror}")
            continue
        check(
            f"{ns} namespace",
            ia == ib,
            "the same" if ia == ib else f"different ({ia} vs {ib})",
            "" if ia == ib else cause,
            "" if ia == ib else fix,
        )
    out += _ptrace_checks(a, b)
    out += _real_tries(a, b)
    if device:
        out += _device_checks(a, b)
    check(
        "after sharing",
        None,
        "what to watch once it works",
        "an importer that fails cuMemImportFromShareableHandle often forgets to close the fd it received (fds "
        "leak); memory stays allocated while any importer holds it, even after the exporter died; nvidia-smi "
        "and NVML charge imported memory to the exporter only",
        "close received fds on every path; release imports when a peer dies; `vmmtui watch -- CMD` reports "
        "all three",
    )
    return out


def _ptrace_checks(a: int, b: int) -> list[PreflightCheck]:
    """Whether pid ``a`` may take pid ``b``'s fds with pidfd_getfd, by the kernel's ptrace access
    rules (``vmmtui.backends.pidfd.ptrace_rules``, the one copy, which a traced refusal asks too),
    with one fix consistent with the rule that refuses."""
    try:
        ca, cb = creds_of(a), creds_of(b)
    except OSError as exc:
        return [PreflightCheck(a, b, "ptrace policy", None, f"unknown: {exc.strerror or exc}")]
    scope = ptrace_scope()
    ancestor = is_ancestor(a, b)
    rules = ptrace_rules(ca, cb, scope, ancestor)
    cap = bool(ca.cap_eff >> CAP_SYS_PTRACE & 1)
    yes = {True: "yes", False: "no", None: "not known"}
    rule = (
        "Yama is not loaded"
        if scope is None
        else f"Yama ptrace_scope {YAMA_RULES.get(scope, str(scope))}"
    )
    finding = (
        f"{rule}; pid {a} runs as uid {ca.uid[0]}, pid {b} as uid {cb.uid[1]} (saved {cb.uid[2]}); "
        f"pid {a} has CAP_SYS_PTRACE: {yes[cap]}; pid {a} is pid {b}'s ancestor: {yes[ancestor]}; "
        f"pid {b} dumpable: {yes[rules.dumpable] if cb.uid[1] else 'root: not known from /proc'}"
    )
    verdict = rules.allowed
    fix = ""
    if verdict is False:
        if rules.yama is False and (rules.cap_sys_ptrace or rules.same_ids):
            fix = (
                f"in pid {b}, name pid {a} with prctl(PR_SET_PTRACER, {a}), or start pid {a} "
                f"from pid {b}"
                if scope == 1
                else f"give pid {a} CAP_SYS_PTRACE (docker --cap-add=SYS_PTRACE)"
                if scope == 2
                else "nothing allows it while kernel.yama.ptrace_scope is 3"
            )
        elif not rules.same_ids:
            fix = (
                f"run pid {a} as pid {b}'s user (uid {cb.uid[1]}) or give it CAP_SYS_PTRACE "
                "(docker --cap-add=SYS_PTRACE)"
            )
        else:
            fix = f"give pid {a} CAP_SYS_PTRACE (docker --cap-add=SYS_PTRACE)"
        fix += ", or " + SCM_ROAD
    out = [
        PreflightCheck(
            a,
            b,
            "ptrace policy",
            verdict,
            finding,
            ""
            if verdict is not False
            else f"pidfd_getfd needs ptrace access (PTRACE_MODE_ATTACH_REALCREDS) to pid {b}; "
            "without it: pidfd_getfd: Operation not permitted (EPERM)",
            fix,
        )
    ]
    if ca.seccomp == 2:
        out.append(
            PreflightCheck(
                a,
                b,
                "seccomp",
                None,
                f"pid {a} runs under a seccomp filter (mode 2, {ca.filters} filters)",
                "container runtimes' default profiles refuse pidfd_getfd without CAP_SYS_PTRACE "
                "(EPERM), whatever ptrace_scope says",
                "docker --cap-add=SYS_PTRACE, or a profile that allows pidfd_getfd",
            )
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
        PreflightCheck(
            a,
            b,
            "kernel pidfd support",
            support,
            "pidfd_open works" if support else f"pidfd_open: {_err(e)}",
            "" if support else "pidfd_open needs Linux ≥ 5.3 and pidfd_getfd ≥ 5.6",
            "" if support else SCM_ROAD,
        )
    )
    try:
        fds = sorted(int(n) for n in os.listdir(f"/proc/{b}/fd"))
    except OSError as exc:
        fds, why = [], exc.strerror
    else:
        why = "B has no open fd to try"
    if support and fds:
        pidfd, e = _syscall(0, b, 0)
        if pidfd < 0:
            ok, text = False, f"pidfd_open({b}): {_err(e)}"
        else:
            got, e = _syscall(1, pidfd, fds[0], 0)
            os.close(pidfd)
            if got >= 0:
                os.close(got)
            ok, text = (
                got >= 0,
                (
                    f"pidfd_getfd of B's fd {fds[0]} worked (the copy was closed at once)"
                    if got >= 0
                    else f"pidfd_getfd of B's fd {fds[0]}: unavailable: {_err(e)}"
                ),
            )
        out.append(
            PreflightCheck(
                a,
                b,
                "pidfd_getfd try (from vmmtui)",
                ok,
                text + f"; vmmtui runs as uid {os.geteuid()}: A's own credentials decide for A "
                "(see ptrace policy)",
                ""
                if ok
                else "the kernel refused ptrace access to B: Yama, a missing "
                "CAP_SYS_PTRACE, a seccomp filter (containers) or B not dumpable",
                "" if ok else "docker --cap-add=SYS_PTRACE, or " + SCM_ROAD,
            )
        )
    elif support:
        out.append(PreflightCheck(a, b, "pidfd_getfd try (from vmmtui)", None, f"not tried: {why}"))
    try:
        fa = sorted(int(n) for n in os.listdir(f"/proc/{a}/fd"))
        k = kcmp_same_file(a, fa[0], b, fds[0]) if fa and fds else None
    except OSError:
        k = None
    if k is not None:
        out.append(
            PreflightCheck(
                a,
                b,
                "kcmp",
                k.same is not None,
                "kcmp(KCMP_FILE) answers for A and B" if k.same is not None else k.detail,
                "" if k.same is not None else "kcmp needs ptrace read access to both processes",
                "" if k.same is not None else "run vmmtui as their user or as root",
            )
        )
    return out


def _device_checks(a: int, b: int) -> list[PreflightCheck]:
    from vmmtui.backends.probe import probe

    out: list[PreflightCheck] = []
    info = probe()
    if not info.driver or info.error:
        out.append(
            PreflightCheck(a, b, "device", None, f"no device checks: {info.error or 'no driver'}")
        )
        return out
    for d in info.devices:
        vmm, fd, fabric = d.vmm, d.posix_fd, d.fabric
        out.append(
            PreflightCheck(
                a,
                b,
                f"GPU {d.index} ({d.name})",
                bool(vmm and fd),
                f"VMM {'yes' if vmm else 'no'}, POSIX-fd handles {'yes' if fd else 'no'}, "
                f"fabric handles {'yes' if fabric else 'no'}",
                "" if vmm and fd else "this device cannot export cuMem allocations as fds",
                "" if vmm and fd else "use legacy IPC (cudaIpcGetMemHandle) on this device",
            )
        )
    channels = glob.glob("/dev/nvidia-caps-imex-channels/channel*")
    out.append(
        PreflightCheck(
            a,
            b,
            "IMEX channel",
            bool(channels) or None,
            f"{len(channels)} channel(s): {', '.join(channels[:3])}"
            if channels
            else "no /dev/nvidia-caps-imex-channels/channel*: fabric handles cannot be imported "
            "(only needed across nodes / multi-node NVLink)",
            "" if channels else "fabric handles need the IMEX daemon and a channel device",
            ""
            if channels
            else "start nvidia-imex and create a channel (mknod), or use POSIX fds on one node",
        )
    )
    return out
