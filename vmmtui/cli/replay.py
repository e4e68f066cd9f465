"""``vmmtui replay FILE|NAME``: the inspector on a recording (no workers, no driver); ``--list``: the gallery."""

from __future__ import annotations

import argparse
import sys

from vmmtui.cli.options import (
    EXIT_OK,
    EXIT_USAGE,
    not_a_terminal,
    pace_arg,
    step_arg,
    terminal_missing,
)

#: what ``vmmtui replay --help`` opens with: what it is for, and an example
ABOUT = """\
Open the inspector on a recording (a file made with `vmmtui run --record`, or a gallery name:
--list): the same screen as a live session, step by step, forward and back, with no GPU and no
workers. --html writes the whole replay as one page a browser opens from disk.

examples:
  vmmtui replay h100-vmm-1mib
  vmmtui replay h100-vmm-1mib --notes lecture.md --html lecture.html
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``vmmtui replay``'s options, on the parser the command line made for it."""
    p.add_argument(
        "recording",
        nargs="?",
        metavar="FILE|NAME",
        help="a recording (.jsonl or .jsonl.gz, from `vmmtui run --record`) or a gallery name such as h100-vmm-1mib",
    )
    p.add_argument(
        "--list", action="store_true", help="list the gallery's recordings with machine and date"
    )
    p.add_argument(
        "--notes",
        metavar="NOTES.md",
        help="a teacher's notes: a '## N' or '## role · step' heading per step, the note under it "
        "(shown in the teaching panel, kept in --transcript and --html)",
    )
    p.add_argument(
        "--html",
        metavar="OUT.html",
        help="write one self-contained page (every frame, the notes, keys to step) that opens "
        "from disk in any browser, and exit",
    )
    p.add_argument(
        "--perfetto",
        metavar="FILE.json",
        help="write the recording as a trace that ui.perfetto.dev opens (a track per process, "
        "steps and calls as slices, flows from export to import), then exit",
    )
    p.add_argument(
        "--text",
        action="store_true",
        help="a trace recording: print it as the trace printed it (also when stdout is no terminal)",
    )
    add_view_options(p)
    p.set_defaults(func=cmd_replay)


