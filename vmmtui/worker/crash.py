"""Misbehave the way a buggy worker would, for the crash tests (the hidden ``--crash STEP:HOW``)."""

from __future__ import annotations

import ctypes
import os
import signal
import time


def due(spec: str | None, step: str) -> str | None:
    """How to misbehave at the start of ``step`` under ``spec`` ("STEP:HOW"), or None."""
    if not spec or ":" not in spec:
        return None
    at, how = spec.rsplit(":", 1)
    return how if at == step else None


def misbehave(how: str, control_fd: int | None) -> None:
    """``noise`` writes junk to stdout and stderr and goes on (it must not disturb anything);
    ``babble`` writes a malformed line to the control channel and goes on; ``kill``, ``segv`` and
    ``exit`` die at once; ``hang`` never finishes the step (a stalled driver call, a huge fill);
    anything else raises."""
    if how == "noise":
        os.write(1, b'{"type": "report", "fake": true}\n\x00\xff garbage on stdout\n')
        os.write(2, b"Traceback (most recent call last): not really, just noise on stderr\n")
        return
    if how == "babble" and control_fd is not None:
        os.write(control_fd, b"this is not JSON\n")
        return
    if how == "hang":
        while True:
            time.sleep(1)
    if how == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif how == "segv":
        ctypes.string_at(0)
    elif how == "exit":
        os._exit(3)
    raise RuntimeError("injected crash (--crash)")
