"""``vmmtui replay FILE|NAME``: the inspector on a recording (no workers, no driver); ``--list``: the gallery."""

from __future__ import annotations

import argparse
import sys

from vmmtui.cli.options import EXIT_OK, EXIT_USAGE, positive_arg


def add_parser(sub) -> None:
    p = sub.add_parser(
        "replay", help="open the inspector on a recording (a file, or a gallery name: --list)"
    )
    p.add_argument(
        "recording",
        nargs="?",
        metavar="FILE|NAME",
        help="a recording (.jsonl or .jsonl.gz, from --record) or a gallery name such as h100-vmm",
    )
    p.add_argument(
        "--list", action="store_true", help="list the gallery's recordings with machine and date"
    )
    add_view_options(p)
    p.set_defaults(func=cmd_replay)


def add_view_options(p: argparse.ArgumentParser) -> None:
    """What a replay shares with the inspector: autoplay, pace, screenshots, transcript, cast, stable."""
    p.add_argument("--autoplay", action="store_true", help="play the recording by itself")
    p.add_argument(
        "--pace",
        type=positive_arg,
        default=1.0,
        help="seconds between autoplay steps (default 1.0)",
    )
    p.add_argument(
        "--step", type=int, default=0, metavar="N", help="open at step N (default: the start)"
    )
    p.add_argument(
        "--screenshots", metavar="DIR", help="save an SVG screenshot of every step shown into DIR"
    )
    p.add_argument(
        "--transcript", metavar="FILE", help="write the recording's events to FILE (.md or .jsonl)"
    )
    p.add_argument(
        "--cast", metavar="FILE.cast", help="write the screen as an asciinema v2 recording"
    )
    p.add_argument("--stable", action="store_true", help="mask pids, addresses, inodes and timings")


def load(name: str):
    """The Recording, or None after printing the one-line reason it cannot be read."""
    from vmmtui.record import RecordingError
    from vmmtui.record.gallery import resolve

    try:
        return resolve(name)
    except RecordingError as exc:
        print(f"vmmtui: {exc}", file=sys.stderr)
        return None


def cmd_replay(args: argparse.Namespace) -> int:
    if args.list:
        from vmmtui.record.gallery import listing

        print(listing())
        return EXIT_OK
    if not args.recording:
        print(
            "vmmtui replay: give a recording FILE or a gallery NAME (see vmmtui replay --list)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    from vmmtui.cli.inspector import cast_problem, refuse, screenshots_problem, transcript_problem

    for value, check in (
        (args.transcript, transcript_problem),
        (args.screenshots, screenshots_problem),
        (args.cast, cast_problem),
    ):
        problem = value and check(value)
        if problem:
            return refuse(problem)
    recording = load(args.recording)
    if recording is None:
        return EXIT_USAGE
    if recording.note:
        print(f"vmmtui: {recording.path}: {recording.note}", file=sys.stderr)
    from vmmtui.tui.replay import ReplayApp

    app = ReplayApp(
        recording,
        autoplay=args.autoplay,
        pace=args.pace,
        screenshots=args.screenshots,
        transcript=args.transcript,
        stable=args.stable,
        cast=args.cast,
        start_at=args.step,
    )
    app.run()
    from vmmtui.cli.inspector import ended

    return ended(app)
