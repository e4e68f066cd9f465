"""Command line: ``vmmtui`` (the inspector), ``run`` (headless), ``soak``, ``bench``, ``doctor``.

Each command is a module with ``add_parser(sub)`` that sets ``func``; ``main`` installs the signal
handling (one line and 128 + signal on SIGINT, SIGTERM, SIGHUP) and dispatches.
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys

from vmmtui.cli import attach, bench, doctor, inspector, replay, run, serve, soak, trace, watch
from vmmtui.cli.options import EXIT_FAILED, EXIT_OK, EXIT_USAGE, Interrupted, Parser, interrupt

COMMANDS = (run, soak, bench, doctor, attach, watch, trace, replay, serve)


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="vmmtui",
        description="Watch CUDA VMM memory sharing between two processes, "
        "step by step. With no command, opens the inspector.",
    )
    inspector.add_options(p)
    sub = p.add_subparsers(dest="command")
    for command in COMMANDS:
        command.add_parser(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, interrupt)
    try:
        args = parser().parse_args(argv)
        return args.func(args)
    except KeyboardInterrupt as exc:  # before or after a session: nothing of ours is running
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        print("vmmtui: interrupted; nothing was left running", file=sys.stderr)
        return 128 + signum
    except OSError as exc:  # the output cannot be written: a full disk (> /dev/full), a closed pipe
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EPIPE):
            raise
        # what is still buffered for stdout is dropped, or the exit would fail on it again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        if exc.errno != errno.EPIPE:  # a reader that went away (| head) needs no word
            print(f"vmmtui: cannot write the output: {exc.strerror}", file=sys.stderr)
        return EXIT_FAILED


__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "main", "parser"]
