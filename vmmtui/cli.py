"""Command line: ``vmmtui`` (the inspector), ``vmmtui run`` (headless), ``vmmtui doctor``."""

from __future__ import annotations

import argparse
import signal
import sys

from vmmtui.backends import NAMES, choose
from vmmtui.config import Direction, Mechanism, SessionConfig, Verify, choices, validate
from vmmtui.sizes import SizeError, parse_size

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class Parser(argparse.ArgumentParser):
    """argparse that says a bad option in one line (the README promises it), exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except SizeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be greater than 0")
    return value


def _sizes(text: str) -> list[int]:
    try:
        sizes = [parse_size(t.strip()) for t in text.split(",") if t.strip()]
    except SizeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not sizes:
        raise argparse.ArgumentTypeError("give at least one size")
    return sizes


def _devices(text: str) -> list[int]:
    try:
        devices = [int(d) for d in text.split(",") if d.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid device list {text!r}: use ordinals like 0,1") from None
    if not devices or min(devices) < 0:
        raise argparse.ArgumentTypeError(f"invalid device list {text!r}: use ordinals like 0,1")
    return devices


def _scenario(text: str) -> str:
    from vmmtui.scenarios import SCENARIOS

    if text not in SCENARIOS:
        raise argparse.ArgumentTypeError(f"unknown scenario {text!r}; `vmmtui run --list-scenarios` lists them")
    return text


def list_scenarios() -> str:
    from vmmtui.scenarios import SCENARIOS

    width = max(map(len, SCENARIOS))
    lines = []
    for s in SCENARIOS.values():
        only = [b for b in ("cuda", "memfd") if not s.why_not(b)]
        lines.append(f"{s.name:<{width}}  {s.summary}" + ("" if len(only) == 2 else f" [{'/'.join(only)} only]"))
    return "\n".join(lines)


def _session_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=NAMES, default="auto",
                   help="cuda (GPU, VMM API), memfd (CPU analogue) or auto (cuda when it can run; default)")
    p.add_argument("--size", type=_size, default=parse_size("1MiB"),
                   help="bytes to share: 1048576, 1MiB, 64MB, 2GiB (rounded up to the granularity; default 1MiB)")
    p.add_argument("--device", type=int, default=0, help="CUDA device ordinal (default 0)")
    p.add_argument("--timeout", type=_positive, default=10.0,
                   help="seconds to wait for connect/accept (default 10); the ACK waits 12x this")
    p.add_argument("--scenario", metavar="NAME", type=_scenario,
                   help="make one failure really happen (see --list-scenarios)")
    p.add_argument("--verify", choices=choices(Verify), default=Verify.AUTO.value,
                   help="where the pattern is written and checked: device (NVRTC kernels; auto's choice on cuda), "
                   "host (the seed's copy + numpy; auto's choice on memfd) or both (they must agree)")
    p.add_argument("--mechanism", choices=choices(Mechanism), default=Mechanism.VMM.value,
                   help="vmm: cuMemCreate + an exported fd (default); legacy: cuMemAlloc + a 64-byte "
                   "cuIpcGetMemHandle handle, no fd (seed 003; cuda only)")
    p.add_argument("--consumers", type=int, default=1, metavar="N",
                   help="consumer processes, each gets its own fd and maps the same allocation (1-8; default 1)")
    p.add_argument("--direction", choices=choices(Direction), default=Direction.PRODUCER_WRITES.value,
                   help="producer-writes (the seed; default) or consumer-writes (memMapIPCDrv: each consumer "
                   "writes its slice with a kernel, the producer verifies)")
    p.add_argument("--devices", type=_devices, metavar="0,1",
                   help="GPUs the consumers spread over, round-robin (default: the producer's --device)")


def parser() -> argparse.ArgumentParser:
    p = Parser(prog="vmmtui", description="Watch CUDA VMM memory sharing between two processes, "
                                "step by step. With no command, opens the inspector.")
    _session_options(p)
    p.add_argument("--autoplay", action="store_true", help="play the whole sequence by itself")
    p.add_argument("--pace", type=_positive, default=1.0, help="seconds between autoplay steps (default 1.0)")
    p.add_argument("--screenshots", metavar="DIR", help="save an SVG screenshot after every step into DIR")
    p.add_argument("--transcript", metavar="FILE", help="write every event to FILE (.md for Markdown, .jsonl for JSON lines)")
    p.add_argument("--stable", action="store_true", help=argparse.SUPPRESS)
    sub = p.add_subparsers(dest="command")
    run = sub.add_parser("run", help="run both workers to the end and print the log (exit 0 only when verified)")
    _session_options(run)
    run.add_argument("--json", action="store_true", help="print the event stream as JSON lines")
    run.add_argument("--verbose", "-v", action="store_true", help="also print every driver/system call")
    run.add_argument("--list-scenarios", action="store_true", help="list the failure scenarios, one line each, and exit")
    sk = sub.add_parser("soak", help="many sessions in a row: fds, children, TMPDIR entries and memory must not grow")
    _session_options(sk)
    sk.add_argument("--count", type=int, default=200, help="sessions to run (default 200)")
    sk.add_argument("--json", action="store_true", help="print the result as one JSON object")
    bn = sub.add_parser("bench", help="measure every path (VMM, legacy IPC, host-staged copy, memfd) against the "
                        "device's copy bandwidth; writes JSON and an SVG plot")
    bn.add_argument("--backend", choices=NAMES, default="auto", help="cuda for all paths, memfd for the CPU path only")
    bn.add_argument("--device", type=int, default=0)
    bn.add_argument("--sizes", type=_sizes, metavar="2MiB,1GiB,...",
                    help="sizes to sweep (default 2MiB,8MiB,32MiB,64MiB,256MiB,1GiB,4GiB,16GiB, capped by free memory)")
    bn.add_argument("--repeat", type=int, default=5, help="sessions per path and size (default 5)")
    bn.add_argument("--memfd-max", type=_size, default=parse_size("2GiB"), help="largest memfd size (default 2GiB)")
    bn.add_argument("--staged-max", type=_size, default=parse_size("4GiB"),
                    help="largest host-staged copy (default 4GiB)")
    bn.add_argument("--out", default="bench/results", help="directory for the JSON and SVG (default bench/results)")
    bn.add_argument("--name", help="file name stem (default bench-HOST-DATE)")
    bn.add_argument("--json", action="store_true", help="print the result JSON instead of tables")
    doc = sub.add_parser("doctor", help="what this machine can run: driver, device, VMM, fds, kcmp, memfd")
    doc.add_argument("--device", type=int, default=0)
    return p


def _config(args: argparse.Namespace) -> SessionConfig:
    return SessionConfig(backend=args.backend, size=args.size, device=args.device, connect_timeout=args.timeout,
                         accept_timeout=args.timeout, ack_timeout=args.timeout * 12, scenario=args.scenario,
                         verify=args.verify, mechanism=args.mechanism, consumers=args.consumers,
                         direction=args.direction, devices=args.devices)


def _refuse(args: argparse.Namespace, choice) -> str | None:
    """Why this run cannot start, as one line with the fix; None when it can."""
    from vmmtui.scenarios import get

    if not choice.usable:
        return choice.reason
    return validate(_config(args), choice.name, choice.devices, choice.capacity, get(args.scenario))


def _choice_or_refuse(args: argparse.Namespace):
    """The backend to use, or None after printing the one-line reason it cannot run."""
    choice = choose(args.backend, args.device)
    refused = _refuse(args, choice)
    if refused:
        print(f"vmmtui: {refused}", file=sys.stderr)
        return None
    return choice


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP: stop, clean up, say where, exit 128 + signal (130 for Ctrl-C)."""

    def __init__(self, signum: int = signal.SIGINT):
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum, frame) -> None:
    raise Interrupted(signum)


