"""``vmmtui soak``: many sessions in one process; nothing may grow."""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace

from vmmtui.cli.options import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    choice_or_refuse,
    config_from,
    count_arg,
    session_options,
)

#: what ``vmmtui soak --help`` opens with: what it is for, and an example
ABOUT = """\
Run many sessions in a row in one process and check that fds, child processes, session
directories and memory do not grow.

example:
  vmmtui soak --backend memfd --count 50
"""


def add_arguments(sk: argparse.ArgumentParser) -> None:
    """``vmmtui soak``'s options, on the parser the command line made for it."""
    session_options(sk)
    sk.add_argument(
        "--count", type=count_arg(1_000_000), default=200, help="sessions to run (default 200)"
    )
    sk.add_argument("--json", action="store_true", help="print the result as one JSON object")
    sk.set_defaults(func=cmd_soak)


def cmd_soak(args: argparse.Namespace) -> int:
    import json

    from vmmtui.bench.soak import soak
    from vmmtui.session import ConfigError, SessionError
    from vmmtui.words.troubleshooting import with_words

    choice = choice_or_refuse(args)
    if choice is None:
        return EXIT_USAGE
    # what the soak counts is the session's own (fds, children, memory): no eBPF probe per session
    config = replace(config_from(args), kernel=False)

    def progress(i: int, session) -> None:
        if not args.json and (i % 20 == 0 or i == args.count):
            print(
                f"{i}/{args.count} sessions"
                + ("" if session.verified else f" (last: {session.failure})"),
                flush=True,
            )

    try:
        result = soak(config, args.count, progress, choice)
    except SessionError as exc:
        print(f"vmmtui: {with_words(str(exc), exc.failure)}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, ConfigError) else EXIT_FAILED
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        for name, unit in (("fds", ""), ("children", ""), ("session_dirs", ""), ("rss", " bytes")):
            a, w, b = (getattr(r, name) for r in (result.start, result.warm, result.end))
            print(f"{name:<12} start {a}{unit}  after warm-up {w}{unit}  end {b}{unit}")
        print(
            f"{result.verified}/{result.count} verified on {result.backend} in {result.seconds:.1f} s: "
            + ("OK, nothing grew" if result.ok else "PROBLEMS: " + "; ".join(result.problems))
        )
    return EXIT_OK if result.ok else EXIT_FAILED
