"""``vmmtui watch -- CMD ARGS…``: run a command, follow its process tree, report on its sharing at exit."""

from __future__ import annotations

import argparse
import sys

from vmmtui.cli.options import EXIT_USAGE, number_arg
from vmmtui.interrupts import delivered_to

#: what ``vmmtui watch --help`` opens with: what it is for, and an example
ABOUT = """\
Run a command and follow its process tree while it runs (polling /proc), then report the GPU
memory, memfds and fds its processes shared. Exits with the command's exit code.

example:
  vmmtui watch -- python3 app.py
"""


def add_parser(sub) -> None:
    w = sub.add_parser(
        "watch",
        help="run a command and follow the GPU memory, memfds, shm and fds its processes "
        "share; report at exit (exit code: the command's)",
    )
    w.add_argument(
        "--json",
        action="store_true",
        help="print the event stream as JSON lines (the command's stdout goes to stderr)",
    )
    w.add_argument("--quiet", "-q", action="store_true", help="print only the report at the end")
    w.add_argument(
        "--interval",
        type=number_arg(0, 0.25, above=True, unit=" s"),
        default=0.1,
        help="seconds between scans (at most 0.25: ≥ 4 Hz)",
    )
    w.add_argument(
        "--no-nvml", action="store_true", help="do not ask NVML for GPU memory per process"
    )
    w.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")
    w.set_defaults(func=cmd_watch)


def cmd_watch(args: argparse.Namespace) -> int:
    from vmmtui.attach.watch import CommandNotFound, Watch
    from vmmtui.console import print_json
    from vmmtui.events import (
        FdClosed,
        FdOpened,
        FdSnapshot,
        KcmpVerdict,
        Leak,
        ProcessGone,
        ProcessSeen,
        WatchFinished,
    )
    from vmmtui.narration import attach_lines

    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        print(
            "vmmtui watch: give a command after --, e.g. vmmtui watch -- python3 app.py",
            file=sys.stderr,
        )
        return EXIT_USAGE
    # under --json the stream alone is on stdout: the command's own output goes to stderr
    watch = Watch(command, args.interval, not args.no_nvml, stdout=2 if args.json else None)
    try:
        watch.start()
    except CommandNotFound as exc:
        print(f"vmmtui watch: {exc}", file=sys.stderr)
        return exc.code
    from rich.console import Console

    console = Console(highlight=False, soft_wrap=True)
    report: list = []
    routine = (ProcessSeen, ProcessGone, FdOpened, FdClosed)
    with delivered_to(watch.forward):  # the command decides when to end
        for e in watch.events():
            if args.json:
                print_json(e, sys.stdout)
                continue
            if isinstance(e, (FdSnapshot | KcmpVerdict, Leak | WatchFinished)):
                report.append(e)
                continue
            if args.quiet and isinstance(e, routine):
                continue
            for line in attach_lines(e):
                console.print(line)
    if not args.json:
        console.rule("vmmtui watch: report")
        for e in report:
            for line in attach_lines(e):
                console.print(line)
    return watch.exit.status if watch.exit else 1
