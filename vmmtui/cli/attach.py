"""``vmmtui attach PID…|--all|--can A B``: the sharing of programs vmmtui did not start."""

from __future__ import annotations

import argparse

from vmmtui.cli.options import positive_arg

#: what ``vmmtui attach --help`` opens with: what it is for, and an example
ABOUT = """\
Show the GPU memory, memfds, shared memory and fds that running processes share, programs
vmmtui did not start, read from /proc (and NVML): a full-screen view, or a report with --once or
--json. --can A B says whether process A could hand process B an allocation, and how.

examples:
  vmmtui attach 4242 4243
  vmmtui attach --all --once
  vmmtui attach --can 4242 4243
"""


def add_parser(sub) -> None:
    a = sub.add_parser(
        "attach",
        help="show the GPU memory, memfds, shm and fds that running processes share "
        "(Textual view; --once/--json headless; --can A B preflight)",
    )
    a.add_argument("pids", nargs="*", type=int, metavar="PID")
    a.add_argument(
        "--all",
        action="store_true",
        help="every process of this user (all as root) holding "
        "/dev/nvidia* fds, memfds or shared-memory mappings",
    )
    a.add_argument(
        "--can", nargs=2, type=int, metavar=("A", "B"), help="can A hand B an allocation, and how?"
    )
    a.add_argument("--once", action="store_true", help="one scan, a report, and exit")
    a.add_argument(
        "--json", action="store_true", help="the event stream as JSON lines (with --once: one scan)"
    )
    a.add_argument(
        "--leaks",
        action="store_true",
        help="also look for /dev/shm and socket files of dead owners",
    )
    a.add_argument(
        "--duration", type=positive_arg, default=None, help="headless: follow for this many seconds"
    )
    a.add_argument(
        "--prometheus",
        metavar="HOST:PORT",
        help="serve the sharing ledger as Prometheus metrics at http://HOST:PORT/metrics and keep "
        "following (a node agent: with --all, new processes are picked up; needs vmmtui[fleet])",
    )
    a.add_argument(
        "--screenshot",
        metavar="FILE",
        help="open the view headless, wait --duration (2 s), save an SVG",
    )
    a.set_defaults(func=cmd_attach)


def _targets(args: argparse.Namespace) -> list[int] | None:
    import os
    import sys

    from vmmtui.attach.scan import holders_of_memory

    if args.all:
        if sys.stderr.isatty():  # reading every process's fds can take seconds on a big machine
            print("vmmtui attach: scanning /proc for holders of shared memory…", file=sys.stderr)
        found = holders_of_memory(None if os.geteuid() == 0 else os.geteuid())
        if not found:
            who = "any process" if os.geteuid() == 0 else "any process of yours"
            print(
                f"vmmtui attach: no {'' if os.geteuid() == 0 else 'readable '}process holds /dev/nvidia* fds, "
                f"memfds or shared-memory mappings ({who} checked)",
                file=sys.stderr,
            )
        return found
    if not args.pids:
        print(
            "vmmtui attach: give PIDs, --all or --can A B (see vmmtui attach --help)",
            file=sys.stderr,
        )
        return None
    if _bad_pid(args.pids):
        return None
    return list(dict.fromkeys(args.pids))


def _bad_pid(pids: list[int]) -> bool:
    """Says (one line) the first number that cannot be a process id: the same words for PIDs and --can."""
    import sys

    bad = [p for p in pids if p <= 0]
    if bad:
        print(f"vmmtui attach: {bad[0]} is not a process id", file=sys.stderr)
    return bool(bad)


