"""``vmmtui serve [OPTIONS] [replay FILE|NAME]``: the inspector (or a replay) as a web page.

Through textual-serve (Textualize's package for serving Textual apps): every browser that opens the
page gets its own vmmtui process, started with the same options, drawn in the page's terminal. A
live session therefore runs one pair of workers per viewer; a replay needs nothing but the file.
Each page's vmmtui runs as the user who serves: the token printed at start is what keeps other
users (every local one on localhost, the network with --host 0.0.0.0) from starting them.
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
import textwrap
from collections.abc import Callable

from vmmtui.cli.options import EXIT_USAGE

#: who can reach the port, and what stops them (--help and docs/serve.md say the same)
WHO = (
    "Each page runs vmmtui as you. On localhost every local user can reach the port; with "
    "--host 0.0.0.0 the network can. What stops them is the token: a new one at each start, in "
    "the URL printed then (http://HOST:PORT/?token=...); without it every request gets 403 and "
    "nothing starts. Give the URL only to those who may drive the inspector as you."
)

#: what ``vmmtui serve --help`` opens with: what it is for, who can reach it, and an example
ABOUT = f"""\
Serve the inspector, or a replay, as a web page: every browser that opens it gets its own
vmmtui, drawn in the page. For a class on laptops.

{textwrap.fill(WHO, 100)}

example:
  vmmtui serve --host 0.0.0.0 --port 8000 replay h100-vmm-1mib
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``vmmtui serve``'s options, on the parser the command line made for it."""
    p.add_argument(
        "--host",
        default="localhost",
        help="address to listen on (default localhost: every local user can reach it; 0.0.0.0: "
        "the network can too); the token guards both",
    )
    p.add_argument("--port", type=port_arg, default=8000, help="port, 1 to 65535 (default 8000)")
    p.add_argument(
        "--max-pages",
        type=pages_arg,
        default=4,
        metavar="N",
        help=f"pages served at once, 1 to {MAX_PAGES} (default 4; one more is told the server is full)",
    )
    p.add_argument(
        "--shots",
        metavar="DIR",
        help="where `s` saves a screenshot in a page (made if missing; default: screenshots are "
        "off in pages, and nothing is written where the server runs)",
    )
    p.add_argument(
        "args",
        nargs=argparse.REMAINDER,
        metavar="replay FILE|NAME [options]",
        help="serve a replay instead of the live inspector",
    )
    from vmmtui.cli import inspector

    inspector.add_options(p)  # the inspector's own options, passed on to each viewer's vmmtui
    p.set_defaults(func=cmd_serve)


def port_arg(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid port {text!r}: a number from 1 to 65535"
        ) from None
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"port {port} does not exist: choose 1 to 65535")
    return port


#: the most pages --max-pages allows: each live page runs an inspector and its workers
MAX_PAGES = 64


def pages_arg(text: str) -> int:
    try:
        pages = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid page count {text!r}: a whole number from 1 to {MAX_PAGES}"
        ) from None
    if not 1 <= pages <= MAX_PAGES:
        raise argparse.ArgumentTypeError(f"{pages} pages: choose 1 to {MAX_PAGES}")
    return pages


#: serve's own options; also taken from after ``replay NAME`` (``serve replay NAME --port P``)
OWN_OPTIONS: dict[str, Callable[[str], object]] = {
    "--host": str,
    "--port": port_arg,
    "--max-pages": pages_arg,
    "--shots": str,
}


def take_own_options(args: argparse.Namespace) -> str | None:
    """Move serve's own options given after ``replay NAME`` to serve's; why not, or None.

    None is an option of the inspector or of replay, so wherever they stand they are serve's."""
    rest: list[str] = []
    words = list(args.args)
    while words:
        word = words.pop(0)
        name, eq, value = word.partition("=")
        if name not in OWN_OPTIONS:
            rest.append(word)
            continue
        if not eq:
            if not words:
                return f"{name} needs a value"
            value = words.pop(0)
        try:
            setattr(args, name[2:].replace("-", "_"), OWN_OPTIONS[name](value))
        except argparse.ArgumentTypeError as exc:
            return f"argument {name}: {exc}"
    args.args = rest
    return None


def inspector_argv(args: argparse.Namespace) -> list[str]:
    """The inspector options given to serve, as a command line again (those left at their default are left out)."""
    from vmmtui.cli import inspector
    from vmmtui.cli.options import Parser

    blank = Parser()
    inspector.add_options(blank)
    argv: list[str] = []
    for action in blank._actions:
        if not action.option_strings or action.dest == "help":
            continue
        value = getattr(args, action.dest, action.default)
        if value == action.default or value is None:
            continue
        flag = (
            action.option_strings[-1]
            if action.option_strings[-1].startswith("--")
            else action.option_strings[0]
        )
        if isinstance(action, argparse._StoreTrueAction):
            argv.append(flag)
        else:
            argv += [flag, ",".join(map(str, value)) if isinstance(value, list) else str(value)]
    return argv


