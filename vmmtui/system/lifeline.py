"""Dying with the process that started us: the kernel's parent-death signal, in one place.

A worker dies with its session, a traced command's first process with its tracer
(``vmmtui.trace.command``), and a page's inspector (``vmmtui serve``) with its server, by
PR_SET_PDEATHSIG = SIGKILL, which the kernel delivers however the parent ends (kill -9 included)
and even to a SIGSTOPped child. A process killed that way runs no cleanup of its own: what it
started dies the same way, and the producer's reaper removes the session directory.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1
#: resolved once, at import: a child between fork and exec must not dlopen (another thread of the
#: parent may have held the loader's lock at the fork)
_libc = ctypes.CDLL(None, use_errno=True)
#: the environment variable ``vmmtui serve`` sets for each page's vmmtui: the server's pid
SERVER_PID = "VMMTUI_SERVER_PID"
#: and where ``s`` saves a screenshot in a served page; empty: screenshots are off there
SERVED_SHOTS = "VMMTUI_SERVED_SHOTS"


def die_with_parent(parent_pid: int) -> bool:
    """Ask the kernel to SIGKILL us when ``parent_pid`` dies; False if it is already gone.

    The parent's pid comes from whoever started us, not from ``getppid()`` at start: a parent
    killed before this process ran has already handed it to another parent, and the death signal
    only watches the parent we have when we ask for it."""
    with contextlib.suppress(Exception):
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    return os.getppid() == parent_pid  # checked after asking: a later death sends the signal


def prctl(option: int, arg: object = 0) -> int:
    """prctl(2) with one argument (an int, or a ctypes pointer for a GET); -1 on failure."""
    value = ctypes.c_ulong(arg) if isinstance(arg, int) else arg
    return int(
        _libc.prctl(
            ctypes.c_int(option), value, ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)
        )
    )


def die_with_server() -> None:
    """In a page's vmmtui started by ``vmmtui serve``: die with the server (exit at once if it
    is already gone). Elsewhere nothing."""
    pid = os.environ.pop(SERVER_PID, None)
    if pid is None:
        return
    if not pid.isdigit() or not die_with_parent(int(pid)):
        os._exit(1)


def served_shots() -> tuple[bool, str | None]:
    """(whether this vmmtui draws a served page, the directory ``s`` saves into there or None)."""
    where = os.environ.get(SERVED_SHOTS)
    return where is not None, where or None
