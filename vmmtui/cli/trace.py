"""``vmmtui trace -- CMD | -p PID… | --all``: every share of memory as it happens, from the kernel
(eBPF), folded into the ledger; without eBPF, one line why and the polling of ``watch``/``attach``."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from vmmtui.cli.options import EXIT_FAILED, EXIT_OK, EXIT_USAGE, positive_arg
from vmmtui.interrupts import delivered_to


def add_parser(sub) -> None:
    t = sub.add_parser(
        "trace",
        help="trace every fd share (SCM_RIGHTS, pidfd_getfd), memfd, close and CUDA VMM/IPC call "
        "of a command, running pids or everything, with eBPF; a ledger of who holds what "
        "(exit code: the command's)",
    )
    t.add_argument(
        "-p",
        "--pid",
        dest="pids",
        type=int,
        nargs="+",
        action="extend",
        default=[],
        metavar="PID",
        help="trace running processes (and their children) without restarting them",
    )
    t.add_argument("--all", action="store_true", help="trace every process of the machine")
    t.add_argument(
        "--json",
        action="store_true",
        help="print the event stream as JSON lines (the command's stdout goes to stderr)",
    )
    t.add_argument(
        "--record", metavar="FILE", help="write a recording (`vmmtui replay FILE` shows it)"
    )
    t.add_argument("--duration", type=positive_arg, metavar="S", help="stop after S seconds")
    t.add_argument("--quiet", "-q", action="store_true", help="print only the ledger's findings")
    t.add_argument(
        "--text",
        action="store_true",
        help="print the calls as lines (the default when stdout is not a terminal); in a terminal "
        "the inspector opens instead",
    )
    t.add_argument(
        "--cast",
        metavar="FILE.cast",
        help="the inspector: write the screen as an asciinema v2 recording",
    )
    t.add_argument("--no-cuda", action="store_true", help="do not probe libcuda (syscalls only)")
    t.add_argument("--libcuda", metavar="PATH", help="the libcuda.so.1 to probe (default: found)")
    t.add_argument(
        "--prometheus",
        metavar="HOST:PORT",
        help="serve the ledger as Prometheus metrics at http://HOST:PORT/metrics (a node agent with "
        "--all; needs vmmtui[fleet])",
    )
    t.add_argument(
        "--otlp",
        metavar="URL",
        help="send each share as an OpenTelemetry trace to an OTLP/HTTP endpoint "
        "(http://collector:4318; needs vmmtui[fleet])",
    )
    t.add_argument(
        "--perfetto", metavar="FILE.json", help="at the end, write the trace for ui.perfetto.dev"
    )
    t.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")
    t.set_defaults(func=cmd_trace)


def _usage(message: str) -> int:
    print(f"vmmtui trace: {message}", file=sys.stderr)
    return EXIT_USAGE


def cmd_trace(args: argparse.Namespace) -> int:
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    modes = sum((bool(command), bool(args.pids), bool(args.all)))
    if modes != 1:
        return _usage(
            "give a command after --, -p PID… or --all (one of them), e.g. "
            "vmmtui trace -- python3 app.py"
        )
    for pid in args.pids:
        if pid <= 0 or not os.path.exists(f"/proc/{pid}"):
            return _usage(f"no process {pid}")
    if args.libcuda and not os.path.exists(args.libcuda):
        return _usage(f"--libcuda {args.libcuda}: no such file")
    if args.perfetto and (problem := _unwritable(args.perfetto)):
        return _usage(f"--perfetto {args.perfetto}: {problem}")
    sinks = _sinks(args)
    if isinstance(sinks, int):
        return sinks
    recorder = None
    if args.record:
        from vmmtui.record.recording import RecordingError

        try:
            recorder = _recorder(args, command)
        except RecordingError as exc:
            return _usage(str(exc))
    from vmmtui.trace.loader import ProbeUnavailable, why_not

    reason = why_not()
    inspector = sys.stdout.isatty() and not (args.text or args.json or args.quiet)
    if reason is None and inspector:  # the tracer loads in the app's thread, after the first frame
        return _inspect(args, command, recorder, sinks)
    from vmmtui.trace.tracer import CommandNotFound, Tracer

    _import_the_fold()
    tracer = None
    if reason is None:
        tracer = Tracer(
            command,
            args.pids,
            args.all,
            args.duration,
            not args.no_cuda,
            args.libcuda,
            stdout=2 if args.json else None,  # the stream alone on stdout: the command's goes to 2
        )
        try:
            tracer.start()
        except ProbeUnavailable as exc:
            reason = str(exc)
        except CommandNotFound as exc:
            print(f"vmmtui trace: {exc}", file=sys.stderr)
            _discard(recorder, args.record)
            return exc.code
    if reason is not None:
        _discard(recorder, args.record)
        _close_sinks(sinks, [])
        return _fallback(args, command, reason)
    assert tracer is not None
    seen: list = []
    with delivered_to(tracer.forward):  # the traced command decides when to end; restored after
        try:
            _run(tracer, args, recorder, sinks, seen)
        finally:
            tracer.close()
            if recorder is not None:
                recorder.close()
                if recorder.failed:
                    print(f"vmmtui trace: {recorder.failed}", file=sys.stderr)
            _close_sinks(sinks, seen if args.perfetto else [], args.perfetto)
    if command:
        return tracer.exit.status if tracer.exit else EXIT_FAILED
    return EXIT_OK


def _inspect(args: argparse.Namespace, command: list[str], recorder, sinks: list) -> int:
    """The inspector on the live trace (stdout is a terminal, as htop's); the exit status is the
    command's where it ended by itself, 128 + the signal that ended the inspector otherwise."""
    from vmmtui.tui.trace import TraceApp

    seen: list = []

    def make_tracer():  # in the app's thread: the tracer's imports come after the first frame
        from vmmtui.trace.tracer import Tracer

        return Tracer(
            command,
            args.pids,
            args.all,
            args.duration,
            not args.no_cuda,
            args.libcuda,
            quiet=True,  # the screen is the inspector's: the command's output goes nowhere
        )

    def sink(e) -> None:  # in the tracer's thread
        if recorder is not None:
            recorder.write(e)
        for s in sinks:
            s.feed(e)
        if args.perfetto:
            seen.append(e)

    what = " ".join(command) if command else ("every process" if args.all else f"pids {args.pids}")
    app = TraceApp(make_tracer, title=f"eBPF · {what}"[:100], sink=sink, cast=args.cast)
    try:
        app.run()
    finally:
        app.end_trace()
        if app.thread is not None and app.thread.is_alive() and app.tracer is not None:
            app.tracer.finished.wait(1.0)
        if recorder is not None:
            recorder.close()
            if recorder.failed:
                print(f"vmmtui trace: {recorder.failed}", file=sys.stderr)
        _close_sinks(sinks, seen if args.perfetto else [], args.perfetto)
    tracer = app.tracer
    if app.error:
        print(f"vmmtui trace: {app.error}", file=sys.stderr)
        if app.code and (tracer is None or tracer.exit is None):
            return app.code
    if command and tracer is not None and tracer.exit is not None:
        return tracer.exit.status
    if app.signalled is not None:
        return 128 + app.signalled
    return EXIT_OK if not command else EXIT_FAILED


def _import_the_fold() -> None:
    """What reads the events is imported before the command starts: a first import (rich, the
    dataclasses of the stream, the ledger) costs more CPU than a short traced program runs, and
    would compete with it on a busy machine."""
    import rich.console  # noqa: F401

    import vmmtui.console  # noqa: F401
    import vmmtui.trace.ledger  # noqa: F401
    import vmmtui.trace.narration  # noqa: F401


def _recorder(args: argparse.Namespace, command: list[str]):
    import datetime

    from vmmtui.record.recording import Header, Machine, Recorder, RecordingError

    what = " ".join(command) if command else ("every process" if args.all else f"pids {args.pids}")
    header = Header(
        date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        machine=Machine.here(),
        backend="trace",
        reason="vmmtui trace (eBPF)",
        options={"command": command, "pids": args.pids, "all": args.all},
        title=f"trace of {what}"[:120],
    )
    try:
        return Recorder(args.record, header)
    except OSError as exc:
        raise RecordingError(
            f"cannot write the recording {args.record}: {exc.strerror or exc}; "
            "choose a writable --record FILE"
        ) from None


def _discard(recorder, path: str | None) -> None:
    if recorder is not None and path is not None:
        recorder.close()
        os.unlink(path)


def _comm(pid: int, cache: dict[int, str]) -> str:
    if pid not in cache:
        try:
            with open(f"/proc/{pid}/comm", encoding="utf-8", errors="surrogateescape") as f:
                cache[pid] = f.read().rstrip("\n")
        except OSError:
            cache[pid] = ""
    return cache[pid]


def _unwritable(path: str) -> str:
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        return f"no directory {folder}"
    if os.path.isdir(path):
        return "is a directory; name a file"
    return "" if os.access(folder, os.W_OK) else f"cannot write in {folder}"


def _sinks(args: argparse.Namespace) -> list | int:
    """The exporters the options ask for (``feed(e)``, ``close()``), or an exit code after one line."""
    sinks: list = []
    try:
        if args.prometheus:
            from vmmtui.fleet.prometheus import MetricsEndpoint

            sinks.append(MetricsEndpoint.start(args.prometheus, mode="ebpf"))
            print(f"vmmtui trace: Prometheus metrics at {sinks[-1].url}", file=sys.stderr)
        if args.otlp:
            from vmmtui.fleet.otlp import OtlpExporter

            sinks.append(OtlpExporter(args.otlp))
    except ValueError as exc:
        _close_sinks(sinks, [])
        return _usage(str(exc))
    except (ImportError, RuntimeError) as exc:  # MissingLibrary: the fleet extra is not installed
        _close_sinks(sinks, [])
        print(f"vmmtui trace: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        _close_sinks(sinks, [])
        print(
            f"vmmtui trace: cannot listen on {args.prometheus}: {exc.strerror or exc}; "
            "pick another port (--prometheus HOST:PORT)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return sinks


def _close_sinks(sinks: list, events: list, perfetto: str | None = None) -> None:
    for sink in sinks:
        sink.close()
        if problem := getattr(sink, "problem", ""):
            print(f"vmmtui trace: --otlp: {problem}", file=sys.stderr)
    if perfetto:
        from vmmtui import perfetto as chrome_json

        try:
            n = chrome_json.write(perfetto, events)
            print(
                f"vmmtui trace: wrote {perfetto} ({n} trace events) for ui.perfetto.dev",
                file=sys.stderr,
            )
        except OSError as exc:
            print(f"vmmtui trace: cannot write {perfetto}: {exc.strerror or exc}", file=sys.stderr)


def _run(tracer, args: argparse.Namespace, recorder, sinks: list, seen: list) -> None:
    from rich.console import Console
    from rich.text import Text

    from vmmtui.console import print_json
    from vmmtui.trace.events import (
        LedgerFinding,
        TraceFinished,
        TraceStarted,
    )
    from vmmtui.trace.ledger import Ledger
    from vmmtui.trace.narration import ProcessNames, lines, worth_a_line

    console = Console(highlight=False, soft_wrap=True)
    ledger = Ledger()
    names = ProcessNames()
    #: the lines of one batch, printed at once (one console.print per line cost more than the
    #: decode of the record behind it)
    pending: list = []

    def flush() -> None:
        if pending:
            console.print(Text("\n").join(pending))
            pending.clear()
        sys.stdout.flush()

    def out(e, show: bool = True) -> None:
        if recorder is not None:
            recorder.write(e)
        for sink in sinks:
            sink.feed(e)
        if args.perfetto:
            seen.append(e)
        if not show:
            return
        if args.json:
            print_json(e, sys.stdout)
            return
        if args.quiet and not isinstance(e, LedgerFinding | TraceStarted | TraceFinished):
            return
        pending.extend(
            lines(
                e, names.t0, _comm(getattr(e, "pid", 0), names.comms) if hasattr(e, "pid") else ""
            )
        )

    try:
        for e in tracer.events(on_batch=flush):
            names.see(e)
            if isinstance(e, TraceFinished):
                for f in ledger.finish():
                    out(f)
                e = dataclasses.replace(
                    e,
                    findings=sum(
                        1 for f in ledger.findings if f.kind not in ("shared", "imported")
                    ),
                )
                out(e)
                flush()
                if not args.json:
                    _summary(console, ledger)
                continue
            out(e, args.json or worth_a_line(e, ledger))
            for f in ledger.apply(e):
                out(f)
    finally:
        flush()


def _summary(console, ledger) -> None:
    from collections import Counter

    by = Counter(f.kind for f in ledger.findings)
    if not ledger.findings:
        console.print("no fd travelled between traced processes, no CUDA sharing call was seen")
        return
    console.print(
        "ledger: "
        + ", ".join(f"{n} {kind}" for kind, n in sorted(by.items()))
        + f"; {len(ledger.transfers)} fd transfers, {len(ledger.allocations)} allocations, "
        f"{len(ledger.ipc)} IPC handles, {len(ledger.pool_ptrs)} pool pointers exported"
    )
    for a in ledger.allocations.values():
        pins = ledger.pins(a)
        console.print(
            f"  allocation {a.handle:#x} of pid {a.pid}: {a.size} bytes, exported as "
            f"{[fd for fd, _ in a.exported]}, imported by {[i.pid for i in a.imports]}; "
            + (f"pinned by {', '.join(pins)}" if pins else "nothing pins it now")
        )


def _fallback(args: argparse.Namespace, command: list[str], reason: str) -> int:
    print(f"vmmtui trace: eBPF unavailable: {reason}", file=sys.stderr)
    print(
        "vmmtui trace: falling back to polling /proc (as `vmmtui "
        + ("watch" if command else "attach")
        + "` does): fds shared and closed between two polls can be missed, a direction not seen "
        "is unknown, and CUDA calls are not seen"
        + ("; --record is not written in polling mode" if args.record else ""),
        file=sys.stderr,
    )
    from vmmtui.cli import attach, watch
    from vmmtui.cli.options import Parser

    parser = Parser(prog="vmmtui")  # the options as watch/attach parse them, defaults included
    sub = parser.add_subparsers(dest="command")
    watch.add_parser(sub)
    attach.add_parser(sub)
    if command:
        argv = ["watch", *(["--json"] if args.json else []), *(["-q"] if args.quiet else []), "--"]
        ns = parser.parse_args([*argv, *command])
    else:
        argv = ["attach", *map(str, args.pids), *(["--all"] if args.all else [])]
        argv += ["--prometheus", args.prometheus] if args.prometheus else []
        argv += ["--json"] if args.json else []
        argv += ["--duration", str(args.duration)] if args.duration else []
        ns = parser.parse_args(argv)
    return ns.func(ns)


def replay_trace(recording) -> int:
    """A trace recording, printed as the live trace printed it (the ledger folded again)."""
    from rich.console import Console

    from vmmtui.trace.events import (
        LedgerFinding,
        TraceFinished,
    )
    from vmmtui.trace.ledger import Ledger
    from vmmtui.trace.narration import ProcessNames, lines

    console = Console(highlight=False, soft_wrap=True)
    console.print(
        f"replay of {recording.header.title or recording.path} ({recording.header.when}, {recording.header.where})",
        style="bold",
    )
    ledger, names = Ledger(), ProcessNames()
    for e in recording.events:
        names.see(e)
        if isinstance(e, LedgerFinding):
            continue  # folded again below, from the calls
        for line in lines(e, names.t0, names.comms.get(getattr(e, "pid", 0), "")):
            console.print(line)
        if isinstance(e, TraceFinished):
            continue
        for f in ledger.apply(e):
            for line in lines(f, names.t0):
                console.print(line)
    for f in ledger.finish():
        for line in lines(f, names.t0):
            console.print(line)
    _summary(console, ledger)
    return EXIT_OK
