"""``python -m vmmtui`` and the ``vmmtui`` command.

Signals are taken over before anything heavy is imported: a Ctrl-C during start-up, before any
worker exists, exits at once with one line instead of a traceback from an import.
"""

import os
import signal
import sys


def _early(signum, frame) -> None:
    os.write(2, b"vmmtui: interrupted; nothing was left running\n")
    os._exit(128 + signum)


def run() -> int:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _early)
    from vmmtui.cli import main

    return main()


if __name__ == "__main__":
    sys.exit(run())
