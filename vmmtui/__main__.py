"""``python -m vmmtui`` and the ``vmmtui`` command.

The stop signals are taken over first thing, before anything heavy is imported (by the package,
``vmmtui/__init__.py``, as soon as the command imports it): a Ctrl-C, SIGTERM or SIGHUP during
start-up, before any worker exists, exits at once with one line and 128 + signal instead of a
traceback from an import. ``cli.main`` installs what a running command needs, and puts this back.
A page's vmmtui under ``vmmtui serve`` asks, as early, to die with the server (``lifeline``).
"""

import contextlib
import os
import sys

from vmmtui import _unfreed, take_signals


def run() -> int:
    take_signals()
    from vmmtui.system.lifeline import die_with_server

    die_with_server()  # a page's vmmtui under `vmmtui serve`: the server's kill -9 ends it too
    from vmmtui.cli import main

    code = main()
    if _unfreed[0]:  # a large heap (leave_unfreed): the output flushed, the memory left as is
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(run())
