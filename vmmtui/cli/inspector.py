"""``vmmtui`` with no command: the Textual inspector."""

from __future__ import annotations

import argparse

from vmmtui.cli.options import (
    EXIT_USAGE,
    choice_or_refuse,
    config_from,
    positive_arg,
    session_options,
)


def add_options(p: argparse.ArgumentParser) -> None:
    """The inspector is what ``vmmtui`` with no command opens: its options live on the top parser."""
    session_options(p)
    p.add_argument("--autoplay", action="store_true", help="play the whole sequence by itself")
    p.add_argument("--pace", type=positive_arg, default=1.0, help="seconds between autoplay steps (default 1.0)")
    p.add_argument("--screenshots", metavar="DIR", help="save an SVG screenshot after every step into DIR")
    p.add_argument("--transcript", metavar="FILE", help="write every event to FILE (.md for Markdown, .jsonl for JSON lines)")
    p.add_argument("--stable", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--record", metavar="FILE", help="write the session as a recording (.jsonl or .jsonl.gz) "
                   "for `vmmtui replay FILE`")
    p.add_argument("--cast", metavar="FILE.cast", help="write the screen as an asciinema v2 recording")
    p.set_defaults(func=cmd_app)

def cmd_app(args: argparse.Namespace) -> int:
    choice = choice_or_refuse(args)
    if choice is None:
        return EXIT_USAGE
    from vmmtui.tui.history import LiveInspector

    if args.record and not writable(args.record):
        return EXIT_USAGE
    if args.record and choice.name == "cuda":
        from vmmtui.record.recording import cuda_identity

        cuda_identity(args.device)  # the header's driver and device, asked before the app starts
    app = LiveInspector(config_from(args), choice, autoplay=args.autoplay, pace=args.pace,
                        screenshots=args.screenshots, transcript=args.transcript, stable=args.stable,
                        record=args.record, cast=args.cast)
    app.run()
    return app.return_code or 0


def writable(path: str) -> bool:
    """Whether FILE (--record) can be written; says why not in one line (checked before any worker starts)."""
    import os
    import sys

    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        print(f"vmmtui: cannot write the recording {path}: "
              + ("it is a directory" if os.path.isdir(path) else f"{folder} is not a writable directory")
              + "; choose a writable --record FILE", file=sys.stderr)
        return False
    return True
