"""``vmmtui attach PID…|--all|--can A B``: the sharing of programs vmmtui did not start; a short
alias of ``vmmtui trace -p`` (``trace.run_as``: one code path), and the preflight ``--can``."""

from __future__ import annotations

import argparse
from dataclasses import replace

from vmmtui.cli.options import positive_arg

#: what ``vmmtui attach --help`` opens with: what it is for, and an example
ABOUT = """\
Follow the GPU memory, memfds, shared memory and fds that running processes share (programs
vmmtui did not start), from what is already true in /proc and NVML, then as it changes: the same
as `vmmtui trace -p PID`, and with --all the polling node agent. --once: one scan and a report;
--can A B: whether process A could hand process B an allocation, and how.

examples:
  vmmtui attach 4242 4243
  vmmtui attach --all --once
  vmmtui attach --can 4242 4243
"""


def add_arguments(a: argparse.ArgumentParser) -> None:
    """``vmmtui attach``'s options, on the parser the command line made for it."""
    a.add_argument("pids", nargs="*", type=int, metavar="PID")
    a.add_argument(
        "--all",
        action="store_true",
        help="every process of this user (all as root) holding "
        "/dev/nvidia* fds, memfds or shared-memory mappings, by polling (= trace --all --poll)",
    )
    a.add_argument(
        "--can", nargs=2, type=int, metavar=("A", "B"), help="can A hand B an allocation, and how?"
    )
    a.add_argument("--once", action="store_true", help="one scan, a report, and exit")
    a.add_argument("--json", action="store_true", help="the event stream as JSON lines")
    a.add_argument("--quiet", "-q", action="store_true", help="print only the findings")
    a.add_argument(
        "--poll", action="store_true", help="poll /proc instead of eBPF (= trace -p PID --poll)"
    )
    a.add_argument(
        "--leaks",
        action="store_true",
        help="also look for /dev/shm and socket files of dead owners",
    )
    a.add_argument(
        "--duration", type=positive_arg, default=None, help="follow for this many seconds"
    )
    a.add_argument(
        "--prometheus",
        metavar="HOST:PORT",
        help="serve the sharing ledger as Prometheus metrics at http://HOST:PORT/metrics and keep "
        "following (a node agent: with --all, new processes are picked up; needs vmmtui[fleet])",
    )
    a.add_argument(
        "--record", metavar="FILE", help="write a recording (`vmmtui replay FILE` shows it)"
    )
    a.add_argument(
        "--no-nvml", action="store_true", help="do not ask NVML for GPU memory per process"
    )
    a.add_argument(
        "--text", action="store_true", help="print the stream as text lines, even on a terminal"
    )
    a.add_argument("--screenshot", metavar="FILE", help=argparse.SUPPRESS)  # refused: one line
    a.set_defaults(func=cmd_attach)


def _bad_pid(pids: list[int]) -> bool:
    """Says (one line) the first number that cannot be a process id: the same words for PIDs and --can."""
    import sys

    bad = [p for p in pids if p <= 0]
    if bad:
        print(f"vmmtui attach: {bad[0]} is not a process id", file=sys.stderr)
    return bool(bad)


#: attach's switches, as trace spells them
FLAGS = {
    "--json": "json",
    "-q": "quiet",
    "--poll": "poll",
    "--no-nvml": "no_nvml",
    "--text": "text",
}


def cmd_attach(args: argparse.Namespace) -> int:
    """``attach PID…`` is ``trace -p PID…`` and ``attach --all`` is ``trace --all --poll`` (the
    polling node agent: any user, every process holding shared memory); ``--once`` is one poll.
    Only ``--can`` (a question about two processes, not a stream) is attach's own."""
    import sys

    from vmmtui.cli.options import EXIT_FAILED, EXIT_OK, EXIT_USAGE

    if args.screenshot:
        print(
            "vmmtui attach: --screenshot: attach now shows the trace's screen; record the "
            "stream (--record FILE) and replay it (vmmtui replay FILE) instead",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.can:
        from vmmtui.render.console import print_json
        from vmmtui.trace.procfs.preflight import preflight
        from vmmtui.words.narration import attach_lines
        from vmmtui.words.preflight import worded as preflight_words

        if _bad_pid(args.can):
            return EXIT_USAGE
        if args.can[0] == args.can[1]:
            print(
                f"vmmtui attach: --can A B needs two processes (both are {args.can[0]})",
                file=sys.stderr,
            )
            return EXIT_USAGE

        checks = preflight(*args.can)
        for c in checks:
            if args.json:  # the facts, and their words for a reader of the lines (as findings')
                finding, cause, fix = preflight_words(c)
                print_json(replace(c, finding=finding, cause=cause, fix=fix), sys.stdout)
            else:
                for line in attach_lines(c):
                    _console().print(line)
        if any(c.name == "processes" and c.ok is False for c in checks):
            return EXIT_USAGE
        return EXIT_OK if not any(c.ok is False for c in checks) else EXIT_FAILED
    if not args.pids and not args.all:
        print(
            "vmmtui attach: give PIDs, --all or --can A B (see vmmtui attach --help)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if _bad_pid(args.pids):
        return EXIT_USAGE
    from vmmtui.cli import trace

    argv = ["--all", "--poll"] if args.all else ["-p", *map(str, dict.fromkeys(args.pids))]
    argv += [flag for flag, on in FLAGS.items() if getattr(args, on)]
    for option in ("duration", "prometheus", "record"):
        if getattr(args, option) is not None:
            argv += [f"--{option}", str(getattr(args, option))]
    return trace.run_as(argv, "attach", once=args.once, leaks=args.leaks or args.once)


def _console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)
