"""``vmmtui`` with no command: the Textual inspector.

Start-up is on the clock (first frame < 0.4 s on a CPU): the output paths are checked before
anything heavy is imported, and where the backend needs the capability probe (a throw-away
process, slow on a GPU box) it runs in a thread while Textual is imported and the first frame is
drawn; the app's session thread waits for it. A refusal the probe finds before the app is up is
printed as one line (exit 2), as is one found after (the app exits 2 and the line is printed).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
from pathlib import Path

from vmmtui.cli.options import (
    EXIT_FAILED,
    EXIT_USAGE,
    config_from,
    pace_arg,
    refusal,
    session_options,
    terminal_missing,
)


def add_options(p: argparse.ArgumentParser) -> None:
    """The inspector is what ``vmmtui`` with no command opens: its options live on the top parser."""
    session_options(p)
    p.add_argument("--autoplay", action="store_true", help="play the whole sequence by itself")
    p.add_argument(
        "--pace",
        type=pace_arg,
        default=1.0,
        help="seconds between autoplay steps (default 1.0)",
    )
    p.add_argument(
        "--screenshots", metavar="DIR", help="save an SVG screenshot after every step into DIR"
    )
    p.add_argument(
        "--transcript",
        metavar="FILE",
        help="write every event to FILE (.md for Markdown, .jsonl for JSON lines)",
    )
    p.add_argument("--stable", action="store_true", help=argparse.SUPPRESS)
    p.add_argument(
        "--record",
        metavar="FILE",
        help="write the session as a recording (.jsonl or .jsonl.gz) for `vmmtui replay FILE`",
    )
    p.add_argument(
        "--cast", metavar="FILE.cast", help="write the screen as an asciinema v2 recording"
    )
    p.set_defaults(func=cmd_app)


def transcript_problem(path: str) -> str | None:
    """Why FILE cannot take a transcript, with the fix; None when it can (nothing is left behind)."""
    p = Path(path)
    fix = "name a file in a writable directory that exists"
    if p.is_dir():
        return f"--transcript {path}: is a directory; {fix}"
    if not p.parent.is_dir():
        return f"--transcript {path}: directory {p.parent} does not exist; {fix}"
    existed = p.exists()
    try:
        with open(p, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        return f"--transcript {path}: cannot write ({exc.strerror}); {fix}"
    if not existed:
        p.unlink(missing_ok=True)
    return None


def screenshots_problem(path: str) -> str | None:
    """Why DIR cannot take screenshots, with the fix; None when it can (DIR is made if missing)."""
    p = Path(path)
    fix = "name a writable directory (it is made if missing)"
    if p.exists() and not p.is_dir():
        return f"--screenshots {path}: is not a directory; {fix}"
    import tempfile

    try:
        p.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=p):
            pass
    except OSError as exc:
        return f"--screenshots {path}: cannot write there ({exc.strerror}); {fix}"
    return None


def record_problem(path: str) -> str | None:
    """Why FILE cannot take a recording (--record), with the fix; None when it can."""
    problem = transcript_problem(path)
    return problem.replace("--transcript", "--record", 1) if problem else None


def cast_problem(path: str) -> str | None:
    """Why FILE cannot take a cast (--cast), with the fix; None when it can."""
    problem = transcript_problem(path)
    return problem.replace("--transcript", "--cast", 1) if problem else None


def refuse(line: str) -> int:
    print(f"vmmtui: {line}", file=sys.stderr)
    return EXIT_USAGE


def cmd_app(args: argparse.Namespace) -> int:
    for value, check in (
        (args.transcript, transcript_problem),
        (args.screenshots, screenshots_problem),
        (args.record, record_problem),
        (args.cast, cast_problem),
    ):
        problem = value and check(value)
        if problem:
            return refuse(problem)
    from vmmtui.backends import choose

    if no_terminal := terminal_missing(
        "the inspector",
        "`vmmtui run` runs the same session without one (--json: its events as JSON lines)",
    ):  # what is wrong with the options is said first; the probe's wait costs nothing here
        return refuse(refusal(args, choose(args.backend, args.device)) or no_terminal)
    from vmmtui.system import host

    if not host.is_linux():  # no live session here: the one line, before the screen is taken
        return refuse(refusal(args, choose(args.backend, args.device)) or "live runs need Linux")
    from concurrent.futures import Future, ThreadPoolExecutor

    probing: Future = ThreadPoolExecutor(1, thread_name_prefix="probe").submit(
        choose, args.backend, args.device
    )
    if (
        args.record and args.backend != "memfd"
    ):  # the recording's header names the driver and the device
        from vmmtui.record.recording import cuda_identity

        ThreadPoolExecutor(1, thread_name_prefix="identity").submit(cuda_identity, args.device)
    # imported while the probe runs: the app, with step back, --record and --cast
    from vmmtui.tui.app import InspectorApp

    choice = None
    if probing.done() or args.backend == "memfd":
        choice = probing.result()
        refused = refusal(args, choice)
        if refused:
            return refuse(refused)
    try:
        app = InspectorApp(
            config_from(args),
            choice,
            probing=probing,
            autoplay=args.autoplay,
            pace=args.pace,
            screenshots=args.screenshots,
            transcript=args.transcript,
            stable=args.stable,
            record=args.record,
            cast=args.cast,
        )
    except OSError as exc:  # the transcript went away since it was checked
        return refuse(f"--transcript {args.transcript}: cannot write ({exc.strerror})")
    app.run()
    if app.refused:
        return refuse(app.refused)
    return ended(app)


def ended(app) -> int:
    """The app's exit status (``interrupts.exit_status``); after a signal or Ctrl-C, one line
    saying so (none when the terminal is gone)."""
    from vmmtui.system.interrupts import exit_status

    if app.watchdog is not None:
        app.watchdog.cancel()
    if app.signalled is not None:
        name = signal.Signals(app.signalled).name
        with contextlib.suppress(OSError):  # the terminal is gone (SIGHUP): no one to tell
            print(f"vmmtui: interrupted by {name}; {app.stopped()}", file=sys.stderr, flush=True)
    own = app.return_code or 0
    if lost := app.lost():  # a file asked for could not be written: said, and the status is 1
        with contextlib.suppress(OSError):
            for line in lost:
                print(f"vmmtui: {line}", file=sys.stderr, flush=True)
        own = own or EXIT_FAILED
    return exit_status(app.signalled, own)