def add_view_options(p: argparse.ArgumentParser) -> None:
    """What a replay shares with the inspector: autoplay, pace, screenshots, transcript, cast, stable."""
    p.add_argument("--autoplay", action="store_true", help="play the recording by itself")
    p.add_argument(
        "--pace",
        type=pace_arg,
        default=1.0,
        help="seconds between autoplay steps (default 1.0)",
    )
    p.add_argument(
        "--step", type=step_arg, default=0, metavar="N", help="open at step N (default: the start)"
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
    """The Recording, or None after printing the one-line reason it cannot be read. A trace's
    is read as recorded: the replay folds it once (``trace_timeline``), and everything it shows
    (the inspector, the page, the text, Perfetto's file) is that one fold."""
    from vmmtui.pipeline.replay import resolve
    from vmmtui.record import RecordingError

    try:
        return resolve(name, found_again=False)
    except RecordingError as exc:
        print(f"vmmtui: {exc}", file=sys.stderr)
        return None


def cmd_replay(args: argparse.Namespace) -> int:
    if args.list:
        from vmmtui.record.gallery import listing

        print(fitted(listing()))
        return EXIT_OK
    problem = outputs_problem(args)  # before any work: nothing is read or drawn for a bad path
    if problem:
        print(f"vmmtui: {problem}", file=sys.stderr)
        return EXIT_USAGE
    if not args.recording:
        print(
            "vmmtui replay: give a recording FILE or a gallery NAME (see vmmtui replay --list)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    recording = load(args.recording)
    if recording is None:
        return EXIT_USAGE
    from vmmtui.tui.replay import is_trace_recording

    trace = is_trace_recording(recording)
    # a pipe (or TERM=dumb) gets the text, unless the options ask for what only the inspector
    # makes (--html…)
    screen = not_a_terminal() is None
    printed = trace and (args.text or not (screen or _inspector_only(args)))
    if printed and (unused := _inspector_only(args)):
        print(
            f"vmmtui replay: --text prints {recording.path} as the trace printed it: "
            f"{', '.join(unused)} apply only to the inspector; --perfetto works on both",
            file=sys.stderr,
        )
        return EXIT_USAGE
    if args.text and not trace:
        print(
            f"vmmtui replay: --text applies to a trace recording; {recording.path} is a "
            "session's (use --transcript FILE for its events as text)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    from vmmtui.pipeline.replay import trace_timeline
    from vmmtui.record import Timeline

    timeline = None
    folded = trace_timeline(recording.events) if trace else None  # the one fold of a trace
    if args.notes or args.step:  # a trace's frames are its calls, a session's its steps
        timeline = folded or Timeline(recording.events)
    notes = None
    if args.notes:
        from vmmtui.record.notes import NotesError, read

        try:
            notes = read(args.notes, timeline)  # type: ignore[arg-type]
        except NotesError as exc:
            print(f"vmmtui: {exc}", file=sys.stderr)
            return EXIT_USAGE
    if args.step and timeline is not None:
        last = timeline.frames[-1].steps
        unit = getattr(timeline, "unit", "step")
        if args.step > last:
            print(
                f"vmmtui replay: --step {args.step}: {args.recording} has {last} {unit}s "
                f"(give 0 to {last})",
                file=sys.stderr,
            )
            return EXIT_USAGE
    for sentence in (recording.note, recording.cut):
        if sentence:
            print(f"vmmtui: {recording.path}: {sentence}", file=sys.stderr)
    if args.html:
        return write_html(args.html, recording, notes, folded)
    if args.perfetto:
        return write_perfetto(args.perfetto, folded.events if folded else recording.events)
    if printed and folded is not None:  # a `vmmtui trace --record` recording, as text
        from vmmtui.cli.trace import replay_trace

        return replay_trace(recording, folded)
    if no_terminal := terminal_missing(
        "the replay",
        "--html OUT.html writes the replay as one page, --transcript FILE as text, without one",
    ):
        if args.transcript and not (args.screenshots or args.cast):
            return write_transcript(args.transcript, recording, notes)
        print(f"vmmtui: {no_terminal}", file=sys.stderr)
        return EXIT_USAGE
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
        notes=notes,
        folded=folded,
    )
    app.run()
    from vmmtui.cli.inspector import ended

    return ended(app)


def fitted(listing: str) -> str:
    """The gallery's listing wrapped at spaces to the terminal's width (a terminal of 80 columns
    cut its lines mid-word), what a recording shows under its own column where that leaves room,
    else indented under its name; a pipe gets it whole, one recording a line, for grep."""
    import re
    import shutil
    import textwrap

    if not sys.stdout.isatty():
        return listing
    width = shutil.get_terminal_size().columns - 1
    out: list[str] = []
    for line in listing.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        column = re.match(r"  \S+\s+\d\d:\d\d  ", line)  # a recording: name, time, what
        indent = " " * (column.end() if column and column.end() < width // 2 else 4)
        out.extend(
            textwrap.wrap(
                line,
                width,
                subsequent_indent=indent,
                break_long_words=False,
                break_on_hyphens=False,
            )
        )
    return "\n".join(out)


def write_transcript(path: str, recording, notes) -> int:
    """``--transcript FILE`` where no terminal is: the recording's events (and notes), no screen."""
    from vmmtui.record import Timeline
    from vmmtui.render.transcript import Transcript
    from vmmtui.tui.replay import write_with_notes

    try:
        transcript = Transcript(path)
        write_with_notes(transcript, Timeline(recording.events), notes)
        transcript.close()
    except OSError as exc:
        print(f"vmmtui: --transcript {path}: cannot write ({exc.strerror})", file=sys.stderr)
        return 1
    if transcript.error:  # a full disk: nothing is left under the name, and it is said
        print(f"vmmtui: {transcript.error}", file=sys.stderr)
        return 1
    print(f"wrote {path}: {len(recording.events)} events (no terminal: the inspector did not open)")
    return EXIT_OK


def _inspector_only(args: argparse.Namespace) -> list[str]:
    """The options given that only the replay inspector (not a trace's printout) carries out."""
    given = {
        "--notes": args.notes,
        "--html": args.html,
        "--autoplay": args.autoplay,
        "--pace": args.pace != 1.0,
        "--step": args.step,
        "--screenshots": args.screenshots,
        "--transcript": args.transcript,
        "--cast": args.cast,
        "--stable": args.stable,
    }
    return [name for name, value in given.items() if value]


def outputs_problem(args: argparse.Namespace) -> str | None:
    """Why --html, --transcript, --cast or --screenshots cannot be written (one line, the fix)."""
    from vmmtui.cli.inspector import cast_problem, screenshots_problem, transcript_problem

    if args.html:
        if not args.html.lower().endswith((".html", ".htm")):
            return f"--html {args.html}: name a .html file (such as lecture.html)"
        problem = transcript_problem(args.html)
        if problem:
            return problem.replace("--transcript", "--html", 1)
    for value, check in ((args.transcript, transcript_problem), (args.cast, cast_problem)):
        problem = value and check(value)
        if problem:
            return problem
    return args.screenshots and screenshots_problem(args.screenshots)


def write_html(path: str, recording, notes, folded=None) -> int:
    from pathlib import Path

    from vmmtui.tui.flipbook import DrawingError, write_page

    try:
        frames, size, stopped = write_page(path, recording, notes, folded)
    except DrawingError as exc:
        print(f"vmmtui: --html {path}: {exc}; nothing written", file=sys.stderr)
        return 1
    except OSError as exc:  # the disk filled or the directory went away while drawing
        Path(path).unlink(missing_ok=True)
        print(
            f"vmmtui: --html {path}: cannot write ({exc.strerror}); try another place",
            file=sys.stderr,
        )
        return 1
    if stopped is not None:  # Ctrl-C, SIGTERM, SIGHUP while drawing: nothing was written
        from vmmtui.system.interrupts import Interrupted

        raise Interrupted(stopped)
    print(
        f"wrote {path}: {frames} frames, {size / 1024:.0f} KiB; open it in a browser "
        f"(file://{Path(path).resolve()}): ←/→ step, Home/End"
    )
    return EXIT_OK


def write_perfetto(path: str, events: list) -> int:
    """``--perfetto FILE``: the trace file, or one line: exit 2 for a path that cannot name a
    file, 1 when writing failed (a full disk)."""
    from vmmtui.render import perfetto

    try:
        n = perfetto.write(path, events)
    except OSError as exc:  # nothing is left under the name (system.atomic)
        print(
            f"vmmtui: cannot write {path}: {exc.strerror or exc}; nothing was written",
            file=sys.stderr,
        )
        # a path that cannot name a file is bad input (2); a disk that filled is a failure (1)
        bad = (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)
        return EXIT_USAGE if isinstance(exc, bad) else 1
    print(f"wrote {path}: {n} trace events; open it at https://ui.perfetto.dev (Open trace file)")
    return EXIT_OK
