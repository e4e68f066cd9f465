"""``vmmtui doctor``: what this machine can run, asked of the driver and the kernel."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from vmmtui.backends import cuda_unusable
from vmmtui.backends.probe import DeviceRecord, imex_channels, probe
from vmmtui.stream.sizes import format_size
from vmmtui.system import host
from vmmtui.system.fdtable import kcmp_same_file


@dataclass
class Finding:
    name: str
    value: str
    ok: bool | None = True  # None: informational


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    cuda_ok: bool = False
    memfd_ok: bool = False

    @property
    def runnable(self) -> bool:
        return self.cuda_ok or self.memfd_ok


def check_memfd() -> tuple[bool, str]:
    """memfd_create + SCM_RIGHTS-style sharing works here: make one, write, read through a dup."""
    try:
        fd = os.memfd_create("vmmtui-doctor", os.MFD_CLOEXEC)
    except (OSError, AttributeError) as exc:
        return False, f"memfd_create failed: {exc}"
    try:
        os.ftruncate(fd, 4096)
        os.pwrite(fd, b"vmmtui", 0)
        a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        with a, b:
            socket.send_fds(a, [b"x"], [fd])
            _, fds, _, _ = socket.recv_fds(b, 16, 1)
            try:
                same = os.pread(fds[0], 6, 0) == b"vmmtui"
            finally:
                for f in fds:
                    os.close(f)
        return same, "works (memfd_create, SCM_RIGHTS, read back)" if same else "data did not match"
    except OSError as exc:
        return False, str(exc)
    finally:
        os.close(fd)


def check_kcmp() -> tuple[bool | None, str]:
    r, w = os.pipe()
    d = os.dup(r)
    try:
        same = kcmp_same_file(os.getpid(), r, os.getpid(), d)
        other = kcmp_same_file(os.getpid(), r, os.getpid(), w)
    finally:
        for fd in (r, w, d):
            os.close(fd)
    if same.same is None:
        return None, same.detail
    return (same.same and other.same is False), "works (KCMP_FILE tells a dup from another file)"


def ptrace_scope() -> str:
    """Yama's ptrace_scope in words (read by ``vmmtui.backends.pidfd``, the one reader)."""
    from vmmtui.backends.pidfd import ptrace_scope as scope

    value = scope()
    return "no Yama policy file (no restriction from Yama)" if value is None else str(value)


IMEX_FIX = (
    "on an NVLink-domain system (GB200 NVL72) start the IMEX daemon (nvidia-imex) and create a channel, "
    "/dev/nvidia-caps-imex-channels/channel0; on one node POSIX fds are the way, and vmmtui uses them"
)


def fabric_finding(prefix: str, d: DeviceRecord, channels: str) -> Finding:
    """Fabric handles as they are: the device attribute, then what cuMemCreate answered in the probe."""
    name = f"{prefix} fabric handles"
    if not d.fabric:
        return Finding(name, "not supported by the device (HANDLE_TYPE_FABRIC_SUPPORTED = 0)", None)
    tried = d.fabric_create
    if tried == "CUDA_SUCCESS":
        return Finding(
            name, f"usable: cuMemCreate with CU_MEM_HANDLE_TYPE_FABRIC works ({channels})", True
        )
    if tried == "CUDA_ERROR_NOT_PERMITTED":
        return Finding(
            name,
            f"supported by the device, not usable here: no IMEX channel (cuMemCreate with "
            f"CU_MEM_HANDLE_TYPE_FABRIC → {tried}; {channels}) (fix: {IMEX_FIX})",
            None,
        )
    if tried is None:
        return Finding(name, "supported by the device (not tried: no VMM)", None)
    return Finding(
        name,
        f"supported by the device, not usable here: cuMemCreate with CU_MEM_HANDLE_TYPE_FABRIC → "
        f"{tried} ({channels})",
        None,
    )


def kernels_finding(prefix: str, d: DeviceRecord) -> Finding | None:
    """Whether the fill/verify kernels load (the probe tried): else --verify auto checks on the host."""
    if not d.kernels_tried:
        return None
    if d.kernels_error:
        return Finding(
            f"{prefix} fill/verify kernels",
            f"cannot load: {d.kernels_error}; --verify auto checks on the host instead",
            False,
        )
    return Finding(f"{prefix} fill/verify kernels", f"load ({d.kernels})", True)


def pool_finding(prefix: str, d: DeviceRecord) -> Finding:
    """Whether --mechanism pool can run on this device: pools, and the POSIX-fd bit among their handle types."""
    types = d.pool_handle_types
    fd = bool(types & 1)  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
    if not d.memory_pools:
        return Finding(
            f"{prefix} memory pools", "not supported (--mechanism pool cannot run)", False
        )
    return Finding(
        f"{prefix} memory pools",
        f"yes; pool handle types {types:#x}"
        + (
            ", POSIX fd among them: --mechanism pool can run" if fd else ": no POSIX fd, no sharing"
        ),
        fd,
    )


