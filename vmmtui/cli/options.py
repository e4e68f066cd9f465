"""What every command shares: one-line argument errors, value parsers, the session options,
the SessionConfig they make, and the one refusal check (config.validate)."""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable

from vmmtui.backends.labels import NAMES
from vmmtui.plan.config import (
    Direction,
    Mechanism,
    SessionConfig,
    Transport,
    Verify,
    choices,
    size_note,
    validate,
)
from vmmtui.stream.sizes import SizeError, parse_size
from vmmtui.system.interrupts import Interrupted, interrupt  # noqa: F401 - their home was here

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


class Parser(argparse.ArgumentParser):
    """argparse that says a bad option in one line (the README promises it), exit 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog} --help)\n")


def size_arg(text: str) -> int:
    try:
        return parse_size(text)
    except SizeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


#: the longest wait any option may ask for (30 days): beyond it timers overflow, and no one means it
MAX_SECONDS = 30 * 24 * 3600.0


def number_arg(
    low: float, high: float, *, integer: bool = False, above: bool = False, unit: str = ""
) -> Callable[[str], float]:
    """The one check of a number on the command line (an argparse ``type``): a finite number from
    ``low`` (excluded when ``above``) to ``high``; else one line that says the range, exit 2."""

    def show(x: float) -> str:
        return str(int(x)) if float(x).is_integer() else f"{x:g}"

    kind = "a whole number" if integer else "a number"
    span = (
        f"{kind} {'above' if above else 'from'} {show(low)} {'and ' if above else ''}"
        f"up to {show(high)}{unit}"
    )

    def parse(text: str) -> float:
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind}: give {span}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number: give {span}")
        if value < low or (above and value == low) or value > high:
            raise argparse.ArgumentTypeError(f"{text} is out of range: give {span}")
        return value

    parse.__name__ = "number"  # argparse names the type in some messages
    return parse


#: seconds, more than 0 (a --duration, a wait)
positive_arg = number_arg(0, MAX_SECONDS, above=True, unit=" s")
#: seconds to wait for connect/accept (the ACK waits 12x this)
timeout_arg = number_arg(0, 3600, above=True, unit=" s")
#: seconds between autoplay steps: below 10 ms no one could follow, and Textual's timer would spin
pace_arg = number_arg(0.01, 3600, unit=" s")


def count_arg(high: int) -> Callable[[str], int]:
    """A whole number from 1 to ``high`` (sessions, repetitions)."""
    return number_arg(1, high, integer=True)  # type: ignore[return-value]


#: a CUDA device ordinal (whether it exists, the driver says: config.validate)
device_arg: Callable[[str], int] = number_arg(0, 1023, integer=True)  # type: ignore[assignment]
#: a step of a recording (0: the start); the recording's own length is checked when it is read
step_arg: Callable[[str], int] = number_arg(0, 1_000_000, integer=True)  # type: ignore[assignment]


def sizes_arg(text: str) -> list[int]:
    try:
        sizes = [parse_size(t.strip()) for t in text.split(",") if t.strip()]
    except SizeError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    if not sizes:
        raise argparse.ArgumentTypeError("give at least one size")
    return sizes


def devices_arg(text: str) -> list[int]:
    try:
        devices = [int(d) for d in text.split(",") if d.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid device list {text!r}: use ordinals like 0,1"
        ) from None
    if not devices or min(devices) < 0:
        raise argparse.ArgumentTypeError(f"invalid device list {text!r}: use ordinals like 0,1")
    return devices


def scenario_arg(text: str) -> str:
    from vmmtui.scenarios import SCENARIOS

    if text not in SCENARIOS:
        raise argparse.ArgumentTypeError(
            f"unknown scenario {text!r}; `vmmtui run --list-scenarios` lists them"
        )
    return text


def session_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--backend",
        choices=NAMES,
        default="auto",
        help="cuda (GPU, VMM API), memfd (CPU analogue) or auto (cuda when it can run; default)",
    )
    p.add_argument(
        "--size",
        type=size_arg,
        default=parse_size("1MiB"),
        help="bytes to share: 1048576, 1MiB, 64MB, 2GiB (rounded up to the granularity; default 1MiB)",
    )
    p.add_argument("--device", type=device_arg, default=0, help="CUDA device ordinal (default 0)")
    p.add_argument(
        "--timeout",
        type=timeout_arg,
        default=10.0,
        help="seconds to wait for connect/accept (default 10); the ACK waits 12x this",
    )
    p.add_argument(
        "--scenario",
        metavar="NAME",
        type=scenario_arg,
        help="make one failure really happen (`vmmtui run --list-scenarios` lists them)",
    )
    p.add_argument(
        "--verify",
        choices=choices(Verify),
        default=Verify.AUTO.value,
        help="where the pattern is written and checked: device (kernels shipped as PTX; auto's choice on cuda, the host where they cannot load), "
        "host (a copy to the host + numpy; auto's choice on memfd) or both (they must agree)",
    )
    p.add_argument(
        "--mechanism",
        choices=choices(Mechanism),
        default=Mechanism.VMM.value,
        help="vmm: cuMemCreate + an exported fd (default); legacy: cuMemAlloc + a 64-byte "
        "cuIpcGetMemHandle handle, no fd (cuda only); pool: a stream-ordered memory pool "
        "exported as an fd, then each allocation's 64-byte export data (cuda only)",
    )
    p.add_argument(
        "--transport",
        choices=choices(Transport),
        default=Transport.SCM_RIGHTS.value,
        help="scm-rights: the fd travels in the message (default); pidfd: the producer sends its pid "
        "and the fd's number and the consumer takes the fd with pidfd_open + pidfd_getfd (PyTorch's "
        "expandable segments, UCX cuda_ipc)",
    )
    p.add_argument(
        "--consumers",
        type=int,
        default=1,
        metavar="N",
        help="consumer processes, each gets its own fd and maps the same allocation (1-8; default 1)",
    )
    p.add_argument(
        "--direction",
        choices=choices(Direction),
        default=Direction.PRODUCER_WRITES.value,
        help="producer-writes (default) or consumer-writes (memMapIPCDrv: each consumer "
        "writes its slice with a kernel, the producer verifies)",
    )
    p.add_argument(
        "--devices",
        type=devices_arg,
        metavar="0,1",
        help="GPUs the consumers spread over, round-robin (default: the producer's --device)",
    )
    p.add_argument(
        "--no-kernel",
        action="store_true",
        help="do not show the kernel's own record of each step (where eBPF runs: root, or "
        "CAP_BPF and CAP_PERFMON; it follows the workers' calls as `vmmtui trace` does)",
    )
    # ROLE:STEP:HOW makes that worker misbehave (vmmtui/worker/crash.py): for the tests only
    p.add_argument("--crash", help=argparse.SUPPRESS)


def config_from(args: argparse.Namespace) -> SessionConfig:
    return SessionConfig(
        backend=args.backend,
        size=args.size,
        device=args.device,
        connect_timeout=args.timeout,
        accept_timeout=args.timeout,
        ack_timeout=args.timeout * 12,
        # no step outlasts the ACK's wait (the producer gives up then); 5 s more lets the worker say so first
        step_timeout=args.timeout * 12 + 5,
        scenario=args.scenario,
        verify=args.verify,
        mechanism=args.mechanism,
        transport=args.transport,
        consumers=args.consumers,
        direction=args.direction,
        devices=args.devices,
        crash=getattr(args, "crash", None),
        kernel=not getattr(args, "no_kernel", False),
    )


def refusal(args: argparse.Namespace, choice) -> str | None:
    """Why this run cannot start, as one line with the fix; None when it can."""
    from vmmtui.scenarios import get

    if not choice.usable:
        return choice.reason
    return validate(
        config_from(args),
        choice.name,
        choice.devices,
        choice.capacity,
        get(args.scenario),
        choice.device_probe,
    )


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """``--help``: each command's opening text reflowed to the terminal's width at spaces (it was
    written at 96 columns and a terminal of 80 cut its words in two); indented lines (the
    examples) are kept as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        import textwrap

        out: list[str] = []
        prose: list[str] = []

        def flush() -> None:
            if prose:
                room = max(min(width, 96), 20)  # a wide terminal: lines still easy to read
                out.extend(
                    textwrap.wrap(
                        " ".join(prose), room, break_long_words=False, break_on_hyphens=False
                    )
                )
                prose.clear()

        for line in text.splitlines():
            if line and not line[0].isspace():
                prose.append(line.strip())
                continue
            flush()
            out.append(line.rstrip())
        flush()
        return "\n".join(indent + line if line else line for line in out) + "\n"


