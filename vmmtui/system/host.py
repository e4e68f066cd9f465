"""What this host can run, said in one place: live runs need Linux (memfd_create, fds passed over
Unix sockets, /proc, pidfd_getfd, eBPF), and the cuda backend also needs cuda-python, which
installs only on Linux and Windows. Replays need neither: on macOS and Windows vmmtui replays."""

from __future__ import annotations

import importlib.util
import sys

#: what a user elsewhere can do instead of a live run
REPLAY_INSTEAD = (
    "`vmmtui replay h100-vmm-1mib` plays a session recorded on an H100 (--list: all of them)"
)
#: the one sentence for a cuda backend that cannot start for want of the platform or the bindings
CUDA_NEEDS = "CUDA needs Linux with an NVIDIA driver (and cuda-python)"


def platform_name() -> str:
    return {"darwin": "macOS", "win32": "Windows", "cygwin": "Cygwin"}.get(
        sys.platform, sys.platform
    )


def is_linux() -> bool:
    return sys.platform.startswith("linux")


def needs_linux(what: str, why: str = "") -> str | None:
    """One line (with the replay to run instead) when ``what`` cannot run on this platform; None on
    Linux. ``why``: what of Linux it uses."""
    if is_linux():
        return None
    return (
        f"{what} needs Linux{f' ({why})' if why else ''}: live runs need Linux; this is "
        f"{platform_name()}, where vmmtui replays: {REPLAY_INSTEAD}"
    )


def cuda_python_missing() -> str | None:
    """Why ``cuda.bindings`` cannot be imported (cuda-python not installed), or None when it can.

    Looked up, not imported: the bindings load the driver's library, which the caller may not want."""
    try:
        found = importlib.util.find_spec("cuda.bindings") is not None
    except (ImportError, ValueError):  # no ``cuda`` package at all (or a broken one)
        found = False
    return None if found else "cuda-python is not installed (pip install cuda-python)"
