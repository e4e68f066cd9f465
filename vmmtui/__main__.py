"""``python -m vmmtui`` and the ``vmmtui`` command.

The stop signals are taken over first thing, before anything heavy is imported (by the package,
``vmmtui/__init__.py``, as soon as the command imports it): a Ctrl-C, SIGTERM or SIGHUP during
start-up, before any worker exists, exits at once with one line and 128 + signal instead of a
traceback from an import. ``cli.main`` installs what a running command needs, and puts this back.
A page's vmmtui under ``vmmtui serve`` asks, as early, to die with the server (``lifeline``).
"""

import atexit
import contextlib
import os
import signal
import sys

from vmmtui.system.early import STOP_SIGNALS, take_signals, unfreed


def run() -> int:
    take_signals()
    atexit.register(hold_stop_signals)  # registered first: runs last, see ended_with
    from vmmtui.system.lifeline import die_with_server

    die_with_server()  # a page's vmmtui under `vmmtui serve`: the server's kill -9 ends it too
    from vmmtui.cli import main

    code = main()
    ended_with(code)
    if unfreed[0]:  # a large heap (leave_unfreed): the output flushed, the memory left as is
        flush()
        os._exit(code)
    return code


def flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, RuntimeError):  # RuntimeError: a handler's
            stream.flush()  # flush inside the flush it interrupted


def ended_with(code: int) -> None:
    """The command is done and has said so: a stop signal from here on ends the process at once
    with the command's own status. Left to the interpreter, a signal during its shutdown (which
    puts the default actions back after the exit handlers) would turn a finished run into "killed
    by SIGTERM"; ``hold_stop_signals`` closes that last window."""

    def at_once(signum: int, frame: object) -> None:
        from vmmtui.system import output  # imported by then (cli.main): no import in a handler

        output.unblock()  # a last flush into a pipe nobody reads must not wait
        flush()
        output.settle()
        os._exit(code)

    for signum in STOP_SIGNALS:
        signal.signal(signum, at_once)


def hold_stop_signals() -> None:
    """The last exit handler: what is left of the shutdown runs with the stop signals held (they
    die with the process), the status being the command's own."""
    if hasattr(signal, "pthread_sigmask"):  # not on Windows
        signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)


if __name__ == "__main__":
    sys.exit(run())
