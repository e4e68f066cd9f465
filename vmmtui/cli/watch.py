"""``vmmtui watch -- CMD ARGS…``: a short alias of ``vmmtui trace --poll -- CMD`` (the same code
path, ``trace.run_as``): run a command, follow its process tree by polling /proc, the stream and a
report at its end (exit code: the command's)."""

from __future__ import annotations

import argparse
import sys

from vmmtui.cli.options import EXIT_USAGE, number_arg

#: what ``vmmtui watch --help`` opens with: what it is for, and an example
ABOUT = """\
Run a command and follow its process tree by polling /proc (the same as
`vmmtui trace --poll -- CMD`): the GPU memory, memfds and fds its processes share, as it runs,
and the findings at its end. Exits with the command's exit code.

example:
  vmmtui watch -- python3 app.py
"""


def add_arguments(w: argparse.ArgumentParser) -> None:
    """``vmmtui watch``'s options, on the parser the command line made for it."""
    w.add_argument(
        "--json",
        action="store_true",
        help="print the event stream as JSON lines (the command's stdout goes to stderr)",
    )
    w.add_argument("--quiet", "-q", action="store_true", help="print only the findings")
    w.add_argument(
        "--interval",
        type=number_arg(0, 0.25, above=True, unit=" s"),
        default=0.1,
        help="seconds between scans (at most 0.25: ≥ 4 Hz)",
    )
    w.add_argument(
        "--no-nvml", action="store_true", help="do not ask NVML for GPU memory per process"
    )
    w.add_argument(
        "--record", metavar="FILE", help="write a recording (`vmmtui replay FILE` shows it)"
    )
    w.add_argument(
        "--text", action="store_true", help="print the stream as text lines, even on a terminal"
    )
    w.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")
    w.set_defaults(func=cmd_watch)


def cmd_watch(args: argparse.Namespace) -> int:
    from vmmtui.cli import trace

    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not command:
        print(
            "vmmtui watch: give a command after --, e.g. vmmtui watch -- python3 app.py",
            file=sys.stderr,
        )
        return EXIT_USAGE
    argv = ["--poll", "--interval", str(args.interval)]
    argv += [flag for flag, on in FLAGS.items() if getattr(args, on)]
    argv += ["--record", args.record] if args.record else []
    return trace.run_as([*argv, "--", *command], "watch")


#: watch's switches, as trace spells them
FLAGS = {"--json": "json", "-q": "quiet", "--no-nvml": "no_nvml", "--text": "text"}