def pidfd_finding() -> Finding:
    """The pidfd road (PyTorch's expandable segments, UCX cuda_ipc) as this host allows it: the real call
    on a child of ours, then what would refuse it between siblings or in a container."""
    from vmmtui.backends import pidfd

    works, detail = pidfd.check_on_child()
    mode, filters = pidfd.seccomp_mode()
    scope = pidfd.ptrace_scope()
    cap = pidfd.has_cap_sys_ptrace()
    yama = pidfd.yama_blocks_siblings()
    parts = [
        f"pidfd_getfd on a child: {detail}",
        f"seccomp {('off', 'strict', 'filter')[mode] if mode < 3 else mode}"
        + (f" ({filters} filter(s))" if filters else ""),
        "Yama absent" if scope is None else f"Yama ptrace_scope {scope}",
        f"CAP_SYS_PTRACE {'yes' if cap else 'no'}",
    ]
    if yama:
        parts.append(f"between siblings: {yama} (vmmtui's producer names its consumer)")
    if not works:
        parts.append("fix: --transport scm-rights (SCM_RIGHTS needs no ptrace access)")
    return Finding("pidfd road", "; ".join(parts), works)


def serve_finding(port: int = 8000) -> Finding:
    """Whether ``vmmtui serve`` can run: textual-serve importable, and its default port free."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        import textual_serve  # noqa: F401

        have = f"textual-serve {version('textual-serve')}"
    except (ImportError, PackageNotFoundError) as exc:
        return Finding("serve", f"cannot run: {exc} (fix: pip install textual-serve)", False)
    try:
        with socket.create_server(("127.0.0.1", port)):
            free = f"port {port} on localhost free"
    except OSError as exc:
        free = f"port {port} on localhost taken ({exc.strerror}): use --port N"
    return Finding("serve", f"can run ({have}; {free})", True)


def diagnose(device: int = 0) -> Report:
    rep = Report()
    add = rep.findings.append
    if elsewhere := host.needs_linux("every live run"):  # nothing below can be asked here
        add(Finding("platform", elsewhere, False))
        return rep
    if missing := host.cuda_python_missing():
        add(Finding("cuda-python", f"{missing}: the cuda backend needs it; replays do not", None))
    info = probe()
    if not info.driver:
        add(Finding("NVIDIA driver", info.error or "not found", False))
    elif not info.bindings:
        add(
            Finding(
                "NVIDIA driver", "libcuda.so.1 loads (without cuda-python, not asked more)", None
            )
        )
    else:
        add(
            Finding(
                "NVIDIA driver",
                info.driver_api or info.error or "?",
                not info.error,
            )
        )
        channels = imex_channels()
        for d in info.devices:
            p = f"device {d.index}"
            add(Finding(f"{p} name", f"{d.name} (compute capability {d.compute_capability})", None))
            add(Finding(f"{p} VMM", "yes" if d.vmm else "no", d.vmm))
            add(Finding(f"{p} POSIX fd handles", "yes" if d.posix_fd else "no", d.posix_fd))
            add(fabric_finding(p, d, channels))
            if d.granularity_min is not None and d.granularity_rec is not None:
                add(
                    Finding(
                        f"{p} granularity",
                        f"minimum {format_size(d.granularity_min)}, "
                        f"recommended {format_size(d.granularity_rec)}",
                        None,
                    )
                )
            add(
                Finding(
                    f"{p} memory",
                    f"{format_size(d.mem_free)} free of {format_size(d.mem_total)}",
                    None,
                )
            )
            if (kernels := kernels_finding(p, d)) is not None:
                add(kernels)
            add(pool_finding(p, d))
    why = cuda_unusable(info, device)
    rep.cuda_ok = why is None
    add(Finding("cuda backend", "can run" if rep.cuda_ok else f"cannot run: {why}", rep.cuda_ok))
    rep.memfd_ok, detail = check_memfd()
    add(Finding("memfd backend", detail, rep.memfd_ok))
    ok, detail = check_kcmp()
    add(
        Finding(
            "kcmp(KCMP_FILE)",
            detail if ok is not None else f"{detail}: the inspector will say so",
            ok,
        )
    )
    add(Finding("ptrace_scope", ptrace_scope(), None))
    add(pidfd_finding())
    trace_findings(add)
    add(serve_finding())
    return rep


def trace_findings(add) -> None:
    """Whether ``vmmtui trace`` can use eBPF here (libbpf, BTF, privileges, the hooks that load,
    by a real load of the shipped object), before a user learns it at the first trace."""
    from vmmtui.trace.loader import readiness

    checks = readiness()
    ok = all(c[2] is not False for c in checks)
    add(
        Finding(
            "eBPF trace",
            "can run" if ok else "cannot run: `vmmtui trace` falls back to polling /proc",
            ok,
        )
    )
    for name, value, good in checks:
        add(Finding(f"  {name}", value, good))
