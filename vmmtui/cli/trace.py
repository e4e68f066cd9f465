"""``vmmtui trace -- CMD | -p PID… | --all``: every share of memory as it happens, from the kernel
(eBPF), folded into the ledger; with ``--poll``, or where eBPF is refused (said in one line, in the
stream and on stderr), the same stream made by polling /proc (``vmmtui.trace.polling``).
``trace -p`` starts from what is already true (frame 0). ``attach`` and ``watch`` are aliases
(``run_as``). A terminal gets ``show``; ``--text``, ``--json``, ``-q`` and a pipe get the stream."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from typing import TYPE_CHECKING

from vmmtui.cli.options import (
    EXIT_FAILED,
    EXIT_OK,
    EXIT_USAGE,
    not_a_terminal,
    number_arg,
    positive_arg,
    size_arg,
)
from vmmtui.system.early import leave_unfreed
from vmmtui.system.interrupts import delivered_to, exit_status

if TYPE_CHECKING:
    from vmmtui.pipeline.session import TraceRequest

#: what ``vmmtui trace --help`` opens with: what it is for, and an example
ABOUT = """\
Trace, as it happens, every fd passed between processes (SCM_RIGHTS, pidfd_getfd), every
memfd and close, and every CUDA VMM/IPC call, with eBPF: of a command, of running processes, or of
the whole machine; a ledger says who holds what. Without eBPF (it needs root) it says why and
follows by polling /proc instead. Exits with the command's exit code; a command that is not found
exits 127 and one that is not executable 126, before anything opens (as env and timeout do: 2 is
kept for vmmtui's own options). The command's whole process tree ends with the trace (q, Ctrl-C,
--duration, and kill -9 of vmmtui alike).

examples:
  vmmtui trace -- python3 app.py
  vmmtui trace -p 4242 --record share.jsonl
"""


def add_arguments(t: argparse.ArgumentParser) -> None:
    """``vmmtui trace``'s options, on the parser the command line made for it."""
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
        "--poll",
        action="store_true",
        help="observe by polling /proc (fds, kcmp, maps, NVML) instead of eBPF: no root needed, "
        "but what happens between two polls is missed (taken anyway where eBPF is refused)",
    )
    t.add_argument(
        "--interval",
        type=number_arg(0, 0.25, above=True, unit=" s"),
        default=None,
        metavar="S",
        help="polling: seconds between polls (default 0.1 for a command, 0.25 for pids; at most 0.25)",
    )
    t.add_argument(
        "--no-nvml", action="store_true", help="do not ask NVML for GPU memory per process"
    )
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
    t.add_argument(
        "--ring-mb",
        type=ring_mb_arg,
        default=32,
        metavar="MB",
        help="the kernel's ring buffers in MiB, all CPUs together, a power of two (default 32; "
        "each CPU's ring gets an equal share, at least 8 MiB where this allows: about 4 s of "
        "records at 5,000 shares a second on one CPU; more for faster programs or a busy machine)",
    )
    t.add_argument(
        "--never-imported-after",
        type=positive_arg,
        metavar="S",
        help="say an export no process imported after S seconds, live (default 30; the "
        "exporter's exit and the end say it too)",
    )
    t.add_argument(
        "--max-pinned",
        type=size_arg,
        metavar="BYTES",
        help="fail (exit 1, one line) when more than BYTES (64MiB, 1G…) of memory that crossed "
        "processes is pinned by live processes at any point of the run (its peak)",
    )
    t.add_argument("cmd", nargs=argparse.REMAINDER, help="the command, after --")
    t.set_defaults(func=cmd_trace)


