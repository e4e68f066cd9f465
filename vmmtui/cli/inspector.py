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
    p.set_defaults(func=cmd_app)

def cmd_app(args: argparse.Namespace) -> int:
    choice = choice_or_refuse(args)
    if choice is None:
        return EXIT_USAGE
    from vmmtui.tui.app import InspectorApp

    app = InspectorApp(config_from(args), choice, autoplay=args.autoplay, pace=args.pace,
                       screenshots=args.screenshots, transcript=args.transcript, stable=args.stable)
    app.run()
    return app.return_code or 0
