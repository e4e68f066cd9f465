"""``vmmtui serve [OPTIONS] [replay FILE|NAME]``: the inspector (or a replay) as a web page.

Through textual-serve (Textualize's package for serving Textual apps): every browser that opens the
page gets its own vmmtui process, started with the same options, drawn in the page's terminal. A
live session therefore runs one pair of workers per viewer; a replay needs nothing but the file.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from vmmtui.cli.options import EXIT_OK, EXIT_USAGE

#: what ``vmmtui serve --help`` opens with: what it is for, and an example
ABOUT = """\
Serve the inspector, or a replay, as a web page: every browser that opens it gets its own
vmmtui, drawn in the page. For a class on laptops.

example:
  vmmtui serve --host 0.0.0.0 --port 8000 replay h100-vmm
"""


def add_parser(sub) -> None:
    p = sub.add_parser(
        "serve", help="serve the inspector (or `replay FILE`) as a web page, for a class on laptops"
    )
    p.add_argument(
        "--host", default="localhost", help="address to listen on (default localhost; 0.0.0.0: all)"
    )
    p.add_argument("--port", type=port_arg, default=8000, help="port, 1 to 65535 (default 8000)")
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


#: serve's own options; also taken from after ``replay NAME`` (``serve replay NAME --port P``)
OWN_OPTIONS = ("--host", "--port")


def take_own_options(args: argparse.Namespace) -> str | None:
    """Move ``--host``/``--port`` given after ``replay NAME`` to serve's own; why not, or None.

    Neither is an option of the inspector or of replay, so wherever they stand they are serve's."""
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
        if name == "--port":
            try:
                args.port = port_arg(value)
            except argparse.ArgumentTypeError as exc:
                return f"argument --port: {exc}"
        else:
            args.host = value
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
        replay.add_view_options(check)
    else:
        inspector.add_options(check)
    parsed = check.parse_args(args)  # exits 2 with one line on a bad option
    if args[:1] == ["replay"]:
        from vmmtui.cli.replay import load

        if parsed.list or not parsed.recording:
            print("vmmtui serve replay: give a recording FILE or a gallery NAME", file=sys.stderr)
            return None
        if load(parsed.recording) is None:
            return None
        if os.path.exists(parsed.recording):  # the viewer's process may start elsewhere
            args[args.index(parsed.recording)] = os.path.abspath(parsed.recording)
    else:
        from vmmtui.cli.options import choice_or_refuse

        if choice_or_refuse(parsed) is None:
            return None
    return [sys.executable, "-m", "vmmtui", *args]


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
    try:
        from vmmtui.cli.webserver import ListenError, ViewerServer, listen
    except ImportError:
        print("vmmtui: serve needs textual-serve: pip install textual-serve", file=sys.stderr)
        return EXIT_USAGE
    try:
        sockets = listen(args.host, args.port)
    except ListenError as exc:
        print(f"vmmtui serve: {exc}", file=sys.stderr)
        return exc.exit_code
    what = " ".join(args.args) or " ".join(["the inspector", *live])
    print(
        f"vmmtui: serving {what} at http://{args.host}:{args.port} (Ctrl-C stops)",
        file=sys.stderr,
        flush=True,
    )
    server = ViewerServer(
        shlex.join(command), host=args.host, port=args.port, title=f"vmmtui {what}".strip()
    )
    server.serve_on(sockets)
    told = server.told
    pages = f"; {told} open page{'s' if told != 1 else ''} told so" if told else ""
    print(f"vmmtui: stopped serving{pages}", file=sys.stderr)
    return EXIT_OK
