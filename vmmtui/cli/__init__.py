"""Command line: ``vmmtui`` (the inspector), ``run`` (headless), ``soak``, ``bench``, ``doctor``.

Each command is a module with ``add_parser(sub)`` that sets ``func``; ``main`` parses and
dispatches. Signals (SIGINT, SIGTERM, SIGHUP; ``vmmtui.system.interrupts``): until a command runs, one
line and exit 128 + signal at once; while it runs, ``Interrupted`` is raised so that its cleanup
runs, and it says where, unless the command sets ``own_signals=True`` (``set_defaults``): then it
installs its own, as an event loop does with ``interrupts.delivered_to``. When ``main`` returns,
the handlers it found are back (the tests call it in-process).
"""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys

from vmmtui.cli import attach, bench, doctor, inspector, replay, run, serve, soak, trace, watch
from vmmtui.cli.options import EXIT_FAILED, EXIT_OK, EXIT_USAGE, HelpFormatter, Parser
from vmmtui.system import host
from vmmtui.system.interrupts import NOTHING_LEFT, Interrupted, exit_at_once, interruptible

COMMANDS = (run, soak, bench, doctor, attach, watch, trace, replay, serve)
#: the commands that look at live processes through Linux alone (the sessions' commands ask the
#: backends, which say the same: ``backends.choose``)
LINUX_ONLY = {"trace": "eBPF and /proc", "attach": "/proc", "watch": "/proc"}
#: what ``vmmtui --help`` opens with
ABOUT = """\
Watch GPU memory (CUDA VMM) or a memfd being shared between processes, step by step: each
driver call, each fd in each process's fd table, the fd crossing the Unix socket. With no
command, opens the inspector on a live session (Linux); `vmmtui replay NAME` shows a recorded
one anywhere.

examples:
  vmmtui
  vmmtui --backend memfd --consumers 2
  vmmtui replay h100-vmm-1mib
"""


def parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="vmmtui",
        description=ABOUT,
        formatter_class=HelpFormatter,
    )
    inspector.add_options(p)
    sub = p.add_subparsers(dest="command")
    for command in COMMANDS:
        command.add_parser(sub)
    for name, command_parser in sub.choices.items():  # each --help opens with what it is for
        command_parser.description = sys.modules[f"vmmtui.cli.{name}"].ABOUT
        command_parser.formatter_class = HelpFormatter
    return p


def main(argv: list[str] | None = None) -> int:
    with exit_at_once():
        args = parser().parse_args(argv)
        if args.command in LINUX_ONLY and (
            elsewhere := host.needs_linux(f"vmmtui {args.command}", LINUX_ONLY[args.command])
        ):
            print(f"vmmtui: {elsewhere}", file=sys.stderr)
            return EXIT_USAGE
        try:
            if getattr(args, "own_signals", False):  # an event loop that installs its own
                return args.func(args)  # (interrupts.delivered_to) within this exit_at_once
            with interruptible():
                return args.func(args)
        except KeyboardInterrupt as exc:  # a command that had nothing to clean up, or it is done
            signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
            print(NOTHING_LEFT, file=sys.stderr)
            return 128 + signum
        except BrokenPipeError:  # the reader of our output left (`| head`): end as SIGPIPE would,
            # quietly, once the command's cleanup ran; stdout goes nowhere so that exit cannot fail
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 128 + getattr(signal, "SIGPIPE", 13)  # 13 where it has none (Windows)
        except OSError as exc:  # the output cannot be written: a full disk (> /dev/full), a quota
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG):
                raise
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # the rest is dropped
            print(f"vmmtui: cannot write the output: {exc.strerror}", file=sys.stderr)
            return EXIT_FAILED


__all__ = ["EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "main", "parser"]