def cmd_run(args: argparse.Namespace) -> int:
    from vmmtui.console import LogPrinter, print_json
    from vmmtui.session import ConfigError, Session, SessionError

    if args.list_scenarios:
        print(list_scenarios())
        return EXIT_OK
    choice = _choice_or_refuse(args)
    if choice is None:
        return EXIT_USAGE
    printer = LogPrinter(verbose=args.verbose)

    def emit(e) -> None:
        if args.json:
            print_json(e, sys.stdout)
        else:
            printer(e)

    session = Session(_config(args), choice)
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
        for e in session.close():
            emit(e)
    ending = session.closed_event
    clean = ending is not None and ending.clean
    if interrupted is not None:
        where = f" during {at[0]} {at[1]}" if at else ""
        print(f"vmmtui: interrupted{where}; "
              + ("workers stopped, everything cleaned up" if clean else "left behind: " + "; ".join(ending.leftovers)),
              file=sys.stderr)
        return 128 + interrupted.signum
    if refused is not None:
        print(f"vmmtui: {refused}", file=sys.stderr)
        return EXIT_USAGE if isinstance(refused, ConfigError) else EXIT_FAILED
    if not args.json:
        printer.console.print(printer.summary())
    if session.outcome is not None:  # a scenario succeeds when it failed the way it promised, and cleaned up
        return EXIT_OK if session.outcome.as_expected and clean else EXIT_FAILED
    ok = session.verified and session.failure is None and session.fd_problems == 0
    return EXIT_OK if ok and clean else EXIT_FAILED


