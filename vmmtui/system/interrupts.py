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

A terminal that goes away is SIGHUP, whether or not the kernel says so: ``terminal_watched()``
watches our terminal (the stdio fds that are ttys) and, when it hangs up, sends SIGHUP to our main
thread, so that whatever handles the stop signals then handles this too. The kernel sends SIGHUP
itself only to a terminal's controlling process and its foreground group; a vmmtui started with
no controlling terminal (``setsid -w vmmtui …``, ``runuser``) would otherwise read EOF for ever
(Textual's input thread then spins at full CPU) and live on with PPID 1 after ``tmux
kill-session``.

A handler that goes on after the signal (``interruptible``, ``delivered_to``) first makes every
later write to our stdout and stderr one that never waits on their reader (``output.unblock``):
a stream into a pipe nobody reads (``| sleep 1000``) would otherwise keep the process in write()
past the signal, and its cleanup's lines in the next one.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import threading
import time
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


#: when a stop signal was last heard (``time.monotonic()``), by this module's handlers and the
#: screens' (``heard``): the terminal's watcher sends none of its own for a hang-up the kernel
#: already signalled, so that a cleanup is not cut by a second signal
_last_heard = [float("-inf")]


def heard() -> None:
    """A handler of a stop signal says it came (the terminal's watcher then stays quiet)."""
    _last_heard[0] = time.monotonic()


def exit_now(signum: int, frame: FrameType | None = None) -> None:
    """One line and 128 + signal, at once: for when nothing of ours needs cleaning up."""
    os.write(2, NOTHING_LEFT.encode() + b"\n")
    os._exit(128 + signum)


def interrupt(signum: int, frame: FrameType | None = None) -> None:
    heard()
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
        heard()
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


#: what poll() says of a terminal that went away (its other side closed, or it was hung up):
#: a tty's poll sets POLLHUP once it is hung up (tty_io.c, hung_up_tty_poll) or its pty master is
#: closed (n_tty_poll, TTY_OTHER_CLOSED), whatever events were asked for
#: how long the watcher waits for the kernel's own SIGHUP to be heard before it sends one
KERNEL_SIGHUP_S = 0.3
GONE = select.POLLHUP | select.POLLERR | select.POLLNVAL


def terminal_fds() -> list[int]:
    """Our stdio fds that are a terminal (none when run from a pipe, a file or a test)."""
    found = []
    for fd in (0, 1, 2):
        with contextlib.suppress(OSError):
            if os.isatty(fd):
                found.append(fd)
    return found


@contextlib.contextmanager
def terminal_watched(fds: list[int] | None = None) -> Iterator[None]:
    """Within: our terminal going away (EOF or EIO from then on) is SIGHUP to our main thread.

    One thread waits in poll() for the hang-up alone (no events asked: the kernel reports
    POLLHUP and POLLERR whatever is asked), so it costs nothing until then; the block's end wakes
    it through a pipe and joins it. Nothing happens where no stdio fd is a terminal."""
    watched = terminal_fds() if fds is None else fds
    if not watched or not hasattr(signal, "pthread_kill"):
        yield
        return
    wake_r, wake_w = os.pipe()
    main = threading.main_thread().ident
    poller = select.poll()
    for fd in watched:
        poller.register(fd, 0)
    poller.register(wake_r, select.POLLIN)

    def watch() -> None:
        while True:
            try:
                ready = poller.poll()
            except InterruptedError:  # pragma: no cover - retried by Python itself (PEP 475)
                continue
            if any(fd == wake_r for fd, _ in ready):
                return
            if any(fd in watched and mask & GONE for fd, mask in ready):
                # a controlling terminal's hang-up comes with the kernel's SIGHUP: give its
                # handler a moment to say it heard it, and send one only where none came
                gone = time.monotonic()
                if wake_now.wait(KERNEL_SIGHUP_S):
                    return
                if _last_heard[0] < gone - KERNEL_SIGHUP_S and main is not None:
                    with contextlib.suppress(ProcessLookupError, OSError):
                        signal.pthread_kill(main, signal.SIGHUP)
                return

    wake_now = threading.Event()
    thread = threading.Thread(target=watch, name="terminal-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        wake_now.set()
        with contextlib.suppress(OSError):
            os.write(wake_w, b"x")
        thread.join(timeout=1.0)
        os.close(wake_r)
        os.close(wake_w)