#: TERM values that name no terminal a screen can be drawn on (no cursor movement, no
#: alternate screen): an app drawn there shows its first frame and never answers a key
NO_SCREEN_TERMS = ("", "dumb", "unknown")


def not_a_terminal() -> str | None:
    """What the terminal lacks for a full screen, in words (``stdout is not a terminal``,
    ``TERM=dumb cannot draw a screen``), else None: the app reads keys from stdin, Textual draws
    on stderr, and both need a TERM that moves the cursor. None too when a web page draws the
    app (``vmmtui serve``: textual-serve names its driver in TEXTUAL_DRIVER, talks over pipes)."""
    import os

    if os.environ.get("TEXTUAL_DRIVER"):
        return None
    for name, stream in (("stdout", sys.stdout), ("stdin", sys.stdin), ("stderr", sys.stderr)):
        try:
            tty = stream is not None and stream.isatty()
        except (ValueError, OSError):  # closed
            tty = False
        if not tty:
            return f"{name} is not one"
    term = os.environ.get("TERM", "").strip()
    if term.lower() in NO_SCREEN_TERMS:
        said = f"TERM={term} draws no screen" if term else "TERM is not set"  # words above only
        return f"{said} (where the terminal can, set TERM=xterm-256color)"
    return None


def terminal_missing(what: str, instead: str) -> str | None:
    """Why the full-screen ``what`` cannot be drawn here, as one line with ``instead`` (what to
    run without a terminal); None when it can. Drawn into a pipe, an app writes escape codes into
    it; reading keys from /dev/null or a pipe, it spins at full CPU and never ends; on TERM=dumb
    it draws one frame and answers no key."""
    missing = not_a_terminal()
    if missing is None:
        return None
    return f"{what} is full-screen and needs a terminal, but {missing}; {instead}"


def choice_or_refuse(args: argparse.Namespace):
    """The backend to use, or None after printing the one-line reason it cannot run."""
    from vmmtui.backends import choose

    choice = choose(args.backend, args.device)
    refused = refusal(args, choice)
    if refused:
        print(f"vmmtui: {refused}", file=sys.stderr)
        return None
    if note := size_note(config_from(args), choice.name):
        print(f"vmmtui: {note}", file=sys.stderr)
    return choice
