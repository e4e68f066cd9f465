"""Command line: ``vmmtui`` (the inspector), ``run`` (headless), ``soak``, ``bench``, ``doctor``.

Each command is a module with ``add_arguments(parser)`` that sets ``func``; ``main`` parses and
dispatches. A command's module is imported only when the command line names it (``COMMANDS``
holds each one's summary for ``vmmtui --help``): the inspector's first frame and ``attach --once``
do not pay for the other commands' imports. Signals (SIGINT, SIGTERM, SIGHUP;
``vmmtui.system.interrupts``): until a command runs, one line and exit 128 + signal at once;
while it runs, ``Interrupted`` is raised so that its cleanup runs, and it says where, unless the
command sets ``own_signals=True`` (``set_defaults``): then it installs its own, as an event loop
does with ``interrupts.delivered_to``. When ``main`` returns, the handlers it found are back (the
tests call it in-process). After a stop signal no write waits on the output's reader
(``system.output``); ``main`` settles that before it returns.
"""

from __future__ import annotations

import argparse
import errno
import importlib
import os
import signal
import sys
from typing import cast

from vmmtui.cli import inspector
from vmmtui.cli.options import EXIT_FAILED, EXIT_OK, EXIT_USAGE, HelpFormatter, Parser
from vmmtui.system import host, output
from vmmtui.system.interrupts import (
    NOTHING_LEFT,
    Interrupted,
    exit_at_once,
    interruptible,
    terminal_watched,
)

#: every command, in ``vmmtui --help``'s order, with its summary there; its module
#: ``vmmtui.cli.NAME`` (``ABOUT``, ``add_arguments``) is imported when the command line names it
COMMANDS: dict[str, str] = {
    "run": "run both workers to the end and print the log (exit 0 only when verified)",
    "soak": "many sessions in a row: fds, children, session directories and memory must not grow",
    "bench": "measure every path (VMM, legacy IPC, host-staged copy, memfd) against the device's copy bandwidth; writes JSON and an SVG plot",
    "doctor": "what this machine can run: driver, device, VMM, fds, kcmp, memfd",
    "attach": "follow the GPU memory, memfds, shm and fds that running processes share, from what is already true (= vmmtui trace -p PID…; --all: the polling node agent; --once: one scan; --can A B: preflight)",
    "watch": "run a command and follow the GPU memory, memfds, shm and fds its processes share by polling /proc (= `vmmtui trace --poll -- CMD`; exit code: the command's)",
    "trace": "trace every fd share (SCM_RIGHTS, pidfd_getfd), memfd, close and CUDA VMM/IPC call of a command, running pids or everything, with eBPF; a ledger of who holds what (exit code: the command's)",
    "replay": "open the inspector on a recording (a file, or a gallery name: --list)",
    "serve": "serve the inspector (or `replay FILE`) as a web page, for a class on laptops",
}
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


class Version(argparse.Action):
    """``--version``/``-V``: ``vmmtui X.Y.Z`` from the installed package's metadata, exit 0.
    The version is looked up only when asked for (not on every start)."""

    def __init__(self, option_strings, dest=argparse.SUPPRESS, **kwargs) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        from vmmtui.system.early import version

        print(f"vmmtui {version()}")
        parser.exit(EXIT_OK)


class Commands(argparse._SubParsersAction):
    """The commands' sub-parsers, each given its opening text and options (``ABOUT``,
    ``add_arguments``) only when it is chosen: at parse time, once argparse has read its name."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.filled: set[str] = set()

    def fill(self, name: str) -> None:
        """Give ``vmmtui NAME``'s parser its opening text and options (once)."""
        if name in self.filled:
            return
        command_parser = self._name_parser_map[name]
        module = importlib.import_module(f"vmmtui.cli.{name}")
        command_parser.description = module.ABOUT  # each --help opens with what it is for
        module.add_arguments(command_parser)
        self.filled.add(name)

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if values and values[0] in self._name_parser_map:
            self.fill(values[0])
        super().__call__(parser, namespace, values, option_string)


def parser(every_command: bool = False) -> argparse.ArgumentParser:
    """``vmmtui``'s parser; a command's options are added when it is parsed, or all at once with
    ``every_command`` (to read every command's help and options without parsing)."""
    p = Parser(
        prog="vmmtui",
        description=ABOUT,
        formatter_class=HelpFormatter,
    )
    p.add_argument("-V", "--version", action=Version, help="print vmmtui's version and exit")
    inspector.add_options(p)
    sub = cast(Commands, p.add_subparsers(dest="command", action=Commands))
    for name, summary in COMMANDS.items():
        sub.add_parser(name, help=summary, formatter_class=HelpFormatter)
        if every_command:
            sub.fill(name)
    return p


def main(argv: list[str] | None = None) -> int:
    with exit_at_once():
        try:
            args = parser().parse_args(argv)
        except SystemExit:  # --help (or a usage error): its text is written here, where a stop
            try:  # signal still ends a wait for a reader that does not read, not in the exit
                sys.stdout.flush()
            except OSError:  # the reader left (| head -1): the rest goes nowhere
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise
        if args.command in LINUX_ONLY and (
            elsewhere := host.needs_linux(f"vmmtui {args.command}", LINUX_ONLY[args.command])
        ):
            print(f"vmmtui: {elsewhere}", file=sys.stderr)
            return EXIT_USAGE
        try:
            with (
                terminal_watched()
            ):  # a terminal that goes away is SIGHUP, told by the kernel or not
                if getattr(args, "own_signals", False):  # an event loop that installs its own
                    code = args.func(args)  # (interrupts.delivered_to) within this exit_at_once
                    sys.stdout.flush()  # what it printed after its screen: a signal ends the wait
                else:
                    with interruptible():
                        code = args.func(args)
                        # the last lines, still buffered: written while a stop signal can end the
                        # wait for a reader that does not read (not later, in the interpreter's
                        # exit)
                        sys.stdout.flush()
            return code
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
        finally:  # after a stop signal: what is left goes to the reader, if it takes it at once
            output.settle()


__all__ = ["COMMANDS", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "main", "parser"]