def command_line(args: list[str]) -> list[str] | None:
    """The vmmtui command each viewer gets, checked now (bad options, a bad recording: one line, None)."""
    from vmmtui.cli import inspector, replay
    from vmmtui.cli.options import Parser

    args = [a for a in args if a != "--"] if args[:1] == ["--"] else list(args)
    if args[:1] and args[0] not in ("replay",) and not args[0].startswith("-"):
        print(f"vmmtui serve: serves the inspector or `replay`, not {args[0]!r}", file=sys.stderr)
        return None
    check = Parser(prog="vmmtui serve")  # the viewer's command line, parsed as vmmtui will parse it
    if args[:1] == ["replay"]:
        check.add_argument("command")
        check.add_argument("recording", nargs="?")
        check.add_argument("--list", action="store_true")
        check.add_argument("--notes", metavar="NOTES.md")
        replay.add_view_options(check)
    else:
        inspector.add_options(check)
    parsed = check.parse_args(args)  # exits 2 with one line on a bad option
    if args[:1] == ["replay"]:
        from vmmtui.cli.replay import load

        if parsed.list or not parsed.recording:
            print("vmmtui serve replay: give a recording FILE or a gallery NAME", file=sys.stderr)
            return None
        recording = load(parsed.recording)
        if recording is None:
            return None
        if parsed.notes and not notes_fit(parsed.notes, recording):
            return None
        # the viewer's process may start elsewhere: the files by their whole path
        for given in (parsed.recording, parsed.notes):
            if given and given in args and os.path.exists(given):
                args[args.index(given)] = os.path.abspath(given)
    else:
        from vmmtui.cli.options import choice_or_refuse

        if choice_or_refuse(parsed) is None:
            return None
    return [sys.executable, "-m", "vmmtui", *args]


def notes_fit(path: str, recording) -> bool:
    """Whether the notes can be read and bound to the recording's steps (else one line, False):
    checked once here, not in every page."""
    from vmmtui.pipeline.replay import trace_timeline
    from vmmtui.record import Timeline
    from vmmtui.record.notes import NotesError, read
    from vmmtui.tui.replay import is_trace_recording

    trace = is_trace_recording(recording)
    try:
        # a trace's calls are its frames, as replay binds them
        read(path, trace_timeline(recording.events) if trace else Timeline(recording.events))  # type: ignore[arg-type]
    except NotesError as exc:
        print(f"vmmtui serve: {exc}", file=sys.stderr)
        return False
    return True


def page_url(host: str, port: int, token: str) -> str:
    """The URL to give the class: this machine's name where the server listens everywhere."""
    if host in ("0.0.0.0", "::", ""):
        import socket

        host = socket.gethostname()
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}/?token={token}"


def cmd_serve(args: argparse.Namespace) -> int:
    problem = take_own_options(args)
    if problem:
        print(f"vmmtui serve: {problem} (see vmmtui serve --help)", file=sys.stderr)
        return EXIT_USAGE
    live = inspector_argv(args)
    if live and args.args:
        print(
            "vmmtui serve: give the inspector's options or `replay ...`, not both", file=sys.stderr
        )
        return EXIT_USAGE
    command = command_line(args.args or live)
    if command is None:
        return EXIT_USAGE
    shots = None
    if args.shots:
        from vmmtui.cli.inspector import screenshots_problem

        if problem := screenshots_problem(args.shots):
            print(
                f"vmmtui serve: {problem.replace('--screenshots', '--shots', 1)}", file=sys.stderr
            )
            return EXIT_USAGE
        shots = os.path.abspath(args.shots)
    try:
        from vmmtui.cli.webserver import ListenError, ViewerServer, listen, new_token
    except ImportError:
        print("vmmtui: serve needs textual-serve: pip install textual-serve", file=sys.stderr)
        return EXIT_USAGE
    try:
        sockets = listen(args.host, args.port)
    except ListenError as exc:
        print(f"vmmtui serve: {exc}", file=sys.stderr)
        return exc.exit_code
    # what each page runs, as a sentence: "the inspector with --record run.jsonl", not the
    # options glued to its name
    what = " ".join(args.args) or (
        f"the inspector with {shlex.join(live)}" if live else "the inspector"
    )
    token = new_token()
    where = f"screenshots (s) go to {shots}" if shots else "screenshots (s) are off in pages"
    print(
        f"vmmtui: serving {what} at {page_url(args.host, args.port, token)} "
        f"(the token is the key: anyone with this URL drives it as you; at most "
        f"{args.max_pages} pages; {where}; Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )
    server = ViewerServer(
        shlex.join(command),
        host=args.host,
        port=args.port,
        title=f"vmmtui {what}".strip(),
        token=token,
        max_pages=args.max_pages,
        shots=shots,
    )
    server.serve_on(sockets)
    told = server.told
    pages = f"; {told} open page{'s' if told != 1 else ''} told so" if told else ""
    by = server.stopped_by
    named = f" (interrupted by {signal.Signals(by).name})" if by is not None else ""
    print(f"vmmtui: stopped serving{named}{pages}", file=sys.stderr)
    from vmmtui.system.interrupts import exit_status

    return exit_status(by)  # 128 + the signal, as docs/troubleshooting.md promises
