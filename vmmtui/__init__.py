"""vmmtui: watch CUDA VMM inter-process memory sharing happen, one step at a time.

When this process is the ``vmmtui`` command (not a worker, the probe, or a test that imports the
package), the package takes the stop signals as soon as it is imported, before ``__main__`` and
anything heavy: see ``vmmtui.system.early``.
"""

import os as _os
import sys as _sys
from typing import TYPE_CHECKING as _TYPE_CHECKING

if _TYPE_CHECKING:
    from vmmtui.verdict.api import tracing as tracing

from vmmtui.system.early import take_signals as _take_signals


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
    """``vmmtui.tracing``, the verdict as an assertion (``vmmtui.verdict.api``), imported when first
    asked for: ``import vmmtui`` stays as cheap as the command needs it."""
    if name == "tracing":
        from vmmtui.verdict.api import tracing as tracing

        return tracing
    raise AttributeError(f"module 'vmmtui' has no attribute {name!r}")


if _is_the_command():
    _take_signals()