def ring_mb_arg(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of MiB: {text!r}") from None
    if n < 1 or n > 1024 or n & (n - 1):
        raise argparse.ArgumentTypeError(f"a power of two from 1 to 1024 MiB, not {n}")
    return n


def _usage(message: str, said: str = "trace") -> int:
    print(f"vmmtui {said}: {message}", file=sys.stderr)
    return EXIT_USAGE


def run_as(argv: list[str], said: str, **extra) -> int:
    """``vmmtui trace ARGV`` for an alias (``attach``, ``watch``): parsed by trace's own parser and
    run by ``cmd_trace``, one code path; its messages say ``vmmtui SAID:``. ``extra`` sets what only
    an alias asks (``once``: one poll; ``leaks``: look for leftover files at the end)."""
    from vmmtui.cli.options import Parser

    parser = Parser(prog="vmmtui")
    add_arguments(parser.add_subparsers(dest="command").add_parser("trace"))
    args = parser.parse_args(["trace", *argv])
    args.said_as = said
    for name, value in extra.items():
        setattr(args, name, value)
    return args.func(args)


def cmd_trace(args: argparse.Namespace) -> int:
    """The trace, then its budget (``--max-pinned``): a run over it exits 1 (or the command's
    own failure) with one line, whatever else it found."""
    code = _trace(args)
    budget = getattr(args, "budget", None)
    if budget is None or not budget.over:
        return code
    from vmmtui.words.verdict import trace_over_budget

    t0 = budget.first_at
    at = (budget.peak_at - t0) / 1e9 if t0 and budget.peak_at >= t0 else 0.0
    said = getattr(args, "said_as", "trace")
    print(
        f"vmmtui {said}: " + trace_over_budget(budget.peak, budget.limit, at, budget.peak_pins),
        file=sys.stderr,
    )
    return code or EXIT_FAILED


def _trace(args: argparse.Namespace) -> int:
    said = getattr(args, "said_as", "trace")
    command = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    modes = sum((bool(command), bool(args.pids), bool(args.all)))
    if modes != 1:
        return _usage(
            "give a command after --, -p PID… or --all (one of them), e.g. "
            "vmmtui trace -- python3 app.py",
            said,
        )
    for pid in args.pids:
        if pid <= 0 or not os.path.exists(f"/proc/{pid}"):
            return _usage(f"no process {pid}", said)
    if command:  # refused in one line before any screen opens or probe loads
        from vmmtui.trace.command import CommandNotFound, resolve

        try:
            resolve(command)
        except CommandNotFound as exc:
            print(f"vmmtui {said}: {exc}", file=sys.stderr)
            return exc.code
    if args.libcuda and not os.path.exists(args.libcuda):
        return _usage(f"--libcuda {args.libcuda}: no such file", said)
    if args.perfetto and (problem := _unwritable(args.perfetto)):
        return _usage(f"--perfetto {args.perfetto}: {problem}", said)
    world = _world(args)  # the run's one world: its session folds it, the exporters read it
    sinks = _sinks(args, world)
    if isinstance(sinks, int):
        return sinks
    if getattr(args, "max_pinned", None) is not None:  # weighed at every change: its peak
        from vmmtui.pipeline.pinned import Budget

        args.budget = Budget(world, args.max_pinned)
        sinks.append(args.budget)
    recorder = None
    if args.record:
        from vmmtui.record.recording import RecordingError

        try:
            recorder = _recorder(args, command)
        except RecordingError as exc:
            _close_sinks(sinks, [])
            return _usage(str(exc), said)
    request = _request(args, command)
    if _wants_screen(args) and request.wants_ebpf:
        from vmmtui.trace.loader import why_not

        if why_not() is None:  # the tracer loads in the app's thread, after the first frame
            return _inspect(request, args, recorder, sinks, world)
    _import_the_fold()
    started = _start(request, args)
    if isinstance(started, int):  # the command could not be started: said in one line
        _discard(recorder, args.record)
        _close_sinks(sinks, [])
        return started
    source, reason = started
    if reason and not args.json:
        from vmmtui.trace.polling import fallback_words

        print(f"vmmtui {said}: {fallback_words(reason)}", file=sys.stderr)
    from vmmtui.pipeline.session import TraceSession

    tee = Tee(recorder, sinks, bool(args.perfetto), world)
    session: TraceSession | None = (
        None  # the screen runs its own (in the app's thread); the text runs it here
    )
    screen: tuple[int | None, bool] | None = None  # how the screen ended, where there was one
    with delivered_to(source.forward):  # the traced command decides when to end; restored after
        try:
            if _wants_screen(args):
                screen = show(source, tee, args)
            else:
                if recorder is not None:  # a full disk is said when it happens, not at the end
                    recorder.on_fail = lambda why: print(f"vmmtui {said}: {why}", file=sys.stderr)
                session = TraceSession(source, [tee], world=world)
                _print(session, args)
        finally:
            source.stopping = True
            source.close()
            captured = getattr(source, "stdout", None)
            if captured is not None and not isinstance(captured, int):  # the screen's capture
                print_output(captured, command, said)
            lost = _close_files(recorder, sinks, tee.seen, args.perfetto, said)
            leave_unfreed()  # the ledger of a long trace: left to the kernel, not freed in turn
    if screen is not None and (screen[0] is not None or screen[1]):
        return exit_status(screen[0])  # the screen's rule: a signal's 128 + it, q: 0
    if command:
        if getattr(source, "timed_out", False) and command_stopped(source):
            print(
                f"vmmtui {said}: --duration {args.duration:g} s ended the trace while the command "
                "still ran: it was stopped, so it has no exit status of its own (exit 1)",
                file=sys.stderr,
            )
            return EXIT_FAILED
        code = source.exit.status if source.exit else EXIT_FAILED
        return code or (EXIT_FAILED if lost else EXIT_OK)  # a file asked for and not written
    stopped_by = getattr(source, "stopped_by", None)
    if stopped_by is not None:  # Ctrl-C (130) or another stop signal: 128 + it
        return 128 + stopped_by
    targets = set(args.pids)
    if targets and session is not None and session.unreadable >= targets:
        print(
            f"vmmtui {said}: "
            + ("none of the given processes could" if len(targets) > 1 else "the process could not")
            + " be read (see above); check the pids (ps -eo pid,cmd), run as their user or root",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return EXIT_FAILED if lost else EXIT_OK


def _request(args: argparse.Namespace, command: list[str]) -> TraceRequest:
    from vmmtui.pipeline.session import TraceRequest

    return TraceRequest(
        tuple(command),
        tuple(args.pids),
        args.all,
        args.poll,
        args.interval,
        not args.no_nvml,
        not args.no_cuda,
        args.libcuda,
        args.ring_mb << 20,
        args.duration,
        getattr(args, "once", False),
        getattr(args, "leaks", False),
    )


def _start(request: TraceRequest, args: argparse.Namespace):
    """The running source and why it polls (``TraceRequest.start``), or an exit code when the
    command cannot be started (one line said)."""
    from vmmtui.trace.command import CommandNotFound
    from vmmtui.trace.output import Output

    # under --json the stream is alone on stdout: the command's goes to 2; under the inspector
    # its stdout and stderr are captured (the screen is the inspector's); else the terminal's
    stdout: int | Output | None = 2 if args.json else None
    if _wants_screen(args) and request.command:
        stdout = Output()
    try:
        return request.start(stdout=stdout)
    except CommandNotFound as exc:
        print(f"vmmtui {getattr(args, 'said_as', 'trace')}: {exc}", file=sys.stderr)
        return exc.code


def _wants_screen(args: argparse.Namespace) -> bool:
    """A terminal gets the screen, as htop does; --text, --json, -q and a pipe keep the stream."""
    return not not_a_terminal() and not (args.json or args.quiet or args.text)


def show(source, tee: Tee, args: argparse.Namespace) -> tuple[int | None, bool]:
    """The one place a trace's stream (eBPF or polling; ``trace``, ``attach``, ``watch``) is
    rendered to a terminal where the app did not start it (polling, asked or the fallback): the
    inspector runs the session on the source, and every event goes to the recording and the
    exporters. Returns the signal that ended it (Ctrl-C: SIGINT), and whether it stopped the
    command (q while it ran)."""
    from vmmtui.trace.output import Output
    from vmmtui.tui.trace import TraceApp

    what = " ".join(source.command) if getattr(source, "command", None) else ""
    output = getattr(source, "stdout", None)
    app = TraceApp(
        source,
        title=f"polling · {what or 'pids'}"[:100],
        sink=tee,
        recorded=tee.recorder is not None,
        cast=args.cast,
        output=output if isinstance(output, Output) else None,
        world=tee.world,
    )
    try:
        app.run()
    finally:
        app.end_trace()
    return app.signalled, app.stopped_command


class Tee:
    """What every event of the run also goes to, in the thread that runs it: the recording, the
    exporters, and the events kept for ``--perfetto`` at the end. ``world``: the run's, which
    the session that feeds the tee folds and the exporters read."""

    def __init__(self, recorder, sinks: list, perfetto: bool, world=None) -> None:
        self.recorder, self.sinks, self.perfetto = recorder, sinks, perfetto
        self.world = world
        self.seen: list = []

    def __call__(self, e) -> None:
        if self.recorder is not None:
            self.recorder.write(e)
        for sink in self.sinks:
            sink.feed(e)
        if self.perfetto:
            self.seen.append(e)


def _inspect(request: TraceRequest, args: argparse.Namespace, recorder, sinks: list, world) -> int:
    """The inspector on the live trace (stdout is a terminal, as htop's); the exit status is the
    command's where it ended by itself, 128 + the signal that ended the inspector otherwise."""
    from vmmtui.trace.output import Output
    from vmmtui.tui.trace import TraceApp

    said = getattr(args, "said_as", "trace")
    tee = Tee(recorder, sinks, bool(args.perfetto), world)
    command = list(request.command)
    # the screen is the inspector's: the command's stdout and stderr are captured, shown on O
    # and printed once the inspector closes
    output = Output() if command else None

    def start():  # in the app's thread: the tracer's imports come after the first frame
        return request.start(stdout=output)

    what = " ".join(command) if command else ("every process" if args.all else f"pids {args.pids}")
    app = TraceApp(
        start=start,
        title=f"eBPF · {what}"[:100],
        sink=tee,
        recorded=tee.recorder is not None,
        cast=args.cast,
        output=output,
        world=tee.world,
    )
    try:
        app.run()
    finally:
        app.end_trace()  # waits for the tracer's thread, at most END_WAIT_S after q in all
        if output is not None:
            output.finish()
            print_output(output, command, said)
        lost = _close_files(recorder, sinks, tee.seen, args.perfetto, said)
        leave_unfreed()  # every event of the trace is held: freeing them one by one takes seconds
    tracer = app.tracer
    if app.error:
        print(f"vmmtui {said}: {app.error}", file=sys.stderr)
        if app.code and (tracer is None or tracer.exit is None):
            return app.code
    failed = EXIT_FAILED if lost or app.lost() else EXIT_OK  # a file asked for, not written
    for line in app.lost():
        print(f"vmmtui {said}: {line}", file=sys.stderr)
    if app.signalled is None and command and tracer is None:  # q before the trace had started
        print(
            f"vmmtui {said}: quit while the trace was starting (the probes loading): the command "
            "did not run",
            file=sys.stderr,
        )
        return failed  # the screen's rule: q is 0 (1 where a file asked for was not written)
    if app.signalled is not None or app.stopped_command:  # the screen's rule: 128 + it, q: 0
        return exit_status(app.signalled, failed)
    if command and tracer is not None and tracer.exit is not None:
        return tracer.exit.status or failed  # it ended by itself
    return failed if not command else EXIT_FAILED


def print_output(output, command: list[str], said: str) -> None:
    """After the inspector: what the command wrote while it had the terminal, as it wrote it
    (stdout to stdout, stderr to stderr, in the order it came), after one line on stderr that
    says whose it is and what of it was dropped. Nothing written: nothing said."""
    from vmmtui.stream.names import shown
    from vmmtui.stream.sizes import format_size

    kept = output.kept()
    if not kept.total:
        return
    dropped = (
        f"; the first {format_size(kept.dropped)} were dropped, the last "
        f"{format_size(kept.total - kept.dropped)} follow"
        if kept.dropped
        else ""
    )
    sys.stdout.flush()
    print(
        f"vmmtui {said}: the output of {shown(' '.join(command), 120)} while the inspector was "
        f"open ({format_size(kept.total)}{dropped}):",
        file=sys.stderr,
        flush=True,
    )
    for chunk in kept.chunks:
        stream = sys.stderr if chunk.stream == "stderr" else sys.stdout
        stream.buffer.write(chunk.data)
        stream.buffer.flush()
    if not kept.chunks[-1].data.endswith(b"\n"):
        sys.stderr.write("\n")
    sys.stderr.flush()


def _import_the_fold() -> None:
    """What reads the events is imported before the command starts: a first import (rich, the
    dataclasses of the stream, the ledger) costs more CPU than a short traced program runs, and
    would compete with it on a busy machine."""
    import rich.console  # noqa: F401

    import vmmtui.model.ledger  # noqa: F401
    import vmmtui.render.console  # noqa: F401
    import vmmtui.words.trace  # noqa: F401


def _recorder(args: argparse.Namespace, command: list[str]):
    import datetime

    from vmmtui.record.recording import Header, Machine, Recorder, RecordingError
    from vmmtui.words.findings import json_line

    what = " ".join(command) if command else ("every process" if args.all else f"pids {args.pids}")
    header = Header(
        date=datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        machine=Machine.here(),
        backend="trace",
        reason="vmmtui trace",
        options={"command": command, "pids": args.pids, "all": args.all},
        title=f"trace of {what}"[:120],
    )
    try:
        return Recorder(args.record, header, json_line)
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


def _world(args: argparse.Namespace):
    """The run's world (``model.world``), made once: the session folds it, the exporters read it."""
    from vmmtui.model.handles import NEVER_IMPORTED_S
    from vmmtui.model.world import World

    return World(args.never_imported_after or NEVER_IMPORTED_S)


def _sinks(args: argparse.Namespace, world) -> list | int:
    """The exporters the options ask for (``feed(e)``, ``close()``), reading the run's
    ``world``, or an exit code after one line."""
    sinks: list = []
    said = getattr(args, "said_as", "trace")
    try:
        if args.prometheus:
            from vmmtui.fleet.prometheus import MetricsEndpoint

            sinks.append(MetricsEndpoint.start(args.prometheus, mode="ebpf", world=world))
            print(f"vmmtui {said}: Prometheus metrics at {sinks[-1].url}", file=sys.stderr)
        if args.otlp:
            from vmmtui.fleet.otlp import OtlpExporter

            sinks.append(OtlpExporter(args.otlp, world=world))
    except ValueError as exc:
        _close_sinks(sinks, [])
        return _usage(str(exc), said)
    except (ImportError, RuntimeError) as exc:  # MissingLibrary: the fleet extra is not installed
        _close_sinks(sinks, [])
        print(f"vmmtui {said}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    except OSError as exc:
        _close_sinks(sinks, [])
        print(
            f"vmmtui {said}: cannot listen on {args.prometheus}: {exc.strerror or exc}; "
            "pick another port (--prometheus HOST:PORT)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    return sinks


def how_many(n: int, thing: str) -> str:
    """``1 fd transfer``, ``2 fd transfers``."""
    return f"{n} {thing}{'' if n == 1 else 's'}"


def command_stopped(source) -> bool:
    """Whether the traced command did not end by itself: no exit of its own was seen, or the
    stop signal the trace sent ended it (SIGTERM, then SIGKILL)."""
    ex = getattr(source, "exit", None)
    return ex is None or ex.signal in (signal.SIGTERM, signal.SIGKILL)


def _close_files(recorder, sinks: list, events: list, perfetto: str | None, said: str) -> list[str]:
    """The recording closed and the exporters' files written, each failure said in one line:
    those lines (the command then exits 1 where it would have exited 0)."""
    lost: list[str] = []
    if recorder is not None:
        said_already = bool(recorder.failed) and recorder.on_fail is not None
        recorder.close()
        if recorder.failed:
            if not said_already:
                print(f"vmmtui {said}: {recorder.failed}", file=sys.stderr)
            lost.append(recorder.failed)
    if not _close_sinks(sinks, events, perfetto, said):
        lost.append(f"--perfetto {perfetto}")
    return lost


def _close_sinks(
    sinks: list, events: list, perfetto: str | None = None, said: str = "trace"
) -> bool:
    """The exporters closed and the Perfetto file written: False when it could not be (said)."""
    for sink in sinks:
        sink.close()
        if problem := getattr(sink, "problem", ""):
            print(f"vmmtui {said}: --otlp: {problem}", file=sys.stderr)
    if perfetto:
        from vmmtui.render import perfetto as chrome_json

        try:
            n = chrome_json.write(perfetto, events)
            print(
                f"vmmtui {said}: wrote {perfetto} ({n} trace events) for ui.perfetto.dev",
                file=sys.stderr,
            )
        except OSError as exc:
            print(
                f"vmmtui {said}: cannot write {perfetto}: {exc.strerror or exc}; nothing was "
                "written",
                file=sys.stderr,
            )
            return False
    return True


def _print(session, args: argparse.Namespace) -> None:
    """The stream as text lines (``--text``, a pipe) or JSON lines (``--json``); ``-q``: only
    the start, the findings and the end."""
    from rich.console import Console
    from rich.text import Text

    from vmmtui.stream.events import Leak, WatchFinished
    from vmmtui.stream.observed import LedgerFinding, TraceCall, TraceFinished, TraceStarted
    from vmmtui.words.findings import json_line
    from vmmtui.words.gpu import GpuLines
    from vmmtui.words.trace import Bystanders, OncePerProblem, ProcessNames, lines, worth_a_line

    console = Console(highlight=False, soft_wrap=True)
    quiet = (LedgerFinding, TraceStarted, TraceFinished, Leak, WatchFinished)
    once = OncePerProblem()
    names = ProcessNames()
    bystanders = Bystanders()
    #: the lines of one batch, printed at once (one console.print per line cost more than the
    #: decode of the record behind it)
    pending: list = []
    #: --json: the lines of one batch (``Event.to_json``, as print_json writes them), one write
    json_lines: list[str] = []
    #: no colours (a pipe, NO_COLOR, TERM=dumb): a line is its text, written without rich's
    #: layout, which cost more than the call behind the line (the text already has no controls:
    #: rich's Text takes them out when it is made)
    plain = console.color_system is None

    def flush() -> None:
        if json_lines:
            json_lines.append("")
            sys.stdout.write("\n".join(json_lines))
            json_lines.clear()
        if pending:
            if plain:
                console.file.write("\n".join([t.plain for t in pending]) + "\n")
            else:
                console.print(Text("\n").join(pending))
            pending.clear()
        sys.stdout.flush()

    polling = False
    gpu = GpuLines()  # the GPU ledger's tables (``GpuTable``), where who holds what changed
    try:
        for e in session.events(on_batch=flush):
            names.see(e)
            if args.json:  # written once a batch (on_batch) and at the end, not once an event
                json_lines.append(json_line(e))
                continue
            pending.extend(Text(line) for line in gpu.see(e))
            if isinstance(e, TraceStarted):
                polling = e.mode == "polling"
            if args.quiet and not isinstance(e, quiet):
                continue
            if not worth_a_line(e, session.ledger) or not once.first(e):
                continue
            for x in bystanders.see(e):
                comm = _comm(x.pid, names.comms) if isinstance(x, TraceCall) else ""
                pending.extend(lines(x, names.t0, comm))
            if isinstance(e, TraceFinished):
                flush()
                if not polling:
                    _summary(console, session.ledger, names.t0, bystanders.words())
    finally:
        flush()


def _summary(console, ledger, t0: int = 0, bystanders: str = "") -> None:
    from collections import Counter

    from vmmtui.words.trace import lost_words, not_read

    by: Counter[str] = Counter()
    for counted, n in ledger.findings.by.items():  # every finding, kept or not
        by[counted.kind] += n
    if bystanders:
        console.print(bystanders)
    losses = ledger.losses
    if losses.total:
        cpus = ", ".join(
            f"{n} on CPU {c}" if c >= 0 else f"{n} on a CPU not known"
            for c, n in sorted(losses.by_cpu.items())
        )
        windows = "; ".join(lost_words(n, a, b, t0) for a, b, n in losses.windows[:4])
        more = f"; {len(losses.windows) - 4} more windows" if len(losses.windows) > 4 else ""
        console.print(
            f"lost: {losses.total} records ({cpus}): {windows or lost_words(losses.total, 0, 0)}"
            f"{more}; {by.get('unknown', 0)} conclusion{'' if by.get('unknown', 0) == 1 else 's'} "
            "they could overturn said as unknown, none as a leak"
        )
    said = []
    if ledger.unreceived:
        said.append(
            f"{ledger.unreceived} fd{'s' if ledger.unreceived != 1 else ''} sent and not seen "
            + (
                f"received: their receive may be among the {losses.total} records lost"
                if losses.total
                else "received by a traced process (the kernel did not report them left queued)"
            )
        )
    unread = ledger.fds_not_read
    if sum(unread.values()):
        said.append(
            " and ".join(f"{not_read(n)} ({how})" for how, n in unread.items() if n)
            + ": nothing is claimed about them"
        )
    if not ledger.findings:
        console.print(
            "no fd travelled between traced processes, no CUDA sharing call was seen"
            if not said
            else "; ".join(said)
        )
        return
    console.print(verdict_line(ledger, ledger.findings.by) + "".join(f"; {x}" for x in said))
    from vmmtui.words.trace import problems_words

    for line in problems_words(list(ledger.findings)):  # each problem of many findings, whole
        console.print(line, markup=False)


def verdict_line(ledger, counted) -> str:
    """The run's verdict with its counts (``counted``: the ledger's findings, ``Counted`` -> how
    many): the problems by kind, each relation once (``model/policy.py``: a hundred pins of one
    orphaned pool are one problem), the good news, the quiet facts by what they are, and what the
    ledger followed. Each allocation's pins are in ``--json`` (every call and finding of it), not
    here: a run of NCCL exports hundreds."""
    from vmmtui.model.policy import problems_by_kind, tally
    from vmmtui.words.findings import quiet_words

    t = tally((), counted)
    bad = problems_by_kind(counted)
    head = (
        f"verdict: {sum(bad.values())} to look at ("
        + ", ".join(f"{n} {k}" for k, n in sorted(bad.items(), key=lambda kv: (-kv[1], kv[0])))
        + ")"
        if bad
        else "verdict: nothing to look at"
    )
    facts = quiet_words(t.quiet, t.quiet_by)
    return (
        f"{head}; {t.good} shared/imported"
        + (f"; {facts}" if facts else "")
        + f"; followed {how_many(ledger.transfers.total, 'fd transfer')}, "
        f"{how_many(len(ledger.allocations), 'allocation')}, "
        f"{how_many(len(ledger.ipc), 'IPC handle')}, "
        f"{how_many(len(ledger.pool_ptrs), 'pool pointer')} "
        "(each one's calls and findings: --json)"
    )


def replay_trace(recording, folded=None) -> int:
    """A trace recording, printed as the live trace printed it: the stream of its one fold
    (``folded``: ``pipeline.replay.trace_timeline``, the replay's; made here where not given)."""
    from rich.console import Console

    from vmmtui.pipeline.replay import trace_timeline
    from vmmtui.words.gpu import GpuLines
    from vmmtui.words.trace import Bystanders, OncePerProblem, ProcessNames, lines

    console = Console(highlight=False, soft_wrap=True)
    console.print(
        f"replay of {recording.header.title or recording.path} ({recording.header.when}, {recording.header.where})",
        style="bold",
        markup=False,  # the title and the machine are the recording's words, not markup
    )
    folded = folded or trace_timeline(recording.events)
    names, bystanders, once, gpu = ProcessNames(), Bystanders(), OncePerProblem(), GpuLines()
    for e in folded.events:
        names.see(e)
        for said in gpu.see(e):  # the GPU tables, made again from the recorded NVML readings
            console.print(said, markup=False)
        if not once.first(e):
            continue
        for x in bystanders.see(e):
            for line in lines(x, names.t0, names.comms.get(getattr(x, "pid", 0), "")):
                console.print(line)
    if folded.world is None:  # a live run's timeline: its session holds the world
        raise ValueError("replay_trace takes a recording's timeline (trace_timeline)")
    _summary(console, folded.world.ledger, names.t0, bystanders.words())
    return EXIT_OK
