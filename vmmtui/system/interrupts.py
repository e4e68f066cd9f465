"""Signals from a user or a dying terminal (SIGINT, SIGTERM, SIGHUP), in one place.

Three ways to meet them, each installed only around what needs it and each restoring what was
there before, so that a caller running vmmtui in-process (the tests) gets its own handlers back:

- ``exit_at_once()``: while nothing of ours exists yet (start-up, argument parsing), a signal
  writes one line and exits 128 + signal, from any point of any import.
- ``interruptible()``: while a session runs, a signal raises ``Interrupted`` in the main thread, so
  that the code's ``finally`` blocks stop the workers and remove the directory.
- ``signals_held()``: cleanups that must not be cut in half (closing fds, unlinking the socket,
  stopping workers) hold the signals back in this thread and get them when the block ends.
  SIGKILL cannot be held; the producer's reaper covers it.

An event loop that wants the signals as messages (the Textual apps) installs its own handlers
with ``delivered_to(callback)`` (its command sets ``own_signals=True`` so that ``cli.main`` does
not install ``interruptible()`` around it), and what was there comes back when it ends.
The full-screen commands (the inspector, a replay, the trace inspector, the attach and watch
screens) share one exit-status rule, ``exit_status``. No Textual here.

A handler that goes on after the signal (``interruptible``, ``delivered_to``) first makes every
later write to our stdout and stderr one that never waits on their reader (``output.unblock``):
a stream into a pipe nobody reads (``| sleep 1000``) would otherwise keep the process in write()
past the signal, and its cleanup's lines in the next one.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from types import FrameType

from vmmtui.system import output
from vmmtui.system.early import STOP_SIGNALS

#: what ``signals_held`` holds back: the stop signals and SIGQUIT, where the platform has them
HELD = set(STOP_SIGNALS) | {s for s in [getattr(signal, "SIGQUIT", None)] if s is not None}
#: what ``exit_now`` writes: nothing of ours was running when the signal came
NOTHING_LEFT = "vmmtui: interrupted; nothing was left running"

Handler = Callable[[int, FrameType | None], object] | int | signal.Handlers | None


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP: stop, clean up, say where, exit 128 + signal (130 for Ctrl-C)."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signum)
        self.signum = signum


def exit_status(signalled: int | None, own: int = 0) -> int:
    """The exit status of a full-screen command: ended by a signal, 128 + it (Ctrl-C 130, SIGHUP
    129, SIGTERM 143; a screen reads Ctrl-C as a key, which counts as SIGINT); quit with q, the
    command's own status (``own``: a traced command's that ended by itself; 0 where none)."""
    return 128 + signalled if signalled is not None else own


def exit_now(signum: int, frame: FrameType | None = None) -> None:
    """One line and 128 + signal, at once: for when nothing of ours needs cleaning up."""
    os.write(2, NOTHING_LEFT.encode() + b"\n")
    os._exit(128 + signum)


def interrupt(signum: int, frame: FrameType | None = None) -> None:
    output.unblock()  # the cleanup's lines must not wait on a reader that does not read
    raise Interrupted(signum)


@contextlib.contextmanager
def handled_by(handler: Callable[[int, FrameType | None], object]) -> Iterator[None]:
    """``handler`` for every stop signal within the block; the previous handlers come back after.

    Only the main thread may install handlers: elsewhere this does nothing (the caller's thread
    is not the one the signals are delivered to anyway)."""
    try:
        old = {s: signal.signal(s, handler) for s in STOP_SIGNALS}
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h if h is not None else signal.SIG_DFL)


def exit_at_once() -> contextlib.AbstractContextManager[None]:
    """Within: a stop signal writes ``NOTHING_LEFT`` and exits 128 + signal."""
    return handled_by(exit_now)


def interruptible() -> contextlib.AbstractContextManager[None]:
    """Within: a stop signal raises ``Interrupted`` in the main thread."""
    return handled_by(interrupt)


def delivered_to(callback: Callable[[int], object]) -> contextlib.AbstractContextManager[None]:
    """Within: a stop signal calls ``callback(signum)`` (in the main thread, between bytecodes;
    an event loop posts itself a message from it) instead of raising."""

    def deliver(signum: int, frame: FrameType | None) -> None:
        output.unblock()  # a write interrupted by the signal starts again: it must not wait
        callback(signum)

    return handled_by(deliver)


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    if not hasattr(signal, "pthread_sigmask"):  # Windows: no signal masks (and no live runs)
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
