"""``attach --can A B`` in words: each check's finding, and for every "no" the cause and the fix
for the failure people actually meet (EPERM in containers, PID namespaces, NCCL's silent change
of transport, leaked fds, memory kept after a peer died, nvidia-smi's accounting).

``trace/procfs/preflight.py`` makes each check a code and the facts it read; the words are made
here, where it is drawn. A check an older vmmtui wrote in words (no code) is drawn in those.
The ptrace rules are the kernel's access check for pidfd_getfd (PTRACE_MODE_ATTACH_REALCREDS,
kernel/ptrace.c; Yama: Documentation/admin-guide/LSM/Yama.rst); the namespaces' effects are
the CUDA driver's (legacy IPC handles need one IPC namespace) and NCCL's (abstract sockets are
per network namespace).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable, Mapping

from vmmtui.stream.events import PreflightCheck
from vmmtui.words.refusals import SCM_ROAD

Facts = Mapping[str, str | int | bool | None]
#: (finding, cause, fix)
Worded = tuple[str, str, str]

#: Yama's ptrace_scope values, in words
YAMA_RULES = {
    0: "0 (classic: same uid and dumpable, or CAP_SYS_PTRACE)",
    1: "1 (restricted: only an ancestor, or CAP_SYS_PTRACE)",
    2: "2 (admin only: CAP_SYS_PTRACE)",
    3: "3 (no attach at all)",
}
#: what a namespace that differs breaks, and how to share it
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
_YES = {True: "yes", False: "no", None: "not known"}


def _err(number: object) -> str:
    """``EPERM (Operation not permitted)``: an errno by name and the system's words."""
    n = int(number) if isinstance(number, int) else 0
    return f"{errno.errorcode.get(n, n)} ({os.strerror(n)})"


def _namespace(e: PreflightCheck, f: Facts) -> Worded:
    if e.ok:
        return "the same", "", ""
    cause, fix = NAMESPACES.get(str(f["ns"]), ("", ""))
    return f"different ({f['ino_a']} vs {f['ino_b']})", cause, fix


def _ptrace(e: PreflightCheck, f: Facts) -> Worded:
    a, b, scope = e.a, e.b, f["scope"]
    rule = (
        "Yama is not loaded"
        if scope is None
        else f"Yama ptrace_scope {YAMA_RULES.get(int(scope), str(scope))}"
    )
    dumpable = _YES[f["dumpable"]] if f["uid_b"] else "root: not known from /proc"  # type: ignore[index]
    finding = (
        f"{rule}; pid {a} runs as uid {f['uid_a']}, pid {b} as uid {f['uid_b']} (saved "
        f"{f['saved_b']}); pid {a} has CAP_SYS_PTRACE: {_YES[f['cap']]}; pid {a} is pid {b}'s "  # type: ignore[index]
        f"ancestor: {_YES[f['ancestor']]}; pid {b} dumpable: {dumpable}"  # type: ignore[index]
    )
    if e.ok is not False:
        return finding, "", ""
    if f["yama_ok"] is False and (f["cap_ok"] or f["same_ids"]):
        fix = (
            f"in pid {b}, name pid {a} with prctl(PR_SET_PTRACER, {a}), or start pid {a} "
            f"from pid {b}"
            if scope == 1
            else f"give pid {a} CAP_SYS_PTRACE (docker --cap-add=SYS_PTRACE)"
            if scope == 2
            else "nothing allows it while kernel.yama.ptrace_scope is 3"
        )
    elif not f["same_ids"]:
        fix = (
            f"run pid {a} as pid {b}'s user (uid {f['uid_b']}) or give it CAP_SYS_PTRACE "
            "(docker --cap-add=SYS_PTRACE)"
        )
    else:
        fix = f"give pid {a} CAP_SYS_PTRACE (docker --cap-add=SYS_PTRACE)"
    cause = (
        f"pidfd_getfd needs ptrace access (PTRACE_MODE_ATTACH_REALCREDS) to pid {b}; "
        "without it: pidfd_getfd: Operation not permitted (EPERM)"
    )
    return finding, cause, fix + ", or " + SCM_ROAD


def _tried(e: PreflightCheck, f: Facts) -> Worded:
    if f["call"] == "pidfd_open":
        text = f"pidfd_open({e.b}): {_err(f['errno'])}"
    elif e.ok:
        text = f"pidfd_getfd of B's fd {f['fd']} worked (the copy was closed at once)"
    else:
        text = f"pidfd_getfd of B's fd {f['fd']}: unavailable: {_err(f['errno'])}"
    finding = (
        text + f"; vmmtui runs as uid {f['euid']}: A's own credentials decide for A (see ptrace "
        "policy)"
    )
    if e.ok:
        return finding, "", ""
    return (
        finding,
        "the kernel refused ptrace access to B: Yama, a missing CAP_SYS_PTRACE, a seccomp "
        "filter (containers) or B not dumpable",
        "docker --cap-add=SYS_PTRACE, or " + SCM_ROAD,
    )


