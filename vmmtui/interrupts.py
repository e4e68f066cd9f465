"""Cleanups that a signal cannot cut in half.

Closing fds, unlinking the socket and stopping workers must finish once started: the signals a
user or a dying terminal sends (SIGINT, SIGTERM, SIGHUP, SIGQUIT) are held back meanwhile in this
thread and delivered when the block ends. SIGKILL cannot be held; the producer's reaper covers it.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

HELD = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT}


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
