"""``vmmtui run``: both workers to the end, headless, the seed's log lines (or --json)."""

from __future__ import annotations

import argparse
import sys

from vmmtui.cli.options import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    choice_or_refuse,
    config_from,
    session_options,
)
from vmmtui.system.interrupts import Interrupted

#: what ``vmmtui run --help`` opens with: what it is for, and an example
ABOUT = """\
Run a producer and its consumers to the end without a screen and print each step's lines
(or the events as JSON). Exit 0 only when the data verified and nothing was left behind.

examples:
  vmmtui run
  vmmtui run --backend memfd --consumers 3
  vmmtui run --scenario leaked-fd --json
"""


def add_arguments(run: argparse.ArgumentParser) -> None:
    """``vmmtui run``'s options, on the parser the command line made for it."""
    session_options(run)
    run.add_argument("--json", action="store_true", help="print the event stream as JSON lines")
    run.add_argument(
        "--verbose", "-v", action="store_true", help="also print every driver/system call"
    )
    run.add_argument(
        "--record",
        metavar="FILE",
        help="also write the session as a recording (.jsonl or .jsonl.gz) for `vmmtui replay FILE`",
    )
    run.add_argument(
        "--list-scenarios",
        action="store_true",
        help="list the failure scenarios, one line each, and exit",
    )
    run.set_defaults(func=cmd_run)


def list_scenarios() -> str:
    from vmmtui.scenarios import SCENARIOS

    width = max(map(len, SCENARIOS))
    lines = []
    for s in SCENARIOS.values():
        only = [b for b in ("cuda", "memfd") if b not in s.cannot]
        host = s.host_reason()
        lines.append(
            f"{s.name:<{width}}  {s.summary}"
            + ("" if len(only) == 2 else f" [{'/'.join(only)} only]")
            + (" [not on this host: see --scenario NAME]" if host else "")
        )
    return "\n".join(lines)


def cmd_run(args: argparse.Namespace) -> int:
    from vmmtui.render.console import LogPrinter, print_json
    from vmmtui.session import ConfigError, Session, SessionError
    from vmmtui.words.troubleshooting import with_words

    if args.list_scenarios:
        print(list_scenarios())
        return EXIT_OK
    choice = choice_or_refuse(args)
    if choice is None:
        return EXIT_USAGE
    printer = LogPrinter(verbose=args.verbose)
    recorder = None
    if args.record:
        from vmmtui.record import RecordingError
        from vmmtui.record.recording import start_recording

        try:
            from vmmtui.words.findings import json_line

            recorder = start_recording(
                args.record, config_from(args), choice.name, choice.reason, json_line
            )
            recorder.on_fail = lambda why: print(f"vmmtui: {why}", file=sys.stderr)  # at once
        except RecordingError as exc:
            print(f"vmmtui: {exc}", file=sys.stderr)
            return EXIT_USAGE

    def emit(e) -> None:
        if recorder is not None:
            recorder.write(e)
        if args.json:
            print_json(e, sys.stdout)
        else:
            printer(e)

    session = Session(config_from(args), choice)
    refused: SessionError | None = None
    interrupted: Interrupted | None = None
    at = None
    try:
        for e in session.start():
            emit(e)
        for e in session.run():
            emit(e)
    except SessionError as exc:
        refused = exc
    except Interrupted as exc:
        interrupted, at = exc, session.next_step
    finally:
        try:
            for e in session.close():
                emit(e)
        finally:  # also when the output's reader left (BrokenPipeError): the recording is whole
            if recorder is not None:
                recorder.close()  # a failure is said where it happened (on_fail)
    ending = session.closed_event
    clean = ending is not None and ending.clean
    if interrupted is not None:
        where = f" during {at[0]} {at[1]}" if at else ""
        print(
            f"vmmtui: interrupted{where}; "
            + (
                "workers stopped, everything cleaned up"
                if clean
                else "left behind: "
                + "; ".join(ending.leftovers if ending else ["the close did not end"])
            ),
            file=sys.stderr,
        )
        return 128 + interrupted.signum
    if refused is not None:
        print(f"vmmtui: {with_words(str(refused), refused.failure)}", file=sys.stderr)
        return EXIT_USAGE if isinstance(refused, ConfigError) else EXIT_FAILED
    if not args.json:
        printer.console.print(printer.summary())
    if (
        session.outcome is not None
    ):  # a scenario succeeds when it failed the way it promised, and cleaned up
        return EXIT_OK if session.outcome.as_expected and clean else EXIT_FAILED
    ok = session.verified and session.failure is None and session.fd_problems == 0
    recorded = recorder is None or not recorder.failed
    return EXIT_OK if ok and clean and recorded else EXIT_FAILED