def cmd_attach(args: argparse.Namespace) -> int:
    import sys
    import time

    if args.screenshot:  # checked before any scan: one line, nothing created
        from vmmtui.cli.inspector import transcript_problem
        from vmmtui.cli.options import EXIT_USAGE

        if problem := transcript_problem(args.screenshot):
            print(
                f"vmmtui attach: {problem.replace('--transcript', '--screenshot', 1)}",
                file=sys.stderr,
            )
            return EXIT_USAGE
    nvml_soon = None
    if not args.can and not args.screenshot and (args.once or args.json or args.duration):
        from vmmtui.attach.nvml import Nvml

        nvml_soon = Nvml.opening()  # overlaps the imports below and the scan
    from vmmtui.cli.options import EXIT_FAILED, EXIT_OK, EXIT_USAGE
    from vmmtui.console import print_json
    from vmmtui.narration import attach_lines

    if args.can:
        from vmmtui.attach.preflight import preflight

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
            if args.json:
                print_json(c, sys.stdout)
            else:
                for line in attach_lines(c):
                    _console().print(line)
        if any(c.name == "processes" and c.ok is False for c in checks):
            return EXIT_USAGE
        return EXIT_OK if not any(c.ok is False for c in checks) else EXIT_FAILED
    targets = _targets(args)
    agent = bool(args.all and args.prometheus)  # a node agent waits for processes to come
    if not targets and not (agent and targets is not None):
        if nvml_soon is not None:
            nvml_soon.result().close()
        return EXIT_USAGE if targets is None else EXIT_FAILED
    if args.screenshot:
        from vmmtui.tui.attach import save_screenshot

        save_screenshot(targets, args.screenshot, args.duration or 2.0)
        print(f"saved {args.screenshot}")
        return EXIT_OK
    from vmmtui.cli.options import not_a_terminal

    if not (args.once or args.json or args.duration or args.prometheus) and not not_a_terminal():
        from vmmtui.tui.attach import AttachApp

        AttachApp(targets).run()
        return EXIT_OK
    return _headless(args, targets, print_json, attach_lines, time, nvml_soon)


#: how often ``attach --all --prometheus`` looks for new processes holding shared memory
RESCAN_S = 1.0


def _holders() -> list[int]:
    import os

    from vmmtui.attach.scan import holders_of_memory

    return holders_of_memory(None if os.geteuid() == 0 else os.geteuid())


def _metrics(args: argparse.Namespace):
    """The /metrics endpoint of ``--prometheus``; None without it; an exit code after a one-line
    error (2 for a bad HOST:PORT, 1 when the port is taken or the library is missing)."""
    if not args.prometheus:
        return None
    import sys

    from vmmtui.cli.options import EXIT_FAILED, EXIT_USAGE
    from vmmtui.fleet.prometheus import MetricsEndpoint, MissingLibrary

    try:
        endpoint = MetricsEndpoint.start(args.prometheus, mode="polling")
    except ValueError as exc:
        print(f"vmmtui attach: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MissingLibrary as exc:
        print(f"vmmtui attach: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        print(
            f"vmmtui attach: cannot listen on {args.prometheus}: {exc.strerror or exc}; "
            "pick another port (--prometheus HOST:PORT)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    print(f"vmmtui attach: Prometheus metrics at {endpoint.url}", file=sys.stderr)
    return endpoint


def _console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def _headless(args, targets, print_json, attach_lines, time, nvml_soon=None) -> int:
    import sys

    from vmmtui.attach.follow import Follower
    from vmmtui.attach.leaks import leftover_files
    from vmmtui.cli.options import EXIT_FAILED, EXIT_OK
    from vmmtui.events import ProcessUnreadable

    follower = Follower(set(targets), interval=0.25, nvml_soon=nvml_soon)
    console = _console()
    out: list = []
    endpoint = _metrics(args)
    if isinstance(endpoint, int):
        return endpoint
    rescan = time.monotonic() + RESCAN_S

    def emit(events) -> None:
        for e in events:
            out.append(e)
            if endpoint:
                endpoint.feed(e)
            if args.json:
                print_json(e, sys.stdout)
            else:
                for line in attach_lines(e):
                    console.print(line)

    end = time.monotonic() + (args.duration or 0.0)
    try:
        while True:
            emit(follower.poll())
            if args.all and endpoint and time.monotonic() >= rescan:  # an agent: new processes too
                follower.targets.update(_holders())
                rescan = time.monotonic() + RESCAN_S
            if (
                args.once
                or (not follower.tracker.alive and not (endpoint and args.all))
                or (args.duration and time.monotonic() >= end)
            ):
                break
            time.sleep(0.25)
        emit(follower.snapshots())
        if not args.once:
            emit(follower.missed())
        if args.leaks or args.once:
            live = (
                {s.path for s in follower.last.sockets.sockets.values()} if follower.last else set()
            )
            emit(leftover_files(None, follower.bound_paths, live, time.monotonic() - follower.t0))
    finally:
        follower.close()
        if endpoint:
            endpoint.close()
    unreadable = {e.pid for e in out if isinstance(e, ProcessUnreadable)}
    if unreadable >= set(targets):
        print(
            "vmmtui attach: "
            + ("none of the given processes could" if len(targets) > 1 else "the process could not")
            + " be read (see above); check the pids (ps -eo pid,cmd), run as their user or root",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_OK