def _gpu(e: PreflightCheck, f: Facts) -> Worded:
    finding = (
        f"VMM {_YES[bool(f['vmm'])]}, POSIX-fd handles {_YES[bool(f['fd'])]}, "
        f"fabric handles {_YES[bool(f['fabric'])]}"
    )
    if e.ok:
        return finding, "", ""
    return (
        finding,
        "this device cannot export cuMem allocations as fds",
        "use legacy IPC (cudaIpcGetMemHandle) on this device",
    )


def _imex(e: PreflightCheck, f: Facts) -> Worded:
    if f["channels"]:
        return f"{f['channels']} channel(s): {f['shown']}", "", ""
    return (
        "no /dev/nvidia-caps-imex-channels/channel*: fabric handles cannot be imported (only "
        "needed across nodes / multi-node NVLink)",
        "fabric handles need the IMEX daemon and a channel device",
        "start nvidia-imex and create a channel (mknod), or use POSIX fds on one node",
    )


def _same_uid(e: PreflightCheck, f: Facts) -> Worded:
    finding = f"A runs as uid {f['uid_a']}, B as uid {f['uid_b']}"
    if e.ok:
        return finding, "", ""
    return (
        finding,
        "ptrace access (pidfd_getfd) across users needs CAP_SYS_PTRACE",
        "run both as one user, or " + SCM_ROAD,
    )


def _kcmp(e: PreflightCheck, f: Facts) -> Worded:
    if e.ok:
        return "kcmp(KCMP_FILE) answers for A and B", "", ""
    return (
        str(f["detail"]),
        "kcmp needs ptrace read access to both processes",
        "run vmmtui as their user or as root",
    )


#: each code's words, from the check and its facts
WORDS: dict[str, Callable[[PreflightCheck, Facts], Worded]] = {
    "no-such-process": lambda e, f: (
        f"pid {f['pid']} does not exist",
        "it exited or the number is wrong",
        "give the pids of two running processes (ps -eo pid,cmd)",
    ),
    "no-permission": lambda e, f: (
        f"pid {f['pid']}: no permission ({f['error']})",
        "its /proc entries are not readable by this user",
        "run vmmtui as that user or as root",
    ),
    "both-there": lambda e, f: (f"A = pid {e.a}, B = pid {e.b}", "", ""),
    "same-uid": _same_uid,
    "namespace-unread": lambda e, f: (f"unknown: {f['error']}", "", ""),
    "namespace": _namespace,
    "ptrace-unread": lambda e, f: (f"unknown: {f['error']}", "", ""),
    "ptrace": _ptrace,
    "seccomp": lambda e, f: (
        f"pid {e.a} runs under a seccomp filter (mode 2, {f['filters']} filters)",
        "container runtimes' default profiles refuse pidfd_getfd without CAP_SYS_PTRACE "
        "(EPERM), whatever ptrace_scope says",
        "docker --cap-add=SYS_PTRACE, or a profile that allows pidfd_getfd",
    ),
    "pidfd": lambda e, f: (
        ("pidfd_open works", "", "")
        if e.ok
        else (
            f"pidfd_open: {_err(f['errno'])}",
            "pidfd_open needs Linux ≥ 5.3 and pidfd_getfd ≥ 5.6",
            SCM_ROAD,
        )
    ),
    "getfd-tried": _tried,
    "getfd-not-tried": lambda e, f: (
        f"not tried: {f['error'] or 'B has no open fd to try'}",
        "",
        "",
    ),
    "kcmp": _kcmp,
    "no-device": lambda e, f: (f"no device checks: {f['error'] or 'no driver'}", "", ""),
    "gpu": _gpu,
    "imex": _imex,
    "after-sharing": lambda e, f: (
        "what to watch once it works",
        "an importer that fails cuMemImportFromShareableHandle often forgets to close the fd it "
        "received (fds leak); memory stays allocated while any importer holds it, even after the "
        "exporter died; nvidia-smi and NVML charge imported memory to the exporter only",
        "close received fds on every path; release imports when a peer dies; `vmmtui watch -- "
        "CMD` reports all three",
    ),
}


def worded(e: PreflightCheck) -> Worded:
    """(finding, cause, fix) of a check: from its code and facts; an older vmmtui's own words;
    for a code this version does not know, or facts that do not fit it, its code and facts."""
    if not e.code:
        return e.finding, e.cause, e.fix
    word = WORDS.get(e.code)
    try:
        if word is not None:
            return word(e, e.facts)
    except (KeyError, TypeError, ValueError):
        pass
    shown = ", ".join(f"{k} {v}" for k, v in sorted(e.facts.items()))
    return (f"{e.code}: {shown}" if shown else e.code), "", ""
