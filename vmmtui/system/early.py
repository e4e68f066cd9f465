"""What the ``vmmtui`` process needs before anything else of ours is imported: the stop signals
it answers at once while nothing runs, and the wish to leave without freeing a large heap.

The root package imports this module first (``vmmtui/__init__.py``), so it imports nothing of ours
and nothing heavy: a Ctrl-C during the first imports must already end the command with one line.
"""

import os
import signal
from functools import cache

#: = vmmtui.system.interrupts.NOTHING_LEFT (that module is not imported this early)
_NOTHING_LEFT = b"vmmtui: interrupted; nothing was left running\n"

#: the signals a user or a terminal sends to say "stop", those this platform has (Windows has no
#: SIGHUP): the one list, which vmmtui.system.interrupts and the apps use too
STOP_SIGNALS: tuple[int, ...] = tuple(
    s for s in (getattr(signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None
)


def _exit_now(signum, frame) -> None:
    os.write(2, _NOTHING_LEFT)
    os._exit(128 + signum)


def take_signals() -> None:
    """SIGINT, SIGTERM and SIGHUP write one line and exit 128 + signal, from any point of any
    import: nothing of ours exists yet. ``cli.main`` replaces this while a command runs."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, _exit_now)


#: set by a command that ends with a large heap (a long trace's inspector keeps every event):
#: the ``vmmtui`` process then leaves without freeing it object by object (seconds, after the
#: user asked to quit), once its own cleanup is done; see ``__main__.run``
unfreed = [False]


def leave_unfreed() -> None:
    """Ask the ``vmmtui`` process to end with ``os._exit`` once the command has returned (its
    files closed, its children stopped, its probes detached): nothing is left to free but
    memory, which the kernel takes back at once. A caller in-process (a test) is not ended."""
    unfreed[0] = True


@cache
def version() -> str:
    """This vmmtui's version, from its installed package's metadata (pyproject's ``version``),
    the one place it is written."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("vmmtui")
    except PackageNotFoundError:  # run from a source tree that was never installed
        return "0+unknown"
