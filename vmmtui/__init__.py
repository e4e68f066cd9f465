"""vmmtui: watch CUDA VMM inter-process memory sharing happen, one step at a time.

When this process is the ``vmmtui`` command (not a worker, the probe, or a test that imports the
package), the package takes the stop signals as soon as it is imported, before ``__main__`` and
anything heavy: see ``take_signals``.
"""

import os as _os
import signal as _signal
import sys as _sys
from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from vmmtui.api import tracing as tracing

__version__ = "0.1.0"

#: = vmmtui.system.interrupts.NOTHING_LEFT (that module is not imported this early)
_NOTHING_LEFT = b"vmmtui: interrupted; nothing was left running\n"

#: the signals a user or a terminal sends to say "stop", those this platform has (Windows has no
#: SIGHUP): the one list, which vmmtui.system.interrupts and the apps use too
STOP_SIGNALS: tuple[int, ...] = tuple(
    s for s in (getattr(_signal, n, None) for n in ("SIGINT", "SIGTERM", "SIGHUP")) if s is not None
)


def _exit_now(signum, frame) -> None:
    _os.write(2, _NOTHING_LEFT)
    _os._exit(128 + signum)


def take_signals() -> None:
    """SIGINT, SIGTERM and SIGHUP write one line and exit 128 + signal, from any point of any
    import: nothing of ours exists yet. ``cli.main`` replaces this while a command runs."""
    for signum in STOP_SIGNALS:
        _signal.signal(signum, _exit_now)


#: set by a command that ends with a large heap (a long trace's inspector keeps every event):
#: the ``vmmtui`` process then leaves without freeing it object by object (seconds, after the
#: user asked to quit), once its own cleanup is done; see ``__main__.run``
_unfreed = [False]


def leave_unfreed() -> None:
    """Ask the ``vmmtui`` process to end with ``os._exit`` once the command has returned (its
    files closed, its children stopped, its probes detached): nothing is left to free but
    memory, which the kernel takes back at once. A caller in-process (a test) is not ended."""
    _unfreed[0] = True


def _is_the_command() -> bool:
    """Whether this process is ``vmmtui`` or ``python -m vmmtui``, from the interpreter's own
    command line (``sys.orig_argv``; ``sys.argv[0]`` is ``-m`` while the package is imported)."""
    argv = _sys.orig_argv
    for i, arg in enumerate(argv[1:], 1):
        if arg == "-mvmmtui" or (arg == "-m" and argv[i + 1 : i + 2] == ["vmmtui"]):
            return True
        if arg in ("-m", "-c") or not arg.startswith("-"):
            break  # the first of these ends the interpreter's options
    return _os.path.basename(_sys.argv[0]) == "vmmtui"


def __getattr__(name: str):
    """``vmmtui.tracing``, the verdict as an assertion (``vmmtui.api``), imported when first
    asked for: ``import vmmtui`` stays as cheap as the command needs it."""
    if name == "tracing":
        from vmmtui.api import tracing as tracing

        return tracing
    raise AttributeError(f"module 'vmmtui' has no attribute {name!r}")


if _is_the_command():
    take_signals()