def cmd_soak(args: argparse.Namespace) -> int:
    import json

    from vmmtui.bench.soak import soak
    from vmmtui.session import ConfigError, SessionError

    if args.count < 1:
        print("vmmtui: --count must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    choice = _choice_or_refuse(args)
    if choice is None:
        return EXIT_USAGE
    config = _config(args)

    def progress(i: int, session) -> None:
        if not args.json and (i % 20 == 0 or i == args.count):
            print(f"{i}/{args.count} sessions" + ("" if session.verified else f" (last: {session.failure})"), flush=True)

    try:
        result = soak(config, args.count, progress, choice)
    except SessionError as exc:
        print(f"vmmtui: {exc}", file=sys.stderr)
        return EXIT_USAGE if isinstance(exc, ConfigError) else EXIT_FAILED
    if args.json:
        print(json.dumps(result.to_dict()))
    else:
        for name, unit in (("fds", ""), ("children", ""), ("tmp_entries", ""), ("rss", " bytes")):
            a, w, b = (getattr(r, name) for r in (result.start, result.warm, result.end))
            print(f"{name:<12} start {a}{unit}  after warm-up {w}{unit}  end {b}{unit}")
        print(f"{result.verified}/{result.count} verified on {result.backend} in {result.seconds:.1f} s: "
              + ("OK, nothing grew" if result.ok else "PROBLEMS: " + "; ".join(result.problems)))
    return EXIT_OK if result.ok else EXIT_FAILED


def cmd_bench(args: argparse.Namespace) -> int:
    import json
    from pathlib import Path

    from rich.console import Console

    from vmmtui.bench.report import init_line, table, targets_table
    from vmmtui.bench.run import DEFAULT_SIZES, Bench, BenchConfig, write

    if args.repeat < 1:
        print("vmmtui: --repeat must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    choice = choose(args.backend, args.device)
    if not choice.usable:
        print(f"vmmtui: {choice.reason}", file=sys.stderr)
        return EXIT_USAGE
    console = Console(stderr=args.json)
    config = BenchConfig(args.backend, args.sizes or list(DEFAULT_SIZES), args.repeat, args.device, args.memfd_max,
                         args.staged_max)
    result = Bench(config, choice, progress=lambda line: console.print(line, highlight=False)).run()
    js, plot = write(result, Path(args.out), args.name)
    if args.json:
        print(json.dumps(result))
    else:
        console.print(table(result))
        console.print(init_line(result))
        console.print(targets_table(result))
    console.print(f"wrote {js} and {plot}")
    bad = [p for p, sizes in result["paths"].items() for e in sizes.values()
           if len(set(e.get("verified", "0/1").split("/"))) != 1]  # "5/5" verified all, "4/5" did not
    if bad:
        console.print(f"[red]some runs did not verify: {', '.join(sorted(set(bad)))}[/]")
    return EXIT_FAILED if bad else EXIT_OK


def cmd_doctor(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    from vmmtui.doctor import diagnose

    rep = diagnose(args.device)
    table = Table(title="vmmtui doctor", show_header=False)
    table.add_column("check")
    table.add_column("finding")
    for f in rep.findings:
        mark = {True: "[green]✓[/]", False: "[red]✗[/]", None: " "}[f.ok]
        table.add_row(f.name, f"{mark} {f.value}")
    console = Console()
    console.print(table)
    if not rep.runnable:
        console.print("[red]Nothing can run here: neither the cuda nor the memfd backend works.[/]")
        return EXIT_FAILED
    console.print(f"vmmtui run will use the [bold]{'cuda' if rep.cuda_ok else 'memfd'}[/] backend by default.")
    return EXIT_OK


def cmd_app(args: argparse.Namespace) -> int:
    choice = _choice_or_refuse(args)
    if choice is None:
        return EXIT_USAGE
    from vmmtui.tui.app import InspectorApp

    app = InspectorApp(_config(args), choice, autoplay=args.autoplay, pace=args.pace,
                       screenshots=args.screenshots, transcript=args.transcript, stable=args.stable)
    app.run()
    return app.return_code or 0


def main(argv: list[str] | None = None) -> int:
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, _interrupt)
    try:
        args = parser().parse_args(argv)
        if args.command == "run":
            return cmd_run(args)
        if args.command == "doctor":
            return cmd_doctor(args)
        if args.command == "soak":
            return cmd_soak(args)
        if args.command == "bench":
            return cmd_bench(args)
        return cmd_app(args)
    except KeyboardInterrupt as exc:  # before or after a session: nothing of ours is running
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        print("vmmtui: interrupted; nothing was left running", file=sys.stderr)
        return 128 + signum


if __name__ == "__main__":
    sys.exit(main())
